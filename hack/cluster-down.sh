#!/usr/bin/env bash
# Stops the local cluster started by cluster-up.sh: the daemons recorded in $LK/run (only when the PID
# still runs that daemon's binary for this $LK, so a reused PID is never killed), the pods (torn down
# through CRI so CNI releases veths and addresses), and what the stack leaves outside $LK: kube-proxy's
# and kubelet's iptables chains, the NetworkPolicy enforcer a test may have left (netpol-enforcer.sh)
# with its chains and ipsets, the cni0 bridge, pod network namespaces, mounts, kubepods cgroups,
# libcni's cache, /var/log/containers links, sysctls.
#   cluster-down.sh          keep the cluster state (etcd data, PVs, pki): cluster-up.sh brings it back
#   cluster-down.sh --purge  also delete $LK, so the next cluster-up.sh starts from scratch
set -uo pipefail
H=$(cd "$(dirname "$0")" && pwd)
. "$H/env.sh"
PURGE=0
case "${1:-}" in --purge) PURGE=1;; "") ;; *) echo "usage: $0 [--purge]" >&2; exit 2;; esac
case "$LK" in /|/tmp|/root|/home|"$HOME"|"") echo "refusing to work on LK=$LK" >&2; exit 1;; esac
log "stopping the local cluster ($LK)"

# pid NAME: the PID of daemon NAME if it is alive, runs the NAME binary and belongs to this $LK
pid() {
  local p exe
  p=$(cat "$LK/run/$1.pid" 2>/dev/null) && [ -n "$p" ] || return 1
  exe=$(readlink "/proc/$p/exe" 2>/dev/null) || return 1
  exe=${exe% (deleted)}
  [ "${exe##*/}" = "$1" ] && grep -qaF -- "$LK/" "/proc/$p/cmdline" 2>/dev/null && echo "$p"
}
# running PID: alive and not a zombie waiting to be reaped
running() { [ -r "/proc/$1/stat" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null)" != Z ]; }
# stop NAME: SIGTERM, up to 10 s, then SIGKILL; forget the PID file either way
stop() {
  local n=$1 p i
  if p=$(pid "$n"); then
    kill "$p" 2>/dev/null
    for ((i = 0; i < 100; i++)); do running "$p" || break; sleep 0.1; done
    running "$p" && kill -9 "$p"
    log "stopped $n ($p)"
  fi
  rm -f "$LK/run/$n.pid"
}

# the NetworkPolicy enforcer a test may have left running, and its iptables rules and ipsets
bash "$H/netpol-enforcer.sh" stop
stop kubelet
# all pod sandboxes, through CRI while containerd still runs (CNI DEL frees addresses and veths)
CRICTL=$TOOLS_BIN/crictl
if pid containerd >/dev/null && [ -x "$CRICTL" ]; then
  n=$("$CRICTL" --runtime-endpoint "unix://$CONTAINERD_SOCK" pods -q 2>/dev/null | wc -l)
  [ "$n" -gt 0 ] && "$CRICTL" --runtime-endpoint "unix://$CONTAINERD_SOCK" rmp -fa >/dev/null 2>&1 && log "removed $n pod sandboxes via CRI"
fi
stop kube-proxy
[ -x "$K8S_BIN/kube-proxy" ] && "$K8S_BIN/kube-proxy" --cleanup >/dev/null 2>&1
stop containerd
# shims of our containerd that outlived it: a shim's working directory is its bundle under our state dir
for d in /proc/[0-9]*; do
  case "$(readlink "$d/cwd" 2>/dev/null)" in "$LK"/containerd/state/*)
    [ "$(cat "$d/comm" 2>/dev/null)" = containerd-shim ] && kill -9 "${d#/proc/}" 2>/dev/null && log "killed leftover shim ${d#/proc/}";;
  esac
done
# pod processes still alive (e.g. containerd was gone already): in kubelet's kubepods cgroups, with a
# root filesystem from our containerd (its overlay mount names our state dir)
for p in $(find /sys/fs/cgroup/pids/kubepods /sys/fs/cgroup/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u); do
  grep -qF "$LK/containerd/" "/proc/$p/mountinfo" 2>/dev/null && kill -9 "$p" 2>/dev/null && log "killed leftover pod process $p"
done
stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver
stop etcd

# mounts below $LK (pod volumes, overlay rootfs, shm), deepest first
grep -F " $LK/" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
done
# pod network namespaces not torn down through CRI: those whose interface has an address of our pod range
prefix=${POD_CIDR%.*}.
for f in /var/run/netns/cni-*; do
  [ -e "$f" ] || continue; n=${f##*/}
  ip -n "$n" -4 -o addr show 2>/dev/null | grep -qF " inet $prefix" && ip netns delete "$n" && log "deleted netns $n"
done
# the bridge, if it is ours (has our pod gateway address)
ip -4 -o addr show dev cni0 2>/dev/null | grep -qF " inet $POD_GW/" && ip link del cni0 && log "deleted cni0"
# chains kubelet creates itself (kube-proxy --cleanup leaves them)
for ipt in iptables ip6tables; do
  $ipt -D INPUT -j KUBE-FIREWALL 2>/dev/null; $ipt -D OUTPUT -j KUBE-FIREWALL 2>/dev/null
  for t in filter nat mangle; do for ch in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
    $ipt -t $t -F $ch 2>/dev/null && $ipt -t $t -X $ch 2>/dev/null; done; done
done
# files the stack writes at fixed paths outside $LK: libcni's result cache of our network, kubelet's
# /var/log/containers links into $LK, and shim sockets nothing listens on any more
rm -f /var/lib/cni/results/etcd-operator-k8s-*
for f in /var/lib/cni/results/cni-loopback-*-lo; do   # loopback results of sandboxes our containerd knows
  id=${f#*/cni-loopback-}; id=${id%-lo}
  [ -n "$id" ] && [ -d "$LK/containerd/root/io.containerd.grpc.v1.cri/sandboxes/$id" ] && rm -f "$f"
done
find /var/log/containers -maxdepth 1 -type l -lname "$LK/*" -delete 2>/dev/null
for s in /run/containerd/s/*; do [ -S "$s" ] && ! grep -q " $s\$" /proc/net/unix && rm -f "$s"; done
# cgroups kubelet created (cgroupfs driver): rmdir, leaves first (only empty ones go)
for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
  [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null
done
[ -f "$LK/run/sysctl.orig" ] && sysctl -q -p "$LK/run/sysctl.orig" && rm -f "$LK/run/sysctl.orig" && log "sysctls restored"

if [ $PURGE = 1 ]; then
  if grep -qF " $LK/" /proc/mounts; then
    echo "still mounted below $LK, not purging:" >&2; grep -F " $LK/" /proc/mounts >&2; exit 1
  fi
  rm -rf --one-file-system "$LK"
  log "purged $LK"
fi
log "cluster stopped"
exit 0
