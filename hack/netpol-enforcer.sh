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

# running: the PID of the enforcer when it runs (not a zombie)
running() {
  local p
  p=$(cat "$PIDF" 2>/dev/null) && [ -n "$p" ] && [ "$(cat /proc/"$p"/comm 2>/dev/null)" = kube-router ] &&
    [ "$(cut -d' ' -f3 /proc/"$p"/stat 2>/dev/null)" != Z ] && echo "$p"
}

# cleanup_rules: the mangle rule first, then the jumps from the built-in chains into kube-router's, its
# chains, its ipsets; each step goes on whatever the one before found
cleanup_rules() {
  command -v iptables >/dev/null || return 0
  while iptables -t mangle -C "${LEAK[@]}" 2>/dev/null; do iptables -t mangle -D "${LEAK[@]}" || break; done
  local ch rule chains c
  for ch in INPUT FORWARD OUTPUT; do
    while read -r rule; do
      [ -n "$rule" ] && eval "iptables -t filter -D $rule" || true
    done < <(iptables -t filter -S "$ch" 2>/dev/null | grep -E -- "-j KUBE-ROUTER-$ch( |\$)" | sed 's/^-A //' || true)
  done
  chains=$(iptables -t filter -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE-ROUTER-(INPUT|FORWARD|OUTPUT)|KUBE-POD-FW-|KUBE-NWPLCY-)/ {print $2}' || true)
  for c in $chains; do iptables -t filter -F "$c" || true; done
  for c in $chains; do iptables -t filter -X "$c" || true; done
  if command -v ipset >/dev/null; then
    for c in $(ipset list -n 2>/dev/null | grep -E '^(inet6:)?(KUBE-(SRC|DST)-|TMP-)' || true); do ipset destroy "$c" 2>/dev/null || true; done
  fi
}

# stop_enforcer: SIGTERM, up to 10 s, then SIGKILL while it is still the enforcer; then its rules
stop_enforcer() {
  local p
  if p=$(running); then
    kill "$p" 2>/dev/null || true
    for _ in $(seq 1 40); do running >/dev/null || break; sleep 0.25; done
    if running >/dev/null; then kill -9 "$p" 2>/dev/null || true; fi
    log "stopped kube-router ($p)"
  fi
  rm -f "$PIDF"
  cleanup_rules
}

case "${1:-}" in
start)
  if p=$(running); then
    iptables -t mangle -C "${LEAK[@]}" 2>/dev/null || iptables -t mangle -I "${LEAK[@]}"
    log "kube-router already runs (pid $p)"; exit 0
  fi
  bash "$H/build-kube-router.sh" >/dev/null
  KR=$(bash "$H/build-kube-router.sh" --print)
  cleanup_rules   # what a crashed enforcer left: its jumps must not pass for the new one's
  mkdir -p "$LK/run" "$LK/logs"
  iptables -t mangle -I "${LEAK[@]}"
  setsid "$KR" --kubeconfig="$LOCAL_KUBECONFIG" --hostname-override="$NODE_NAME" \
    --run-firewall=true --run-router=false --run-service-proxy=false --run-loadbalancer=false \
    --enable-ipv4=true --enable-ipv6=false --service-cluster-ip-range="$SERVICE_CIDR" \
    --service-node-port-range=30000-32767 --health-port=0 --metrics-port=0 --iptables-sync-period=5m --v=1 \
    >>"$LK/logs/kube-router.log" 2>&1 </dev/null &
  echo $! > "$PIDF"
  # ready once its chains are hooked into INPUT, FORWARD and OUTPUT (its first full sync)
  for _ in $(seq 1 60); do
    hooked=0
    for ch in INPUT FORWARD OUTPUT; do
      iptables -t filter -S "$ch" 2>/dev/null | grep -q -- "-j KUBE-ROUTER-$ch" && hooked=$((hooked + 1))
    done
    if [ $hooked = 3 ]; then
      log "kube-router enforces NetworkPolicies (pid $(cat "$PIDF"), log $LK/logs/kube-router.log)"; exit 0
    fi
    running >/dev/null || break
    sleep 0.5
  done
  tail -20 "$LK/logs/kube-router.log" >&2
  echo "kube-router did not hook its chains within 30 s, or exited: see its log above; stopped it and removed its rules" >&2
  stop_enforcer
  exit 1
  ;;
stop)
  stop_enforcer
  exit 0
  ;;
*) echo "usage: $0 start|stop" >&2; exit 2;;
esac
