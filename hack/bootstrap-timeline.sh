#!/usr/bin/env bash
# Applies a 3-member EtcdCluster (config/samples/etcdcluster.yaml) in a new namespace and prints a
# timeline of its bootstrap: the pods' and claims' watch events and each member's etcd milestones
# (started, peers' names not found, leader elected), in seconds after the apply, then how long it took
# to become Available. Used to find where bootstrap time goes.
#
#   usage: hack/bootstrap-timeline.sh NAMESPACE      (KUBECONFIG as for kubectl; the namespace must not exist)
#
# Needs kubectl (on PATH, or $KUBECTL), bc, and a running operator. Delete the namespace afterwards.
set -euo pipefail
KUBECTL=${KUBECTL:-kubectl}
NS=${1:?usage: hack/bootstrap-timeline.sh NAMESPACE}
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT

now() { date +%s.%3N; }
stamp() { while IFS= read -r l; do printf '%s %s\n' "$(now)" "$l"; done; }

"$KUBECTL" create namespace "$NS" >/dev/null
"$KUBECTL" -n "$NS" get pods -w --output-watch-events \
  -o custom-columns='EVENT:.type,POD:.object.metadata.name,PHASE:.object.status.phase,IP:.object.status.podIP,INIT:.object.status.initContainerStatuses[*].state' | stamp >"$dir/pods" &
"$KUBECTL" -n "$NS" get pvc -w --output-watch-events | stamp >"$dir/pvc" &
sleep 1 # the watches print nothing for an empty namespace: give them a moment to start

t0=$(now)
"$KUBECTL" -n "$NS" apply -f config/samples/etcdcluster.yaml >/dev/null
name=$("$KUBECTL" -n "$NS" get etcdcluster -o jsonpath='{.items[0].metadata.name}')
"$KUBECTL" -n "$NS" wait "etcdcluster/$name" --for=condition=Available --timeout=5m >/dev/null
t1=$(now)

rel() { awk -v t0="$t0" '{ printf "%7.2f ", $1 - t0; $1 = ""; print }'; }
echo "== claims"; rel <"$dir/pvc"
echo "== pods"; rel <"$dir/pods"
for p in $("$KUBECTL" -n "$NS" get pods -o jsonpath='{.items[*].metadata.name}'); do
  echo "== etcd in $p"
  "$KUBECTL" -n "$NS" logs "$p" -c etcd |
    grep -E '"msg":"(starting an etcd server|prober detected unhealthy status|raft.node: .* elected leader .*|ready to serve client requests)"' |
    sed -E 's/.*"ts":"([^"]*)".*"msg":"([^"]*)".*/\1 \2/' | head -6 |
    while read -r ts msg; do printf '%7.2f %s\n' "$(echo "$(date -d "$ts" +%s.%N) - $t0" | bc)" "$msg"; done
done
printf 'Available %.1f s after the apply\n' "$(echo "$t1 - $t0" | bc)"
