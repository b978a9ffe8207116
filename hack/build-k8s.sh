#!/usr/bin/env bash
# Builds the Kubernetes components of the local cluster (and of envtest) from the Go module proxy into
# $K8S_BIN, once per machine: a binary that exists is never rebuilt. Cold: ~11 min on 2 cores.
#
# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with ./staging paths, so it
# cannot be `go install`ed; a wrapper module that requires it and replaces every staging module by its
# published version builds it.
set -euo pipefail
. "$(dirname "$0")/env.sh"
# Usage: build-k8s.sh [COMMAND...]   (default: all six)
ALL="kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl"
CMDS=${*:-$ALL}
missing=""
for c in $CMDS; do [ -x "$K8S_BIN/$c" ] || missing="$missing $c"; done
[ -z "$missing" ] && { log "kubernetes $K8S_VERSION binaries present in $K8S_BIN"; exit 0; }

W=$EO_CACHE/build/k8s-$K8S_VERSION
mkdir -p "$W" "$K8S_BIN"
# one build at a time in the shared work directory (make test's envtest and make cluster-up may run at
# once on a cold machine); whatever the other built meanwhile is not built again
exec 9>"$W.lock"
if ! flock -n 9; then
  log "waiting for another build of kubernetes $K8S_VERSION to finish"
  flock 9
fi
missing=""
for c in $CMDS; do [ -x "$K8S_BIN/$c" ] || missing="$missing $c"; done
[ -z "$missing" ] && { log "kubernetes $K8S_VERSION binaries present in $K8S_BIN"; exit 0; }
cd "$W"
STAGING="api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
 cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api cri-client
 csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator
 kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics mount-utils
 pod-security-admission sample-apiserver sample-cli-plugin sample-controller"
{
  printf 'module etcdoperator.local/k8s\n\ngo 1.25.0\n\ngodebug default=go1.25\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
  for m in $STAGING; do printf '\tk8s.io/%s => k8s.io/%s %s\n' "$m" "$m" "$K8S_STAGING_VERSION"; done
  printf ')\n'
} > go.mod
{
  printf '//go:build tools\n\npackage tools\n\nimport (\n'
  for c in $ALL; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
  printf ')\n'
} > tools.go
log "resolving k8s.io/kubernetes $K8S_VERSION modules"
GOFLAGS=-mod=mod go mod tidy
# Version stamping as upstream's hack/lib/version.sh does; without it everything reports v0.0.0.
MINOR=$(echo "$K8S_VERSION" | cut -d. -f2)
LD="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LD="$LD -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitCommit=$K8S_COMMIT -X $p.gitTreeState=clean"
done
i=0; n=$(echo $missing | wc -w)
for c in $missing; do
  i=$((i+1)); s=$(date +%s)
  log "building $c ($i/$n; kube-apiserver takes ~6 min cold, the rest ~1 min each)"
  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags notest -ldflags "$LD" -o "$K8S_BIN/$c.tmp" "k8s.io/kubernetes/cmd/$c"
  mv "$K8S_BIN/$c.tmp" "$K8S_BIN/$c"
  log "built $c in $(( $(date +%s) - s ))s"
done
