# shellcheck shell=bash
# Storage settings, sourced after hack/env.sh by build-images.sh and cluster-up.sh.
# Dynamic PVs come from rancher's local-path-provisioner (a pod in namespace local-path-storage); its
# helper pods (mkdir / rm -rf of a volume directory under $LK/pv) run Debian's busybox-static.
export LOCAL_PATH_PROVISIONER_VERSION=v0.0.30
export LOCAL_PATH_PROVISIONER_BIN=$EO_CACHE/local-path-provisioner-$LOCAL_PATH_PROVISIONER_VERSION/bin
export PV_DIR=$LK/pv
# busybox image tag = the installed Debian package version as a valid tag: 1:1.35.0-4+deb12u1+b1 -> 1.35.0-4-deb12u1-b1
# (|| true: under set -eo pipefail a missing package, as before its install on a fresh machine, would
# end the sourcing script without a word)
BUSYBOX_TAG=$(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null | sed 's/^[0-9]*://; s/[^A-Za-z0-9_.-]/-/g' || true)
export BUSYBOX_TAG=${BUSYBOX_TAG:-unknown}
