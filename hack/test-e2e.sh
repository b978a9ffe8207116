#!/usr/bin/env bash
# make test-e2e: the end-to-end suite (test/e2e) against $KUBECONFIG, or against the local
# single-node cluster (brought up when needed). Installs the operator built from this tree first.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/env.sh
# the S3 server the backup tests run in the cluster (docker.io/local/versitygw:$VERSITYGW_VERSION)
bash hack/build-s3.sh --image
# the registry the release test runs in the cluster and pushes the operator image to
bash hack/build-registry.sh >/dev/null
export E2E_REGISTRY_IMAGE=${E2E_REGISTRY_IMAGE:-$(bash hack/build-registry.sh --print)}
if [ -z "${KUBECONFIG:-}" ]; then
  bash hack/cluster-up.sh
  export KUBECONFIG=$LOCAL_KUBECONFIG
fi
if [ "$KUBECONFIG" = "$LOCAL_KUBECONFIG" ]; then
  bash hack/load-image.sh "$IMAGES/versitygw-$VERSITYGW_VERSION.tar" "$IMAGES/oci-registry.tar"
  # the repair tests damage a member's data from a pod with a shell: the local cluster's busybox
  . hack/storage/env.sh
  export E2E_SHELL_IMAGE=${E2E_SHELL_IMAGE:-docker.io/local/busybox:$BUSYBOX_TAG}
  # the NetworkPolicy test runs an enforcer for its duration (the local cluster has none otherwise)
  bash hack/build-kube-router.sh
  export E2E_NETPOL_ENFORCER=${E2E_NETPOL_ENFORCER:-$PWD/hack/netpol-enforcer.sh}
  # The release test's node pulls operator images of tags no other run uses (v0.0.0-e2e.<seconds>)
  # from its registry at 127.0.0.1:<port>: removed from the node when the tests end.
  remove_release_images() {
    CONTAINER_RUNTIME_ENDPOINT=unix://$CONTAINERD_SOCK crictl images 2>/dev/null |
      awk '$1 ~ /^127\.0\.0\.1:[0-9]+\/etcd-operator$/ && $2 ~ /^v0\.0\.0-e2e\./ {print $3}' |
      xargs -r env CONTAINER_RUNTIME_ENDPOINT=unix://$CONTAINERD_SOCK crictl rmi >/dev/null 2>&1 || true
  }
  # stopped also when go test is killed or times out (its t.Cleanup does not run then)
  trap 'bash hack/netpol-enforcer.sh stop >/dev/null 2>&1 || true; remove_release_images' EXIT
fi
# the cert-manager test runs cert-manager's certificate controllers as a process of its own, unless
# E2E_CERT_MANAGER=cluster says the cluster runs cert-manager
if [ "${E2E_CERT_MANAGER:-}" != cluster ]; then
  bash hack/build-cert-manager.sh
  export CERT_MANAGER=${CERT_MANAGER:-$(bash hack/build-cert-manager.sh --print)}
fi
# The operator's waits that only give clients time to move (the grace period of a TLS switch, each phase
# of a CA change) are shortened to 30 s unless OPERATOR_ARGS says otherwise (OPERATOR_ARGS= for the
# defaults); the unit and integration tests cover the defaults.
export OPERATOR_ARGS=${OPERATOR_ARGS---tls-switch-grace=30s --ca-rotation-dwell=30s}
bash hack/install-operator.sh
log "running the end-to-end tests (about 60 minutes, a chaos run of 20 faults, a CA rotation, TLS switched on and off, and certificates the user keeps or cert-manager issues and a NetworkPolicy under an enforcing plugin included)"
rc=0
go test -tags e2e -count=1 -v -parallel "${E2E_PARALLEL:-3}" -timeout "${E2E_TIMEOUT:-75m}" ./test/e2e/... ${E2E_ARGS:-} || rc=$?
if [ $rc -ne 0 ]; then
  echo "== end-to-end tests failed; the operator's last log lines:"
  $KUBECTL -n etcd-operator-system logs -l app.kubernetes.io/name=etcd-operator --prefix --tail=60 || true   # every replica: the leader reconciles
  $KUBECTL get etcdclusters,pods -A -o wide || true
fi
exit $rc
