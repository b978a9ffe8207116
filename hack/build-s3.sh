#!/usr/bin/env bash
# Builds, once per machine, the S3-compatible server the backup tests write to: versitygw (an S3 gateway
# over a POSIX directory, github.com/versity/versitygw), from its Go module.
#
#   $EO_CACHE/versitygw-<v>/bin/versitygw
#
# Its go.mod has no replace directives, so a wrapper module requiring it (as for etcd) resolves exactly
# the versions its own go.mod and go.sum pin; the wrapper lives in $EO_CACHE/build/versitygw-<v>.
# A binary that exists is kept. Cold: ~2-3 min on 2 idle cores, mostly downloads.
#   build-s3.sh           the binary
#   build-s3.sh --image   also packs docker.io/local/versitygw:<v> into $IMAGES (entrypoint versitygw)
#   build-s3.sh --print   prints the binary's path only
set -euo pipefail
IMAGE=0
case "${1:-}" in --image) IMAGE=1;; --print) PRINT=1;; "") ;; *) echo "usage: $0 [--image|--print]" >&2; exit 2;; esac
H=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$H/.." && pwd)
. "$H/env.sh"

B=$EO_CACHE/versitygw-$VERSITYGW_VERSION/bin
if [ -n "${PRINT:-}" ]; then echo "$B/versitygw"; exit 0; fi

mkdir -p "$EO_CACHE/build"
exec 9>"$EO_CACHE/build/.build-s3.lock"
flock 9   # one build at a time per machine

export CGO_ENABLED=0
if [ ! -x "$B/versitygw" ]; then
  log "building versitygw $VERSITYGW_VERSION (~2-3 min cold)"
  s=$(date +%s)
  W=$EO_CACHE/build/versitygw-$VERSITYGW_VERSION
  mkdir -p "$W" "$B"
  printf 'module etcdoperator.local/versitygw\n\ngo 1.25.0\n' > "$W/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/versity/versitygw/cmd/versitygw"\n' > "$W/tools.go"
  (cd "$W" && go get "github.com/versity/versitygw@$VERSITYGW_VERSION" && go mod tidy)
  (cd "$W" && go build -trimpath -ldflags "-s -w -X main.Version=$VERSITYGW_VERSION -X main.Build=module" \
    -o "$B/versitygw.tmp" github.com/versity/versitygw/cmd/versitygw)
  mv "$B/versitygw.tmp" "$B/versitygw"
  log "built versitygw $VERSITYGW_VERSION in $(( $(date +%s) - s ))s"
fi

if [ $IMAGE = 1 ]; then
  mkdir -p "$TOOLS_BIN" "$IMAGES"
  if [ ! -x "$TOOLS_BIN/imgpack" ] || [ "$H/imgpack/main.go" -nt "$TOOLS_BIN/imgpack" ]; then
    log "building imgpack (hack/imgpack)"
    (cd "$ROOT" && go build -trimpath -ldflags "-s -w" -o "$TOOLS_BIN/imgpack" ./hack/imgpack)
  fi
  OUT=$IMAGES/versitygw-$VERSITYGW_VERSION.tar
  if [ ! -f "$OUT" ] || [ "$B/versitygw" -nt "$OUT" ] || [ "$TOOLS_BIN/imgpack" -nt "$OUT" ]; then
    log "packing image docker.io/local/versitygw:$VERSITYGW_VERSION -> $OUT"
    "$TOOLS_BIN/imgpack" -o "$OUT" -name "docker.io/local/versitygw:$VERSITYGW_VERSION" \
      -entrypoint /usr/local/bin/versitygw -port 7070/tcp -user 65532 "$B/versitygw:/usr/local/bin/versitygw" >/dev/null
  fi
fi
log "versitygw $VERSITYGW_VERSION in $B"
