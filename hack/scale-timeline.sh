#!/usr/bin/env bash
# Scales an EtcdCluster from FROM to TO members and back, RUNS times, and prints for each scale-up the
# seconds until the cluster is Available with TO ready members and nothing in progress, the new members'
# etcd milestones (started, snapshot received, published itself, serving) in seconds after the change,
# and how many of them lost their first publish to the leader's snapshot (etcd-io/etcd#16436: such a
# member serves only 7 s after it started). Used to find where scale-up time goes.
#
#   usage: hack/scale-timeline.sh NAMESPACE NAME FROM TO      (RUNS=6 by default; KUBECONFIG as for kubectl)
#
# Needs kubectl (on PATH, or $KUBECTL), bc, and a running operator; the cluster must exist with FROM
# members. It is left with FROM members.
set -euo pipefail
KUBECTL=${KUBECTL:-kubectl}
NS=${1:?usage: hack/scale-timeline.sh NAMESPACE NAME FROM TO}
NAME=${2:?usage: hack/scale-timeline.sh NAMESPACE NAME FROM TO}
FROM=${3:?usage: hack/scale-timeline.sh NAMESPACE NAME FROM TO}
TO=${4:?usage: hack/scale-timeline.sh NAMESPACE NAME FROM TO}
RUNS=${RUNS:-6}
[ "$TO" -gt "$FROM" ] || { echo "TO must be greater than FROM" >&2; exit 2; }

now() { date +%s.%3N; }
field() { "$KUBECTL" -n "$NS" get etcdcluster "$NAME" -o jsonpath="$1"; }
settled() { # n: the cluster has n ready members, is Available and has nothing in progress
  [ "$(field '{.status.readyReplicas}')" = "$1" ] &&
    [ "$(field '{.status.conditions[?(@.type=="Available")].status}')" = True ] &&
    [ "$(field '{.status.conditions[?(@.type=="Progressing")].status}')" = False ]
}
scale_to() { "$KUBECTL" -n "$NS" patch etcdcluster "$NAME" --type merge -p "{\"spec\":{\"replicas\":$1}}" >/dev/null; }
wait_settled() { # n, deadline in seconds
  local deadline=$(($(date +%s) + $2))
  until settled "$1"; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "not settled at $1 members within $2 s" >&2; exit 1; }
    sleep 0.2
  done
}
gone() { # the pods and claims of the members above FROM are gone
  [ "$("$KUBECTL" -n "$NS" get pods -l "etcd.etcdkit.dev/cluster=$NAME" --no-headers 2>/dev/null | wc -l)" -le "$FROM" ] &&
    [ "$("$KUBECTL" -n "$NS" get pvc -l "etcd.etcdkit.dev/cluster=$NAME" --no-headers 2>/dev/null | wc -l)" -le "$FROM" ]
}

wait_settled "$FROM" 300
totals=()
for run in $(seq 1 "$RUNS"); do
  t0=$(now)
  scale_to "$TO"
  wait_settled "$TO" 300
  took=$(echo "$(now) - $t0" | bc)
  totals+=("$took")
  lost=0
  echo "== run $run: $FROM -> $TO settled in ${took} s"
  for i in $(seq "$FROM" $((TO - 1))); do
    p=$NAME-$i
    log=$("$KUBECTL" -n "$NS" logs "$p" -c etcd 2>/dev/null || true)
    if grep -q '"msg":"failed to publish local member' <<<"$log"; then lost=$((lost + 1)); fi
    grep -E '"msg":"(starting an etcd server|receiving database snapshot|failed to publish local member to cluster through raft|ready to serve client requests)"' <<<"$log" |
      sed -E 's/.*"ts":"([^"]*)".*"msg":"([^"]*)".*/\1 \2/' | head -5 |
      while read -r ts msg; do printf '   %-8s %6.2f %s\n' "$p" "$(echo "$(date -d "$ts" +%s.%N) - $t0" | bc)" "$msg"; done
  done
  echo "   members that lost their first publish: $lost of $((TO - FROM))"
  scale_to "$FROM"
  wait_settled "$FROM" 300
  deadline=$(($(date +%s) + 180))
  until gone; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "the removed members' pods and claims are not gone within 180 s" >&2; exit 1; }
    sleep 1
  done
done
printf '%s\n' "${totals[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%s -> %s over %d runs: min %.1f s, median %.1f s, max %.1f s\n", "'"$FROM"'", "'"$TO"'", NR, a[1], (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2), a[NR]}'
