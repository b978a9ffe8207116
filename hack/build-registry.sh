#!/usr/bin/env bash
# Packs hack/registry (an in-memory OCI registry over plain HTTP: go-containerregistry's pkg/registry)
# into the image docker.io/local/oci-registry:<go-containerregistry version>, $IMAGES/oci-registry.tar,
# for the end-to-end test of the release path (TestReleaseFromRegistry), which runs it in the cluster
# and pushes the operator image to it. Packed again when hack/registry, hack/imgpack or go.sum changed
# (~10 s; the first build of go-containerregistry's registry ~30 s more).
#   build-registry.sh           build and pack; prints the tarball's path
#   build-registry.sh --print   prints the image's name only
set -euo pipefail
H=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$H/.." && pwd)
. "$H/env.sh"
cd "$ROOT"
v=$(go list -m -f '{{.Version}}' github.com/google/go-containerregistry)
NAME=docker.io/local/oci-registry:$v
case "${1:-}" in --print) echo "$NAME"; exit 0;; "") ;; *) echo "usage: $0 [--print]" >&2; exit 2;; esac

OUT=$IMAGES/oci-registry.tar
mkdir -p "$IMAGES" "$TOOLS_BIN"
if [ -f "$OUT" ] && [ -z "$(find hack/registry hack/imgpack go.sum -newer "$OUT" -print -quit)" ]; then
  echo "$OUT"
  exit 0
fi
log "building hack/registry and packing $NAME"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/registry" ./hack/registry
go run ./hack/imgpack -o "$OUT" -name "$NAME" -entrypoint /usr/local/bin/registry -user 65532 \
  -label org.opencontainers.image.version="$v" "$tmp/registry:/usr/local/bin/registry:0755" >/dev/null
echo "$OUT"
