#!/usr/bin/env bash
# Enforces NetworkPolicies on the local cluster while a test needs it: kube-router's firewall controller
# alone (no routing, no service proxy, no listener), as a host process like the cluster's other daemons.
#
#   netpol-enforcer.sh start   starts it (hack/build-kube-router.sh builds it) and waits for its chains
#   netpol-enforcer.sh stop    stops it and removes what it left in iptables and ipset
#
# What it changes besides enforcing policies, and what this script does about it:
#   - It accepts a pod's allowed traffic at the head of FORWARD, before kube-proxy's rules that refuse
#     traffic to a Service without endpoints; such packets would leave the machine by its default
#     route. While it runs, a mangle-table rule drops pod traffic that leaves the pod network.
#   - The node's own traffic to pods (kubelet probes, host processes) is always let through.
#   - Its own --cleanup-config does not remove its rules (v2.1.0), so stop removes them.
# Log: $LK/logs/kube-router.log; PID: $LK/run/kube-router.pid.
set -euo pipefail
H=$(cd "$(dirname "$0")" && pwd)
. "$H/env.sh"
PIDF=$LK/run/kube-router.pid
LEAK=(FORWARD -s "$CLUSTER_CIDR" ! -d "$CLUSTER_CIDR" -m comment --comment etcd-operator-netpol-enforcer -j DROP)

running() { local p; p=$(cat "$PIDF" 2>/dev/null) && [ -n "$p" ] && [ "$(cat /proc/"$p"/comm 2>/dev/null)" = kube-router ] && echo "$p"; }

cleanup_rules() {
  # the jumps from the built-in chains into kube-router's, then its chains, then its ipsets
  for ch in INPUT FORWARD OUTPUT; do
    iptables -t filter -S "$ch" 2>/dev/null | grep -E -- "-j KUBE-ROUTER-$ch( |\$)" | sed 's/^-A //' |
      while read -r rule; do eval "iptables -t filter -D $rule"; done
  done
  local chains c
  chains=$(iptables -t filter -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE-ROUTER-(INPUT|FORWARD|OUTPUT)|KUBE-POD-FW-|KUBE-NWPLCY-)/ {print $2}')
  for c in $chains; do iptables -t filter -F "$c"; done
  for c in $chains; do iptables -t filter -X "$c"; done
  if command -v ipset >/dev/null; then
    for c in $(ipset list -n 2>/dev/null | grep -E '^(inet6:)?KUBE-(SRC|DST)-'); do ipset destroy "$c" || true; done
  fi
  while iptables -t mangle -C "${LEAK[@]}" 2>/dev/null; do iptables -t mangle -D "${LEAK[@]}"; done
}

case "${1:-}" in
start)
  if p=$(running); then log "kube-router already runs (pid $p)"; exit 0; fi
  bash "$H/build-kube-router.sh" >/dev/null
  KR=$(bash "$H/build-kube-router.sh" --print)
  mkdir -p "$LK/run" "$LK/logs"
  iptables -t mangle -C "${LEAK[@]}" 2>/dev/null || iptables -t mangle -I "${LEAK[@]}"
  setsid "$KR" --kubeconfig="$LOCAL_KUBECONFIG" --hostname-override="$NODE_NAME" \
    --run-firewall=true --run-router=false --run-service-proxy=false --run-loadbalancer=false \
    --enable-ipv4=true --enable-ipv6=false --service-cluster-ip-range="$SERVICE_CIDR" \
    --service-node-port-range=30000-32767 --health-port=0 --metrics-port=0 --iptables-sync-period=5m --v=1 \
    >>"$LK/logs/kube-router.log" 2>&1 </dev/null &
  echo $! > "$PIDF"
  # ready once its chain is hooked into FORWARD (its first full sync)
  for _ in $(seq 1 60); do
    if iptables -t filter -S FORWARD 2>/dev/null | grep -q -- '-j KUBE-ROUTER-FORWARD'; then
      log "kube-router enforces NetworkPolicies (pid $(cat "$PIDF"), log $LK/logs/kube-router.log)"; exit 0
    fi
    running >/dev/null || { tail -20 "$LK/logs/kube-router.log" >&2; echo "kube-router exited: see its log above" >&2; exit 1; }
    sleep 0.5
  done
  tail -20 "$LK/logs/kube-router.log" >&2
  echo "kube-router did not hook its chains into FORWARD within 30 s: see its log above" >&2
  exit 1
  ;;
stop)
  if p=$(running); then
    kill "$p"
    for _ in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$p" 2>/dev/null || true
    log "stopped kube-router ($p)"
  fi
  rm -f "$PIDF"
  if command -v iptables >/dev/null; then cleanup_rules; fi
  ;;
*) echo "usage: $0 start|stop" >&2; exit 2;;
esac
