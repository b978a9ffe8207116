#!/usr/bin/env bash
# Brings up the local single-node Kubernetes cluster on this machine, as plain host processes:
# etcd (the apiserver's own), kube-apiserver, kube-controller-manager, kube-scheduler, containerd (own
# socket under $LK), kubelet, kube-proxy; then CoreDNS and local-path-provisioner as pods. Nothing is
# pulled: every image comes from a tarball in $IMAGES (build-images.sh). Admin kubeconfig: $LOCAL_KUBECONFIG.
#
# Idempotent: when the cluster is up and healthy it says so and exits. Leftovers of an earlier run or
# boot (PID files of dead daemons, cni0, mounts) are cleaned by cluster-down.sh first; cluster state
# (etcd data, PVs, certificates) is kept, so the same cluster comes back.
#
# Every daemon: log $LK/logs/<name>.log, PID $LK/run/<name>.pid. Stop with cluster-down.sh [--purge].
# Listens on loopback and the machine's own address ($NODE_IP) only; pods live on the cni0 bridge.
set -euo pipefail
H=$(cd "$(dirname "$0")" && pwd)
. "$H/env.sh"
export KUBECONFIG=$LOCAL_KUBECONFIG
DAEMONS="etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy"

# ours NAME: the daemon recorded in $LK/run/NAME.pid is alive, runs the NAME binary and belongs to this $LK
ours() {
  local p exe
  p=$(cat "$LK/run/$1.pid" 2>/dev/null) && [ -n "$p" ] || return 1
  exe=$(readlink "/proc/$p/exe" 2>/dev/null) || return 1
  exe=${exe% (deleted)}
  [ "${exe##*/}" = "$1" ] && grep -qaF -- "$LK/" "/proc/$p/cmdline" 2>/dev/null
}
all_ours() { local d; for d in $DAEMONS; do ours "$d" || return 1; done; }
available() { [ "$(kubectl -n "$1" get deploy "$2" -o 'jsonpath={.status.availableReplicas}' 2>/dev/null)" = 1 ]; }
node_ready() { [ "$(kubectl get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }

VARS='$LK $NODE_IP $NODE_NAME $POD_CIDR $POD_GW $SERVICE_CIDR $CLUSTER_CIDR $KUBE_DNS_IP $COREDNS_VERSION $PV_DIR $BUSYBOX_TAG $LOCAL_PATH_PROVISIONER_VERSION'
render() { envsubst "$VARS" < "$1" > "$2"; }
# kubelet_current: the running kubelet's configuration is what this checkout renders (a changed
# setting, such as maxPods, takes a restart)
kubelet_current() { render "$H/config/kubelet.yaml.in" /dev/stdout | cmp -s - "$LK/etc/kubelet.yaml"; }

if [ -f "$LOCAL_KUBECONFIG" ] && all_ours && kubectl get --raw /readyz >/dev/null 2>&1 && node_ready \
   && available kube-system coredns && available local-path-storage local-path-provisioner; then
  if kubelet_current; then
    log "cluster already up and healthy (kubeconfig $LOCAL_KUBECONFIG)"
    exit 0
  fi
  log "the kubelet configuration changed (hack/config/kubelet.yaml.in): restarting the cluster with it; its state is kept"
fi

# --- binaries and images (no-ops when cached)
bash "$H/build-k8s.sh"
bash "$H/build-images.sh"
. "$H/storage/env.sh"
ETCD_BIN=$EO_CACHE/etcd-$ETCD_VERSION/bin

# --- leftovers of an earlier run or boot: stop what is left (state is kept)
stale=""
for d in $DAEMONS; do [ -f "$LK/run/$d.pid" ] && stale="$stale $d"; done
if [ -n "$stale" ] || ip link show cni0 >/dev/null 2>&1 || grep -qF " $LK/" /proc/mounts; then
  log "cleaning up an earlier run (pid files:${stale:- none}) with cluster-down.sh"
  bash "$H/cluster-down.sh" | sed 's/^/    /'
fi

log "starting the cluster (node $NODE_NAME, $NODE_IP; state in $LK)"
mkdir -p "$LK"/{run,logs,etc,containerd,cni/net.d,cni/ipam,kubelet,etcd-data} "$PV_DIR"

# start NAME CMD...: run detached in its own session, log to $LK/logs/NAME.log, remember the PID. This
# script has no job control, so the background child is not a group leader: setsid execs in place and
# $! is the daemon itself.
start() {
  local n=$1; shift
  setsid "$@" >>"$LK/logs/$n.log" 2>&1 </dev/null &
  echo $! > "$LK/run/$n.pid"
  log "started $n (pid $!, log $LK/logs/$n.log)"
}
# died NAME: fail, naming the log to read
died() {
  log "ERROR: $1 died; read $LK/logs/$1.log (last lines below)"
  tail -n 15 "$LK/logs/$1.log" | sed 's/^/    /'
  exit 1
}
# wait_for WHAT TIMEOUT DAEMON CMD...: poll CMD every 0.2s; fail at once if DAEMON died
wait_for() {
  local what=$1 t=$2 d=$3 i; shift 3
  for ((i = 0; i < t * 5; i++)); do
    if "$@" >/dev/null 2>&1; then log "$what: ok"; return 0; fi
    ours "$d" || { sleep 0.5; ours "$d"; } || died "$d"   # (a just-started one may still be exec'ing)
    sleep 0.2
  done
  log "ERROR: timed out after ${t}s waiting for $what; read $LK/logs/$d.log"
  exit 1
}
# ready_since NS SELECTOR: a pod matching SELECTOR is Ready with its container started after kubelet
# was (so not a Ready status left over from before a restart)
ready_since() {
  kubectl -n "$1" get pods -l "$2" -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status} {.status.containerStatuses[0].state.running.startedAt}{"\n"}{end}' 2>/dev/null \
    | awk -v t="$KUBELET_T" '$1 == "True" && $2 >= t { ok = 1 } END { exit !ok }'
}
# wait_pods NS SELECTOR WHAT TIMEOUT: wait for ready_since; on failure show the namespace's pods and events
wait_pods() {
  local i d
  for ((i = 0; i < $4 * 5; i++)); do
    ready_since "$1" "$2" && { log "$3 ready"; return 0; }
    for d in kubelet containerd kube-apiserver; do ours $d || died $d; done
    sleep 0.2
  done
  log "ERROR: $3 not ready after $4s; pods and events in namespace $1:"
  kubectl -n "$1" get pods -o wide | sed 's/^/    /'
  kubectl -n "$1" get events --sort-by=.lastTimestamp | tail -n 10 | sed 's/^/    /'
  log "kubelet log: $LK/logs/kubelet.log, containerd log: $LK/logs/containerd.log"
  exit 1
}
# node_ready_now: Ready, reported by the kubelet started by this run
node_ready_now() {
  kubectl get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}' 2>/dev/null \
    | awk -v t="$KUBELET_T" '$1 == "True" && $2 >= t { ok = 1 } END { exit !ok }'
}
# --- kernel settings pod networking needs (bridge-nf so Service DNAT sees bridged pod-to-pod traffic);
# the values found are saved in $LK/run/sysctl.orig and cluster-down.sh puts them back
SYSCTLS="net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables"
[ -d /proc/sys/net/bridge ] || modprobe br_netfilter 2>/dev/null || true
[ -f "$LK/run/sysctl.orig" ] || for k in $SYSCTLS; do echo "$k=$(sysctl -n "$k")"; done > "$LK/run/sysctl.orig"
for k in $SYSCTLS; do sysctl -qw "$k=1"; done

# --- certificates and kubeconfigs
bash "$H/pki.sh"
log "pki ready ($LK/pki)"

# --- config files
render "$H/config/containerd.toml.in" "$LK/etc/containerd.toml"
render "$H/config/cni.conflist.in" "$LK/cni/net.d/10-etcd-operator-k8s.conflist"
render "$H/config/kubelet.yaml.in" "$LK/etc/kubelet.yaml"
render "$H/config/kube-proxy.yaml.in" "$LK/etc/kube-proxy.yaml"
render "$H/config/coredns.yaml.in" "$LK/etc/coredns.yaml"
render "$H/storage/local-path-storage.yaml.in" "$LK/etc/local-path-storage.yaml"
printf 'runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 10\n' "$CONTAINERD_SOCK" "$CONTAINERD_SOCK" > "$LK/etc/crictl.yaml"

# --- etcd of the apiserver: plain http on loopback, ports 12379/12380 so they clash with nothing
# (without env.sh's ETCD_VERSION(S): etcd reads ETCD_* variables as flags and warns about them)
start etcd env -u ETCD_VERSION -u ETCD_VERSIONS "$ETCD_BIN/etcd" --name etcd-operator-k8s --data-dir "$LK/etcd-data" \
  --listen-client-urls http://127.0.0.1:12379 --advertise-client-urls http://127.0.0.1:12379 \
  --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
  --initial-cluster etcd-operator-k8s=http://127.0.0.1:12380 --listen-metrics-urls http://127.0.0.1:12381
wait_for "etcd health" 60 etcd "$ETCD_BIN/etcdctl" --endpoints http://127.0.0.1:12379 endpoint health

# --- kube-apiserver, on the machine's own address (an Endpoints address may not be loopback)
start kube-apiserver "$K8S_BIN/kube-apiserver" \
  --advertise-address="$NODE_IP" --bind-address="$NODE_IP" --secure-port=6443 \
  --etcd-servers=http://127.0.0.1:12379 \
  --service-cluster-ip-range="$SERVICE_CIDR" --service-node-port-range=30000-32767 \
  --client-ca-file="$LK/pki/ca.crt" \
  --tls-cert-file="$LK/pki/apiserver.crt" --tls-private-key-file="$LK/pki/apiserver.key" \
  --kubelet-client-certificate="$LK/pki/apiserver-kubelet-client.crt" --kubelet-client-key="$LK/pki/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types=InternalIP,Hostname \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$LK/pki/sa.pub" --service-account-signing-key-file="$LK/pki/sa.key" \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --allow-privileged=true --profiling=false
wait_for "kube-apiserver /readyz" 120 kube-apiserver kubectl get --raw /readyz

# --- controller-manager and scheduler (secure ports on loopback; single node: no leader election)
start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
  --kubeconfig="$LK/pki/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$LK/pki/controller-manager.kubeconfig" --authorization-kubeconfig="$LK/pki/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --leader-elect=false \
  --controllers='*,bootstrapsigner,tokencleaner' \
  --allocate-node-cidrs=true --cluster-cidr="$CLUSTER_CIDR" --node-cidr-mask-size=24 \
  --service-cluster-ip-range="$SERVICE_CIDR" \
  --cluster-signing-cert-file="$LK/pki/ca.crt" --cluster-signing-key-file="$LK/pki/ca.key" \
  --root-ca-file="$LK/pki/ca.crt" --service-account-private-key-file="$LK/pki/sa.key" \
  --use-service-account-credentials=true
start kube-scheduler "$K8S_BIN/kube-scheduler" \
  --kubeconfig="$LK/pki/scheduler.kubeconfig" \
  --authentication-kubeconfig="$LK/pki/scheduler.kubeconfig" --authorization-kubeconfig="$LK/pki/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --leader-elect=false

# --- cluster DNS and storage manifests, applied in the background while the node comes up
kubectl apply -f "$LK/etc/coredns.yaml" -f "$LK/etc/local-path-storage.yaml" >"$LK/logs/addons-apply.log" 2>&1 &
APPLY=$!

# --- containerd (our own instance) and every image tarball into its k8s.io namespace
start containerd containerd --config "$LK/etc/containerd.toml"
wait_for "containerd" 30 containerd ctr --address "$CONTAINERD_SOCK" version
# (a tarball imported before, unchanged, whose image is still there is skipped: saves ~3 s on a restart)
STAMPS=$LK/containerd/imported   # lines "PATH SIZE MTIME NAME" of imported tarballs
touch "$STAMPS"
have=$(ctr --address "$CONTAINERD_SOCK" -n k8s.io images ls -q)
load=() stamps=() n=0
for f in "$IMAGES"/*.tar; do
  n=$((n + 1))
  stamp="$(stat -c '%n %s %Y' "$f") $(tar -xOf "$f" manifest.json 2>/dev/null | sed -n 's/.*"RepoTags":\["\([^"]*\)".*/\1/p')"
  grep -qxF "$stamp" "$STAMPS" && grep -qxF "${stamp##* }" <<<"$have" && continue
  load+=("$f") stamps+=("$stamp")
done
if [ ${#load[@]} -gt 0 ]; then
  bash "$H/load-image.sh" "${load[@]}" | sed 's/^/    /'
  for f in "${load[@]}"; do grep -vF "$f " "$STAMPS" > "$STAMPS.tmp" || true; mv "$STAMPS.tmp" "$STAMPS"; done
  printf '%s\n' "${stamps[@]}" >> "$STAMPS"
fi
ctr --address "$CONTAINERD_SOCK" -n k8s.io images label registry.k8s.io/pause:3.10 io.cri-containerd.pinned=pinned >/dev/null
log "images: ${#load[@]} imported, $((n - ${#load[@]})) unchanged ($IMAGES)"

# --- kubelet
KUBELET_T=$(date -u +%Y-%m-%dT%H:%M:%SZ)
start kubelet "$K8S_BIN/kubelet" \
  --config="$LK/etc/kubelet.yaml" --kubeconfig="$LK/pki/kubelet.kubeconfig" \
  --root-dir="$LK/kubelet" --cert-dir="$LK/kubelet/pki" \
  --node-ip="$NODE_IP" --hostname-override="$NODE_NAME"
wait_for "node $NODE_NAME registered" 120 kubelet kubectl get node "$NODE_NAME"
kubectl label node "$NODE_NAME" node-role.kubernetes.io/control-plane= --overwrite >/dev/null   # kubelet may not set node-role labels itself

# --- kube-proxy (iptables mode)
start kube-proxy "$K8S_BIN/kube-proxy" --config="$LK/etc/kube-proxy.yaml"
wait_for "kube-proxy healthz" 60 kube-proxy curl -sf http://127.0.0.1:10256/healthz
wait_for "node $NODE_NAME Ready" 180 kubelet node_ready_now

# --- cluster DNS and storage
wait $APPLY || { log "ERROR: applying CoreDNS / local-path-provisioner failed; read $LK/logs/addons-apply.log"; cat "$LK/logs/addons-apply.log"; exit 1; }
log "applied CoreDNS and local-path-provisioner (default StorageClass local-path)"
wait_pods kube-system k8s-app=kube-dns CoreDNS 180
wait_pods local-path-storage app=local-path-provisioner local-path-provisioner 180

log "cluster up: kubectl --kubeconfig $LOCAL_KUBECONFIG get nodes"
kubectl get nodes -o wide
