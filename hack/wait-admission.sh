#!/usr/bin/env bash
# Waits until an EtcdCluster can be created: what users rely on right after installing or upgrading the
# operator. `kubectl rollout status` is not enough: the webhook Service may still route to an old pod
# that is shutting down, or kube-proxy may not have programmed the new pod's endpoint yet, and the API
# server then refuses every EtcdCluster ("failed calling webhook ... connection refused").
#   1. no operator pod is terminating, and every pod left belongs to the current rollout;
#   2. a server-side dry run of creating an EtcdCluster (it passes through the mutating and the
#      validating webhook, through their Service, exactly as a real create) is accepted 3 times in a row.
# Progress every few seconds; fails after ADMISSION_TIMEOUT seconds (default 120) with the last error.
#   usage: hack/wait-admission.sh            (KUBECONFIG as for kubectl)
#   OPERATOR_NAMESPACE (default etcd-operator-system) is the operator's namespace; ADMISSION_NAMESPACE
#   (default: default) the namespace of the dry run: for a namespace-scoped install, one it watches.
#   Needs only kubectl (on PATH, or $KUBECTL) and this repository's config/samples.
set -euo pipefail
cd "$(dirname "$0")/.."
KUBECTL=${KUBECTL:-kubectl}
EO_T0=${EO_T0:-$(date +%s)}
log() { printf '[%4ss] %s\n' "$(( $(date +%s) - EO_T0 ))" "$*"; }
NS=${OPERATOR_NAMESPACE:-etcd-operator-system}
ADMISSION_NAMESPACE=${ADMISSION_NAMESPACE:-default}
TIMEOUT=${ADMISSION_TIMEOUT:-120}
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
last_note=0
# note MSG: a progress line at most every 5 s
note() { if [ $(( $(date +%s) - last_note )) -ge 5 ]; then log "  ${1} ($(elapsed)s)"; last_note=$(date +%s); fi; }
fail() {
  echo "admission does not answer after ${TIMEOUT}s: $1" >&2
  echo "What to check: kubectl -n $NS get pods,endpointslices; kubectl -n $NS logs -l app.kubernetes.io/name=etcd-operator --prefix (every replica); the operator logs why it is not ready ('Not ready: ...')." >&2
  $KUBECTL -n $NS get pods -o wide >&2 || true
  exit 1
}

log "waiting for old operator pods to be gone"
while :; do
  want=$($KUBECTL -n $NS get deploy etcd-operator -o 'jsonpath={.spec.replicas}')
  pods=$($KUBECTL -n $NS get pods -l app.kubernetes.io/name=etcd-operator \
    -o 'jsonpath={range .items[*]}{.metadata.name}{" "}{.metadata.deletionTimestamp}{"\n"}{end}')
  total=$(printf '%s\n' "$pods" | grep -c . || true)
  terminating=$(printf '%s\n' "$pods" | awk 'NF>1' | wc -l)
  [ "$terminating" -eq 0 ] && [ "$total" -eq "$want" ] && break
  [ "$(elapsed)" -ge "$TIMEOUT" ] && fail "$total operator pods, $terminating terminating, want $want"
  note "$total operator pods, $terminating terminating, want $want"
  sleep 1
done

log "waiting for admission to answer through the webhook Service (server-side dry run of an EtcdCluster)"
ok=0
while [ $ok -lt 3 ]; do
  if out=$(sed "s/^  namespace: default$/  namespace: $ADMISSION_NAMESPACE/" config/samples/admission-check.yaml |
    $KUBECTL create --dry-run=server -o name -f - 2>&1); then
    ok=$((ok + 1))
  else
    ok=0
    [ "$(elapsed)" -ge "$TIMEOUT" ] && fail "$out"
    note "not yet: $(printf '%s' "$out" | tail -1 | cut -c1-200)"
  fi
  if [ $ok -lt 3 ]; then sleep 1; fi
done
log "admission answers ($(elapsed)s)"
