#!/usr/bin/env bash
# make demo: from nothing to a healthy 3-member etcd cluster, with a key written and read back through
# the cluster's client Service.
#   1. a Kubernetes: $KUBECONFIG when set, else the local single-node cluster of hack/ (built once per
#      machine, ~15 min cold on 2 cores; ~20 s to start after that)
#   2. the operator: built, packed into an image, loaded, installed (CRDs, RBAC, Deployment)
#   3. an EtcdCluster "demo" in namespace etcd-demo: waits for Available, writes and reads a key, prints it
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/env.sh
NS=${DEMO_NAMESPACE:-etcd-demo}
TIMEOUT=${DEMO_TIMEOUT:-300}

if [ -z "${KUBECONFIG:-}" ]; then
  log "no KUBECONFIG given: using the local single-node Kubernetes (step 1/3)"
  bash hack/cluster-up.sh
  export KUBECONFIG=$LOCAL_KUBECONFIG
  LOCAL=1
else
  log "using the Kubernetes of KUBECONFIG=$KUBECONFIG (step 1/3)"
  LOCAL=
fi

log "building and installing the operator (step 2/3)"
bash hack/install-operator.sh

log "applying EtcdCluster demo (3 members) in namespace $NS (step 3/3)"
$KUBECTL create namespace "$NS" --dry-run=client -o yaml | $KUBECTL apply -f - >/dev/null
if [ "$($KUBECTL -n "$NS" get etcdcluster demo -o jsonpath='{.metadata.name}/{.spec.tls.client.enabled}' --ignore-not-found)" = "demo/" ]; then
  # TLS is decided when a cluster is created: one left by an older version of this demo stays plain text
  log "the demo cluster of an earlier run serves plain text: deleting it, so that it is created with TLS"
  $KUBECTL -n "$NS" delete etcdcluster demo --wait --timeout=120s
fi
existed=$($KUBECTL -n "$NS" get etcdcluster demo -o name --ignore-not-found)
t0=$(date +%s.%N)
# A last-applied-configuration saved from `kubectl get -o yaml | kubectl apply -f -` carries a
# resourceVersion, which makes every later `kubectl apply` fail; without it, apply changes only what the
# sample sets. (Not server-side apply: it would drop the TLS settings the webhook defaulted at creation,
# which the sample does not list, and switch TLS off.)
if $KUBECTL -n "$NS" get etcdcluster demo --ignore-not-found \
    -o jsonpath='{.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}' | grep -q '"resourceVersion"'; then
  log "the demo cluster's last-applied-configuration holds a resourceVersion (saved from kubectl get -o yaml): dropping it so that kubectl apply can update the cluster"
  $KUBECTL -n "$NS" annotate etcdcluster demo kubectl.kubernetes.io/last-applied-configuration- >/dev/null
fi
$KUBECTL -n "$NS" apply -f config/samples/etcdcluster.yaml
log "waiting up to ${TIMEOUT}s for the cluster to be Available"
until $KUBECTL -n "$NS" wait etcdcluster/demo --for=condition=Available --timeout=5s >/dev/null 2>&1; do
  el=$(printf '%.0f' "$(echo "$(date +%s.%N) - $t0" | bc)")
  if [ "$el" -ge "$TIMEOUT" ]; then
    echo "The cluster did not become Available within ${TIMEOUT}s. What the operator says:" >&2
    $KUBECTL -n "$NS" get etcdcluster demo -o yaml >&2 || true
    $KUBECTL -n "$NS" get pods -o wide >&2 || true
    $KUBECTL -n etcd-operator-system logs -l app.kubernetes.io/name=etcd-operator --prefix --tail=30 >&2 || true   # every replica: the leader reconciles
    exit 1
  fi
  # phase, ready voters, desired members, and what the operator is doing; the status can lack a field
  # until the operator's first pass writes it. jsonpath prints no final newline, so read returns 1 at
  # the end of its input (having set the variables): || true keeps set -e from ending the script.
  IFS='|' read -r phase ready desired doing < <($KUBECTL -n "$NS" get etcdcluster demo -o jsonpath='{.status.phase}|{.status.readyReplicas}|{.spec.replicas}|{.status.conditions[?(@.type=="Progressing")].message}' 2>/dev/null || true) || true
  log "  ${phase:-Pending} ${ready:-0}/${desired:-?} ready: ${doing:-waiting for the first pass of the operator}"
done
avail=$(echo "$(date +%s.%N) - $t0" | bc)
if [ -n "$existed" ]; then
  log "Available: the cluster of an earlier run (checked in $(printf '%.1f' "$avail")s)"
else
  log "Available $(printf '%.1f' "$avail")s after it was created"
fi

# etcdctl runs in a pod of its own, as a client application would, with the client certificate the
# operator issued in Secret demo-client-tls (ca.crt, tls.crt, tls.key).
EP="https://demo-client.$NS.svc.cluster.local:2379"
IMAGE=$($KUBECTL -n "$NS" get pod demo-0 -o jsonpath='{.spec.containers[?(@.name=="etcd")].image}')
etcdctl_pod() { # etcdctl_pod NAME ARG...: run etcdctl ARG... in pod NAME, print its output
  local name=$1 args
  shift
  args=$(printf '"%s",' "$@")
  $KUBECTL -n "$NS" delete pod "$name" --ignore-not-found --wait >/dev/null
  $KUBECTL -n "$NS" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $name}
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: etcdctl
    image: $IMAGE
    command: ["/usr/local/bin/etcdctl", "--endpoints=$EP", "--cacert=/etc/etcd-client/ca.crt",
              "--cert=/etc/etcd-client/tls.crt", "--key=/etc/etcd-client/tls.key", ${args%,}]
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
    volumeMounts: [{name: tls, mountPath: /etc/etcd-client, readOnly: true}]
  volumes: [{name: tls, secret: {secretName: demo-client-tls}}]
YAML
  if ! $KUBECTL -n "$NS" wait "pod/$name" --for=jsonpath='{.status.phase}'=Succeeded --timeout=90s >/dev/null; then
    echo "etcdctl $* did not succeed in pod $name:" >&2
    $KUBECTL -n "$NS" logs "$name" >&2 || true
    $KUBECTL -n "$NS" describe pod "$name" | tail -15 >&2 || true
    exit 1
  fi
  $KUBECTL -n "$NS" logs "$name"
  $KUBECTL -n "$NS" delete pod "$name" --wait=false >/dev/null
}
log "writing and reading a key through the client Service $EP, with the client certificate in Secret demo-client-tls"
etcdctl_pod etcdctl-put put greeting "hello from etcd-operator" >/dev/null
got=$(etcdctl_pod etcdctl-get get greeting --print-value-only)
[ "$got" = "hello from etcd-operator" ] || { echo "read back '$got', want 'hello from etcd-operator'" >&2; exit 1; }
echo
echo "greeting = $got"
echo
$KUBECTL -n "$NS" get etcdcluster demo
echo
$KUBECTL -n "$NS" get etcdcluster demo -o jsonpath='{range .status.members[*]}{.name}{"\t"}{.id}{"\t"}{.role}{"\tleader="}{.leader}{"\thealthy="}{.healthy}{"\t"}{.version}{"\n"}{end}' |
  sed 's/leader=\t/leader=false\t/' | column -t   # the status leaves leader out for a follower
echo
log "done. Try: kubectl -n $NS get etcdcluster,pods,pvc,svc${LOCAL:+   (export KUBECONFIG=$LOCAL_KUBECONFIG)}"
