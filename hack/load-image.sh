#!/usr/bin/env bash
# Imports image tarballs (docker-archive or OCI layout, e.g. from hack/imgpack) into the running local
# cluster's containerd, namespace k8s.io, where kubelet finds them. Reference an image in a pod spec by
# its fully qualified name and a non-latest tag (docker.io/local/NAME:TAG) with imagePullPolicy
# IfNotPresent or Never: nothing can be pulled here.
#   usage: hack/load-image.sh TARBALL...
set -euo pipefail
. "$(dirname "$0")/env.sh"
[ $# -gt 0 ] || { echo "usage: $0 TARBALL..." >&2; exit 2; }
CTR="ctr --address $CONTAINERD_SOCK -n k8s.io"
$CTR version >/dev/null 2>&1 || { echo "the local cluster's containerd is not running ($CONTAINERD_SOCK); start it: bash hack/cluster-up.sh" >&2; exit 1; }
for f in "$@"; do
  [ -f "$f" ] || { echo "$f: no such file" >&2; exit 1; }
  out=$($CTR images import "$f" 2>&1) || { echo "$out" >&2; echo "import of $f failed" >&2; exit 1; }
  # ctr prints "unpacking NAME (sha256:MANIFEST)...done" per image
  echo "$out" | sed -n 's/^unpacking \([^ ]*\) (\(sha256:[0-9a-f]*\)).*/\1 \2/p' | while read -r name digest; do
    echo "loaded $name ($digest) from $f"
  done
done
