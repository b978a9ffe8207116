# Shared settings for the hack/ scripts. Source it: . hack/env.sh
#
# Two directories, both safe to delete:
#   EO_CACHE  built binaries and images, keyed by version; reused across clones, so a component is
#             built once per machine (default ~/.cache/etcd-operator).
#   LK        state of the local Kubernetes cluster: pki, etcd data, kubelet, containerd, PVs, logs
#             (default /tmp/etcd-operator-k8s). `make cluster-down PURGE=1` wipes it.
export EO_CACHE=${EO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-operator}
export LK=${LK:-/tmp/etcd-operator-k8s}

export K8S_VERSION=v1.35.4          # k8s.io/kubernetes module version of the local cluster
export K8S_STAGING_VERSION=v0.35.4  # the matching published staging modules (k8s.io/api, ...)
export K8S_COMMIT=7b8c6cf0edd376b3d7c2f255142977c7f93db258   # the proxy's .info Origin of v1.35.4
export ETCD_VERSION=v3.6.16         # default etcd server version (also the local cluster's own etcd)
export ETCD_VERSIONS="${ETCD_VERSIONS:-v3.5.35 v3.6.16}"   # etcd server images to build (3.5: upgrade tests)
export COREDNS_VERSION=v1.14.7
export CRICTL_VERSION=v1.34.0
export VERSITYGW_VERSION=v1.8.0      # S3-compatible server of the backup tests (hack/build-s3.sh)
export KUBE_ROUTER_VERSION=v2.1.0    # NetworkPolicy enforcer of the end-to-end tests (hack/build-kube-router.sh)
export CERT_MANAGER_VERSION=v1.21.2  # certificate controllers of the issuerRef tests (hack/build-cert-manager.sh)

export K8S_BIN=$EO_CACHE/k8s-$K8S_VERSION/bin       # kube-apiserver, kubelet, ..., kubectl
export TOOLS_BIN=$EO_CACHE/tools/bin                # crictl, coredns, pause
export IMAGES=$EO_CACHE/images                      # OCI/docker tarballs to import into containerd

export GOTOOLCHAIN=local
export PATH=$K8S_BIN:$TOOLS_BIN:/usr/local/go/bin:$PATH
# kubectl: the one built here when there is one (it is first on PATH), else the machine's
KUBECTL=kubectl

# The machine's own address (kube-apiserver binds here: an Endpoints address may not be loopback).
NODE_IP=${NODE_IP:-$(ip -4 -o route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')}
[ -n "$NODE_IP" ] || NODE_IP=$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1)
export NODE_IP
export NODE_NAME=$(hostname | tr 'A-Z' 'a-z')
export POD_CIDR=10.244.0.0/24 CLUSTER_CIDR=10.244.0.0/16 POD_GW=10.244.0.1
export SERVICE_CIDR=10.96.0.0/16 KUBE_DNS_IP=10.96.0.10
export LOCAL_KUBECONFIG=$LK/pki/admin.kubeconfig
export CONTAINERD_SOCK=$LK/containerd/containerd.sock

# log STEP...: a progress line with the time elapsed since the script started.
export EO_T0=${EO_T0:-$(date +%s)}
log() { printf '[%4ss] %s\n' "$(( $(date +%s) - EO_T0 ))" "$*"; }
