#!/usr/bin/env bash
# Builds, once per machine, everything of the local cluster besides Kubernetes itself (build-k8s.sh),
# from the Go module proxy and Debian packages, and packs the container images the cluster imports:
#
#   etcd, etcdctl, etcdutl   each $ETCD_VERSIONS   $EO_CACHE/etcd-<v>/bin (envtest uses that etcd too)
#   pause                    hack/pause            $TOOLS_BIN/pause
#   coredns (trimmed)        hack/coredns          $EO_CACHE/coredns-<v>/bin/coredns
#   crictl                   cri-tools             $EO_CACHE/crictl-<v>/bin/crictl, linked into $TOOLS_BIN
#   local-path-provisioner   rancher               $EO_CACHE/local-path-provisioner-<v>/bin
#   imgpack                  hack/imgpack          $TOOLS_BIN/imgpack
#
# Images in $IMAGES (docker-archive tarballs; cluster-up.sh imports every one of them):
#   docker.io/local/etcd:<v>                     etcd, etcdctl, etcdutl in /usr/local/bin; no shell
#   registry.k8s.io/pause:3.10                   the pod sandbox image containerd is configured with
#   docker.io/local/coredns:<v>                  cluster DNS
#   docker.io/local/local-path-provisioner:<v>   dynamic PVs
#   docker.io/local/busybox:<debian version>     shell + coreutils for local-path's helper pods
#
# Anything that exists is kept; a binary is rebuilt only when missing, an image only when missing or
# older than what goes into it. Cold: ~5 min on 2 idle cores.
#   build-images.sh              everything
#   build-images.sh --etcd-only  only the etcd binaries (for envtest)
set -euo pipefail
ETCD_ONLY=0
case "${1:-}" in --etcd-only) ETCD_ONLY=1;; "") ;; *) echo "usage: $0 [--etcd-only]" >&2; exit 2;; esac
H=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$H/.." && pwd)
. "$H/env.sh"

PKGS="containerd runc containernetworking-plugins iptables openssl gettext-base bc curl busybox-static"
if [ $ETCD_ONLY = 0 ] && ! { command -v containerd && command -v ctr && command -v runc && [ -x /usr/lib/cni/bridge ] && command -v iptables \
       && command -v openssl && command -v envsubst && command -v bc && command -v curl && [ -x /bin/busybox ]; } >/dev/null; then
  log "installing Debian packages: $PKGS"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $PKGS
fi
. "$H/storage/env.sh"

mkdir -p "$EO_CACHE/build" "$TOOLS_BIN" "$IMAGES"
exec 9>"$EO_CACHE/build/.build-images.lock"
flock 9   # one build at a time per machine

export CGO_ENABLED=0
LD="-s -w"
built=0   # anything built or packed by this run
# timed NAME CMD...: run CMD, log how long it took
timed() {
  local n=$1 s; s=$(date +%s); shift
  "$@"
  log "built $n in $(( $(date +%s) - s ))s"
}

# --- etcd: go.etcd.io/etcd/server/v3 has `package main` at its root but replace directives in its
# go.mod, so `go install ...@version` refuses; a wrapper module requiring it builds it.
for v in $ETCD_VERSIONS; do
  B=$EO_CACHE/etcd-$v/bin
  [ -x "$B/etcd" ] && [ -x "$B/etcdctl" ] && [ -x "$B/etcdutl" ] && continue
  log "building etcd $v (etcd, etcdctl, etcdutl; ~1.5 min cold)"; built=1
  W=$EO_CACHE/build/etcd-$v
  mkdir -p "$W" "$B"
  printf 'module etcdoperator.local/etcd\n\ngo 1.24.0\n' > "$W/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "go.etcd.io/etcd/etcdctl/v3"\n\t_ "go.etcd.io/etcd/etcdutl/v3"\n\t_ "go.etcd.io/etcd/server/v3"\n)\n' > "$W/tools.go"
  (cd "$W" && go get "go.etcd.io/etcd/server/v3@$v" "go.etcd.io/etcd/etcdctl/v3@$v" "go.etcd.io/etcd/etcdutl/v3@$v" && go mod tidy)
  EV="$LD -X go.etcd.io/etcd/api/v3/version.GitSHA=module-$v"
  for c in etcd:server etcdctl:etcdctl etcdutl:etcdutl; do
    [ -x "$B/${c%%:*}" ] && continue
    (cd "$W" && timed "${c%%:*} $v" go build -trimpath -ldflags "$EV" -o "$B/${c%%:*}.tmp" "go.etcd.io/etcd/${c#*:}/v3")
    mv "$B/${c%%:*}.tmp" "$B/${c%%:*}"
  done
done
[ $ETCD_ONLY = 1 ] && { log "etcd $ETCD_VERSIONS in $EO_CACHE/etcd-<version>/bin"; exit 0; }

# --- imgpack (packs the images below); rebuilt when its source is newer
if [ ! -x "$TOOLS_BIN/imgpack" ] || [ "$H/imgpack/main.go" -nt "$TOOLS_BIN/imgpack" ]; then
  log "building imgpack (hack/imgpack)"; built=1
  (cd "$ROOT" && timed imgpack go build -trimpath -ldflags "$LD" -o "$TOOLS_BIN/imgpack" ./hack/imgpack)
fi

# --- pause (sandbox process; stdlib only, part of this module)
if [ ! -x "$TOOLS_BIN/pause" ] || [ "$H/pause/main.go" -nt "$TOOLS_BIN/pause" ]; then
  log "building pause (hack/pause)"; built=1
  (cd "$ROOT" && timed pause go build -trimpath -ldflags "$LD" -o "$TOOLS_BIN/pause" ./hack/pause)
fi

# --- CoreDNS with the plugin set of hack/coredns/main.go (wrapper module; drops its `ignore` constraint)
COREDNS=$EO_CACHE/coredns-$COREDNS_VERSION/bin/coredns
if [ ! -x "$COREDNS" ] || [ "$H/coredns/main.go" -nt "$COREDNS" ]; then
  log "building coredns $COREDNS_VERSION (trimmed plugin set; ~1.5 min cold)"; built=1
  W=$EO_CACHE/build/coredns-$COREDNS_VERSION
  mkdir -p "$W" "$(dirname "$COREDNS")"
  grep -v '^//go:build ignore' "$H/coredns/main.go" > "$W/main.go"
  printf 'module etcdoperator.local/coredns\n\ngo 1.25.0\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" > "$W/go.mod"
  (cd "$W" && go mod tidy && timed "coredns $COREDNS_VERSION" go build -trimpath -ldflags "$LD" -o "$COREDNS.tmp" .)
  mv "$COREDNS.tmp" "$COREDNS"
fi

# --- crictl (debugging; cluster-down.sh tears pods down through it)
CRICTL=$EO_CACHE/crictl-$CRICTL_VERSION/bin/crictl
if [ ! -x "$CRICTL" ]; then
  log "building crictl $CRICTL_VERSION (~1 min cold)"; built=1
  timed "crictl $CRICTL_VERSION" env GOBIN="$(dirname "$CRICTL")" go install -trimpath \
    -ldflags "$LD -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
fi
ln -sfn "$CRICTL" "$TOOLS_BIN/crictl"

# --- local-path-provisioner (main package at its module root, no replace directives: go install works)
LPP=$LOCAL_PATH_PROVISIONER_BIN/local-path-provisioner
if [ ! -x "$LPP" ]; then
  log "building local-path-provisioner $LOCAL_PATH_PROVISIONER_VERSION (~1.5 min cold)"; built=1
  timed "local-path-provisioner $LOCAL_PATH_PROVISIONER_VERSION" env GOBIN="$LOCAL_PATH_PROVISIONER_BIN" go install -trimpath \
    -ldflags "$LD -X main.VERSION=$LOCAL_PATH_PROVISIONER_VERSION" "github.com/rancher/local-path-provisioner@$LOCAL_PATH_PROVISIONER_VERSION"
fi

# --- images
# pack OUT.tar IMGPACK-ARGS...: (re)pack unless OUT exists and is newer than imgpack and every SRC.
pack() {
  local out=$IMAGES/$1 a src stale=0; shift
  [ -f "$out" ] && [ "$out" -nt "$TOOLS_BIN/imgpack" ] || stale=1
  for a in "$@"; do
    case "$a" in -*|"") continue;; esac
    src=${a%%:*}
    [ "$a" != "$src" ] && [ -f "$src" ] && [ "$src" -nt "$out" ] && stale=1
  done
  [ $stale = 0 ] && return 0
  log "packing image $(printf '%s\n' "$@" | grep -A1 -x -- -name | tail -1) -> $out"
  "$TOOLS_BIN/imgpack" -o "$out" "$@" >/dev/null
  built=1
}
for v in $ETCD_VERSIONS; do
  B=$EO_CACHE/etcd-$v/bin
  pack "etcd-$v.tar" -name "docker.io/local/etcd:$v" -entrypoint /usr/local/bin/etcd -port 2379/tcp -port 2380/tcp \
    "$B/etcd:/usr/local/bin/etcd" "$B/etcdctl:/usr/local/bin/etcdctl" "$B/etcdutl:/usr/local/bin/etcdutl"
done
pack pause-3.10.tar -name registry.k8s.io/pause:3.10 -entrypoint /pause -user 65535 "$TOOLS_BIN/pause:/pause"
pack "coredns-$COREDNS_VERSION.tar" -name "docker.io/local/coredns:$COREDNS_VERSION" -entrypoint /coredns \
  -port 53/udp -port 53/tcp -port 9153/tcp "$COREDNS:/coredns"
pack "local-path-provisioner-$LOCAL_PATH_PROVISIONER_VERSION.tar" -name "docker.io/local/local-path-provisioner:$LOCAL_PATH_PROVISIONER_VERSION" \
  -entrypoint /usr/bin/local-path-provisioner -user 65532 "$LPP:/usr/bin/local-path-provisioner"
# busybox: the binary plus a symlink per applet (local-path runs `/bin/sh /script/setup`, which calls mkdir/rm)
mapfile -t BB_LINKS < <(/bin/busybox --list-full | grep -vx -e bin/busybox -e linuxrc | sed 's|^\(.*\)$|-symlink=/\1=/bin/busybox|')
pack "busybox-$BUSYBOX_TAG.tar" -name "docker.io/local/busybox:$BUSYBOX_TAG" -entrypoint /bin/sh "${BB_LINKS[@]}" /bin/busybox:/bin/busybox

if [ $built = 0 ]; then log "images and binaries present ($IMAGES)"; else log "done: $(ls "$IMAGES" | tr '\n' ' ')"; fi
