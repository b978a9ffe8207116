#!/usr/bin/env bash
# Certificates (openssl), the service-account key pair and the kubeconfigs of the local cluster, in
# $LK/pki. One CA signs everything (serving and client certificates); keys are ECDSA P-256 (made in
# milliseconds, unlike RSA). Idempotent: what exists is kept,
# except that a changed NODE_IP or NODE_NAME (e.g. after a reboot) renews the certificates and
# kubeconfigs that name them. Writes the admin kubeconfig to $LOCAL_KUBECONFIG.
set -euo pipefail
. "$(dirname "$0")/env.sh"
P=$LK/pki
mkdir -p "$P"
cd "$P"
umask 077

ENDPOINT="$NODE_IP $NODE_NAME"
if [ -f endpoint ] && [ "$(cat endpoint)" != "$ENDPOINT" ]; then
  log "node address changed ($(cat endpoint) -> $ENDPOINT): renewing apiserver/kubelet certificates and kubeconfigs"
  rm -f apiserver.crt apiserver.key kubelet.crt kubelet.key ./*.kubeconfig
fi

key() { openssl ecparam -name prime256v1 -genkey -noout -out "$1"; }
if [ ! -f ca.crt ]; then
  key ca.key
  openssl req -x509 -new -key ca.key -subj "/CN=etcd-operator-k8s-ca" -days 3650 -out ca.crt \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature,keyEncipherment"
fi

# cert NAME SUBJECT EXTKEYUSAGE [SAN]
cert() {
  local n=$1 subj=$2 eku=$3 san=${4:-}
  [ -f "$n.crt" ] && [ -f "$n.key" ] && return 0
  key "$n.key"
  openssl req -new -key "$n.key" -subj "$subj" -out "$n.csr"
  { echo "basicConstraints=CA:FALSE"; echo "keyUsage=critical,digitalSignature,keyEncipherment"; echo "extendedKeyUsage=$eku"
    [ -n "$san" ] && echo "subjectAltName=$san"; } > "$n.ext"
  openssl x509 -req -in "$n.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile "$n.ext" -out "$n.crt" 2>/dev/null
  rm -f "$n.csr" "$n.ext"
}
# kube-apiserver serving cert; 10.96.0.1 is the first address of the service range (Service `kubernetes`)
cert apiserver "/CN=kube-apiserver" serverAuth \
  "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,DNS:$NODE_NAME,IP:10.96.0.1,IP:127.0.0.1,IP:$NODE_IP"
cert apiserver-kubelet-client "/CN=kube-apiserver-kubelet-client/O=system:masters" clientAuth
cert admin "/CN=kubernetes-admin/O=system:masters" clientAuth
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
cert kubelet "/CN=system:node:$NODE_NAME/O=system:nodes" clientAuth   # Node authorizer + NodeRestriction need this form
cert kube-proxy "/CN=system:kube-proxy" clientAuth                     # bound to system:node-proxier by default RBAC
# service-account token signing key
[ -f sa.key ] || { key sa.key; openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null; }

# kubeconfigs (certificates embedded, so each file is self-contained)
b64() { base64 -w0 < "$1"; }
for n in admin controller-manager scheduler kubelet kube-proxy; do
  k=$P/$n.kubeconfig
  [ -f "$k" ] && continue
  cat > "$k.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: etcd-operator-k8s
  cluster:
    server: https://$NODE_IP:6443
    certificate-authority-data: $(b64 ca.crt)
users:
- name: $n
  user:
    client-certificate-data: $(b64 "$n.crt")
    client-key-data: $(b64 "$n.key")
contexts:
- name: default
  context: { cluster: etcd-operator-k8s, user: $n }
current-context: default
EOF
  mv "$k.tmp" "$k"
done
chmod 644 ca.crt
echo "$ENDPOINT" > endpoint
[ "$LOCAL_KUBECONFIG" = "$P/admin.kubeconfig" ] || install -m 600 -D "$P/admin.kubeconfig" "$LOCAL_KUBECONFIG"
