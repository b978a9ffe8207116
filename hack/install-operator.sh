#!/usr/bin/env bash
# Builds the operator image, loads it (and the etcd images) into the local cluster's containerd when
# KUBECONFIG is the local cluster, and installs CRDs, RBAC and the Deployment (config/local), then waits
# for the operator to be ready. On another cluster, the image must be reachable by its nodes: set IMG.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/env.sh
KUBECTL=kubectl
[ -x "$K8S_BIN/kubectl" ] && KUBECTL=$K8S_BIN/kubectl
make -s image
if [ "${KUBECONFIG:-}" = "$LOCAL_KUBECONFIG" ]; then
  bash hack/load-image.sh bin/etcd-operator.tar
else
  log "KUBECONFIG is not the local cluster: the nodes must be able to pull the operator image themselves"
fi
log "installing CRDs, RBAC and the operator (config/local)"
go tool -modfile=hack/tools/go.mod kustomize build config/local | $KUBECTL apply --server-side --force-conflicts -f - >/dev/null
# a new image under the same tag needs new pods
$KUBECTL -n etcd-operator-system rollout restart deploy/etcd-operator >/dev/null
$KUBECTL -n etcd-operator-system rollout status deploy/etcd-operator --timeout=180s
$KUBECTL wait crd/etcdclusters.etcd.etcdkit.dev --for=condition=Established --timeout=60s >/dev/null
log "operator ready"
