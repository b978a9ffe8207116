#!/usr/bin/env bash
# Builds, once per machine, cert-manager's certificate controllers as a host process for the tests of
# cert-manager issued certificates (hack/tools/cert-manager: cert-manager v1.21's controller packages,
# CA and SelfSigned issuers only), and prints where its CRDs are.
#
#   $EO_CACHE/cert-manager-<v>-<go.sum hash>/bin/cert-manager-controller
#   $EO_CACHE/cert-manager-<v>-<go.sum hash>/crds/*.yaml   (the module's deploy/crds, plain YAML)
#
# Run it with --kubeconfig=<file>: it needs no webhook (its defaults apply in the controllers) and no
# leader election. A binary that exists is kept. Cold: ~8 min on 2 idle cores.
#   build-cert-manager.sh           the binary and the CRDs
#   build-cert-manager.sh --print   prints the binary's path only
set -euo pipefail
case "${1:-}" in --print) PRINT=1;; "") ;; *) echo "usage: $0 [--print]" >&2; exit 2;; esac
H=$(cd "$(dirname "$0")" && pwd)
. "$H/env.sh"
W=$H/tools/cert-manager
SUM=$(sha256sum "$W/go.sum" | cut -c1-10)
D=$EO_CACHE/cert-manager-$CERT_MANAGER_VERSION-$SUM
if [ -n "${PRINT:-}" ]; then echo "$D/bin/cert-manager-controller"; exit 0; fi

mkdir -p "$EO_CACHE/build"
exec 9>"$EO_CACHE/build/.build-cert-manager.lock"
flock 9   # one build at a time per machine
if [ ! -x "$D/bin/cert-manager-controller" ]; then
  log "building cert-manager $CERT_MANAGER_VERSION's certificate controllers (~8 min cold)"
  s=$(date +%s)
  mkdir -p "$D/bin" "$D/crds"
  (cd "$W" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$D/bin/cert-manager-controller.tmp" .)
  cp "$(cd "$W" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)"/deploy/crds/*.yaml "$D/crds/"
  chmod u+w "$D/crds/"*.yaml
  mv "$D/bin/cert-manager-controller.tmp" "$D/bin/cert-manager-controller"
  log "built cert-manager $CERT_MANAGER_VERSION in $(( $(date +%s) - s ))s"
fi
log "cert-manager $CERT_MANAGER_VERSION controllers in $D/bin, CRDs in $D/crds"
