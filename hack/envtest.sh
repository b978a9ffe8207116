#!/usr/bin/env bash
# Makes the binaries controller-runtime's envtest starts (kube-apiserver, etcd, kubectl) available in one
# directory, building them from Go modules once per machine. With --print, prints that directory only.
set -euo pipefail
. "$(dirname "$0")/env.sh"
DIR=$EO_CACHE/envtest-$K8S_VERSION-etcd-$ETCD_VERSION
if [ "${1:-}" = "--print" ]; then echo "$DIR"; exit 0; fi
if [ ! -x "$DIR/kube-apiserver" ] || [ ! -x "$DIR/etcd" ]; then
  bash "$(dirname "$0")/build-k8s.sh" kube-apiserver kubectl
  bash "$(dirname "$0")/build-images.sh" --etcd-only
  mkdir -p "$DIR"
  ln -sf "$K8S_BIN/kube-apiserver" "$DIR/kube-apiserver"
  ln -sf "$K8S_BIN/kubectl" "$DIR/kubectl"
  ln -sf "$EO_CACHE/etcd-$ETCD_VERSION/bin/etcd" "$DIR/etcd"
fi
log "envtest binaries in $DIR"
