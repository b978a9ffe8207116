#!/usr/bin/env bash
# Builds, once per machine, the NetworkPolicy enforcer of the end-to-end tests: kube-router's firewall
# controller (github.com/cloudnativelabs/kube-router/v2, cmd/kube-router), which enforces NetworkPolicies
# with iptables and ipset on the local cluster's cni0 bridge. (sigs.k8s.io/kube-network-policies needs
# the kernel's nft queue support, CONFIG_NFT_QUEUE, which these machines lack.)
#
#   $EO_CACHE/kube-router-<v>-<go.sum hash>/bin/kube-router
#
# The wrapper module hack/tools/kube-router pins v2.1.0, the only version the module proxy serves, with
# its dependencies raised past the versions for which vulnerabilities are reported (golang.org/x/net,
# grpc, protobuf, k8s.io/client-go, docker, gobgp, ...); each raise compiles unchanged. Only the tests
# run it, and only its firewall controller (hack/netpol-enforcer.sh). Also installs iptables and ipset.
# A binary that exists is kept. Cold: ~6 min on 2 idle cores.
#   build-kube-router.sh           the binary
#   build-kube-router.sh --print   prints the binary's path only
set -euo pipefail
case "${1:-}" in --print) PRINT=1;; "") ;; *) echo "usage: $0 [--print]" >&2; exit 2;; esac
H=$(cd "$(dirname "$0")" && pwd)
. "$H/env.sh"
W=$H/tools/kube-router
SUM=$(sha256sum "$W/go.sum" | cut -c1-10)
B=$EO_CACHE/kube-router-$KUBE_ROUTER_VERSION-$SUM/bin
if [ -n "${PRINT:-}" ]; then echo "$B/kube-router"; exit 0; fi

if ! command -v iptables >/dev/null || ! command -v ipset >/dev/null || ! command -v conntrack >/dev/null; then
  log "installing iptables, ipset and conntrack (Debian packages)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables ipset conntrack
fi

mkdir -p "$EO_CACHE/build"
exec 9>"$EO_CACHE/build/.build-kube-router.lock"
flock 9   # one build at a time per machine
if [ ! -x "$B/kube-router" ]; then
  log "building kube-router $KUBE_ROUTER_VERSION, firewall only (~6 min cold)"
  s=$(date +%s)
  mkdir -p "$B"
  V=github.com/cloudnativelabs/kube-router/v2/pkg/version
  (cd "$W" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w -X $V.Version=$KUBE_ROUTER_VERSION" \
    -o "$B/kube-router.tmp" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router)
  mv "$B/kube-router.tmp" "$B/kube-router"
  log "built kube-router $KUBE_ROUTER_VERSION in $(( $(date +%s) - s ))s"
fi
log "kube-router $KUBE_ROUTER_VERSION in $B"
