#!/usr/bin/env bash
# Builds a release of the operator for an image repository of your own (make release): the binary and
# the image of version VERSION, and the install files and the Helm chart that run that image, so that
# a cluster that can pull from the repository installs the operator from them.
#
#   bash hack/release.sh --version vX.Y.Z --image REGISTRY/NAME [--namespace NS] [--out DIR]
#   make release VERSION=vX.Y.Z IMG=REGISTRY/NAME [RELEASE_NAMESPACE=NS] [RELEASE_DIR=DIR]
#
# VERSION is a semantic version with a leading v (v0.2.0, v0.2.0-rc.1, no +build part: image tags
# cannot hold a +). IMG is the image's repository without a tag: the image is IMG:VERSION. DIR
# (default bin/release/VERSION) receives
#   etcd-operator                    the binary (`etcd-operator version` prints VERSION)
#   etcd-operator.tar                the image IMG:VERSION (docker-archive, label
#                                    org.opencontainers.image.version=VERSION); make push pushes it
#   install.yaml                     dist/install.yaml with the image IMG:VERSION, in namespace NS
#   install-namespaced.yaml          dist/install-namespaced.yaml likewise (hack/install-namespaced.sh)
#   etcd-operator-X.Y.Z.tgz          the Helm chart: version X.Y.Z (VERSION without the v), appVersion
#                                    VERSION, image.repository IMG
# NS (default etcd-operator-system) is the namespace the install files put the operator in (the Helm
# chart takes the release's). Then push the image, which the install files name, with
#   make push VERSION=vX.Y.Z IMG=REGISTRY/NAME:vX.Y.Z
# (the same build, so the same image: its digest is the one of etcd-operator.tar).
#
#   bash hack/release.sh --check
# renders the install files and the chart of the release the repository names (the chart's
# appVersion and image.repository) and fails unless they equal dist/ and charts/etcd-operator:
# make verify runs it, so that make release and make manifests render the same objects.
set -euo pipefail
cd "$(dirname "$0")/.."
unset EO_T0   # its progress in seconds since it started, also when a longer script runs it
. hack/env.sh
root=$PWD

version="" image="" namespace=etcd-operator-system out="" check=0
while [ $# -gt 0 ]; do
  case "$1" in
    --version) version=$2; shift 2 ;;
    --image) image=$2; shift 2 ;;
    --namespace) namespace=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --check) check=1; shift ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

kustomize() { go tool -modfile="$root/hack/tools/go.mod" kustomize "$@"; }
helm() { go tool -modfile="$root/hack/tools/helm/go.mod" helm "$@"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ $check = 1 ]; then
  version=$(sed -n 's/^appVersion: *//p' charts/etcd-operator/Chart.yaml)
  image=$(sed -n 's/^  repository: *//p' charts/etcd-operator/values.yaml | head -1)
  out=$tmp/out
fi

semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$'
if ! [[ $version =~ $semver ]]; then
  echo "VERSION='$version' is not a release version: give one such as VERSION=v0.2.0 or v0.2.0-rc.1 (a leading v, no +build part)" >&2
  exit 2
fi
last=${image##*/}
if [ -z "$image" ] || [[ $image != */* ]] || [ -z "$last" ] || [[ $image == *//* ]] || [[ $last == *:* ]] || [[ $image == *@* ]]; then
  echo "IMG='$image' must be the image's repository without a tag, e.g. IMG=ghcr.io/me/etcd-operator: the release's image is IMG:VERSION" >&2
  exit 2
fi
if [[ $image == docker.io/local/* ]]; then
  echo "IMG='$image' is the local cluster's image name, which no registry serves: give a repository of your own, e.g. IMG=ghcr.io/me/etcd-operator" >&2
  exit 2
fi
dns1123='^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
if ! [[ $namespace =~ $dns1123 ]] || [ ${#namespace} -gt 63 ]; then
  echo "not a namespace name: '$namespace'" >&2; exit 2
fi
ref=$image:$version
chartVersion=${version#v}
out=${out:-bin/release/$version}
mkdir -p "$out"

if [ $check = 0 ]; then
  log "building the binary and the image $ref (version $version)"
  make -s image VERSION="$version" IMG="$ref" OPERATOR_BIN="$out/etcd-operator" IMAGE_TAR="$out/etcd-operator.tar" >/dev/null
  got=$("$out/etcd-operator" version)
  [ "$got" = "$version" ] || { echo "the binary says it is version '$got', not $version" >&2; exit 1; }
fi

log "rendering install.yaml and install-namespaced.yaml (namespace $namespace, image $ref)"
mkdir "$tmp/install"
cat >"$tmp/install/kustomization.yaml" <<YAML
namespace: $namespace
resources:
- $(realpath --relative-to="$tmp/install" "$root/config/default")
images:
- name: ghcr.io/etcdkit/etcd-operator
  newName: $image
  newTag: $version
YAML
kustomize build "$tmp/install" >"$out/install.yaml"
bash hack/install-namespaced.sh --namespace "$namespace" --image "$ref" >"$out/install-namespaced.yaml"
for f in install.yaml install-namespaced.yaml; do
  n=$(grep -c "image: $ref\$" "$out/$f" || true)
  [ "$n" = 1 ] || { echo "$out/$f names the image $ref $n times, want once (config/manager's image changed?)" >&2; exit 1; }
done

log "packaging the Helm chart $chartVersion (appVersion $version, image.repository $image)"
cp -r charts/etcd-operator "$tmp/etcd-operator"
sed -i "s|^  repository: ghcr.io/etcdkit/etcd-operator\$|  repository: $image|" "$tmp/etcd-operator/values.yaml"
grep -q "^  repository: $image\$" "$tmp/etcd-operator/values.yaml" ||
  { echo "charts/etcd-operator/values.yaml has no image.repository line to set" >&2; exit 1; }
helm lint --strict "$tmp/etcd-operator" >/dev/null
helm package "$tmp/etcd-operator" --version "$chartVersion" --app-version "$version" --destination "$out" >/dev/null
chart=$out/etcd-operator-$chartVersion.tgz
rendered=$(helm template etcd-operator "$chart" --namespace "$namespace")
grep -q "image: $ref\$" <<<"$rendered" || { echo "the chart $chart does not run the image $ref" >&2; exit 1; }

if [ $check = 1 ]; then
  diff -u dist/install.yaml "$out/install.yaml" ||
    { echo "make release renders another install.yaml than dist/install.yaml: make them render the same (config/default, hack/release.sh)" >&2; exit 1; }
  diff -u dist/install-namespaced.yaml "$out/install-namespaced.yaml" ||
    { echo "make release renders another install-namespaced.yaml than dist/: make them render the same (hack/install-namespaced.sh, hack/release.sh)" >&2; exit 1; }
  diff -u <(helm template etcd-operator charts/etcd-operator --namespace "$namespace") <(echo "$rendered") ||
    { echo "the chart make release packages renders other objects than charts/etcd-operator" >&2; exit 1; }
  log "make release of $ref renders dist/ and charts/etcd-operator"
  exit 0
fi

id=$(tar -xOf "$out/etcd-operator.tar" manifest.json | grep -o 'sha256:[0-9a-f]\{64\}' | head -1)
log "release $version in $out:"
(cd "$out" && for f in etcd-operator etcd-operator.tar install.yaml install-namespaced.yaml "etcd-operator-$chartVersion.tgz"; do
  printf '  %-44s %7s\n' "$f" "$(numfmt --to=iec --suffix=B "$(stat -c %s "$f")")"
done)
echo "  image $ref, image ID ${id:-unknown}"
echo "next: push the image, which the install files and the chart name (prints its digest):"
echo "  make push VERSION=$version IMG=$ref"
