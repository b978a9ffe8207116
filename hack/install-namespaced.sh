#!/usr/bin/env bash
# Prints the namespace-scoped install of the operator: the operator in namespace NAMESPACE manages the
# EtcdClusters and EtcdBackups of the namespaces WATCH only (default: NAMESPACE), with a Role and a
# RoleBinding in each of them, a ClusterRole of the few cluster-scoped rules it needs, and webhooks
# that are called for those namespaces only. dist/install-namespaced.yaml is its output with the
# defaults (make manifests).
#
#   bash hack/install-namespaced.sh [--namespace NAMESPACE] [--watch NS1,NS2,...] [--image REF] > install.yaml
#   kubectl apply --server-side -f install.yaml
#
# --image REGISTRY/NAME:TAG runs that operator image instead of the release's (make release sets it).
#
# The output holds a Namespace object for NAMESPACE (labelled for the restricted Pod Security
# Standard), but none for the watched namespaces: create them first. One namespace-scoped install per
# Kubernetes cluster: the CRDs, the webhook configurations and the ClusterRole have fixed names.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
namespace=etcd-operator-system
watch=""
image=""
while [ $# -gt 0 ]; do
  case "$1" in
    --namespace) namespace=$2; shift 2 ;;
    --watch) watch=$2; shift 2 ;;
    --image) image=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
watch=${watch:-$namespace}
dns1123='^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
IFS=, read -r -a watched <<<"$watch"
for ns in "$namespace" "${watched[@]}"; do
  if ! [[ $ns =~ $dns1123 ]] || [ ${#ns} -gt 63 ]; then
    echo "not a namespace name: '$ns'" >&2; exit 2
  fi
done
if [ -n "$image" ] && { [[ ${image##*/} != *:* ]] || [[ $image == *@* ]] || [[ $image != */* ]]; }; then
  echo "--image '$image' must be REGISTRY/NAME:TAG, tag included" >&2; exit 2
fi

kustomize() { go tool -modfile="$root/hack/tools/go.mod" kustomize "$@"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
values=$(printf '%s, ' "${watched[@]}"); values=${values%, }

mkdir "$tmp/operator"
cat >"$tmp/operator/kustomization.yaml" <<YAML
namespace: $namespace
resources:
- $(realpath --relative-to="$tmp/operator" "$root/config/namespaced/operator")
patches:
- target: {group: admissionregistration.k8s.io, kind: ValidatingWebhookConfiguration}
  path: selector.yaml
- target: {group: admissionregistration.k8s.io, kind: MutatingWebhookConfiguration}
  path: selector.yaml
YAML
cat >"$tmp/operator/selector.yaml" <<YAML
- op: add
  path: /webhooks/0/namespaceSelector
  value:
    matchExpressions:
    - {key: kubernetes.io/metadata.name, operator: In, values: [$values]}
YAML
if [ "$watch" != "$namespace" ]; then
  cat >>"$tmp/operator/kustomization.yaml" <<YAML
- target: {group: apps, kind: Deployment, name: etcd-operator}
  patch: |-
    - op: add
      path: /spec/template/spec/containers/0/args/-
      value: --watch-namespaces=$watch
YAML
fi
if [ -n "$image" ]; then
  cat >>"$tmp/operator/kustomization.yaml" <<YAML
images:
- name: ghcr.io/etcdkit/etcd-operator
  newName: ${image%:*}
  newTag: ${image##*:}
YAML
fi
kustomize build "$tmp/operator"

for ns in "${watched[@]}"; do
  mkdir "$tmp/watch-$ns"
  cat >"$tmp/watch-$ns/kustomization.yaml" <<YAML
namespace: $ns
resources:
- $(realpath --relative-to="$tmp/watch-$ns" "$root/config/namespaced/watch")
patches:
- target: {kind: RoleBinding, name: etcd-operator}
  patch: |-
    - op: replace
      path: /subjects/0/namespace
      value: $namespace
YAML
  echo ---
  kustomize build "$tmp/watch-$ns"
done
