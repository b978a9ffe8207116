package resources

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// CertificateGVK is cert-manager's Certificate, which the operator creates for each TLS Secret of a
// cluster with spec.tls.issuerRef. The operator does not import cert-manager's API: it builds and reads
// Certificates as unstructured objects, so that it runs where cert-manager is not installed.
var CertificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// Usages of cert-manager's Certificate (spec.usages): those of a key pair that serves and dials TLS.
var (
	serverClientUsages = []any{"digital signature", "key encipherment", "server auth", "client auth"}
	clientUsages       = []any{"digital signature", "key encipherment", "client auth"}
)

// IssuedCertificate is one cert-manager Certificate of a cluster with spec.tls.issuerRef: Kind is the
// Secret's kind ("server", "peer" or "client"), Object the Certificate, named as the Secret it writes.
type IssuedCertificate struct {
	Kind   string
	Object *unstructured.Unstructured
}

// IssuedCertificates are the cert-manager Certificates of cluster c with spec.tls.issuerRef, for the
// ports that need them: with client TLS the server certificate (what ServerCertRequest names, for server
// and client authentication) and the client certificate for users (common name ClientCommonName, which
// etcd takes as the user name with authentication on), with peer TLS the peer certificate (every member's
// name, common name PeerCommonName, which the members require on the peer port). Each is named as the
// Secret it writes (IssuedTLSSecretName: "<cluster>-cm-server-tls" and so on), controlled by c, with an ECDSA P-256 key that is
// generated again at each renewal; its Secret carries the cluster's labels, so that the operator's
// cache holds and watches it. Duration and renewal are the issuer's defaults (cert-manager's: 90 days,
// renewed a third before expiry).
func (o Options) IssuedCertificates(c *etcdv1beta1.EtcdCluster, client, peer bool) []IssuedCertificate {
	var out []IssuedCertificate
	if client {
		server := o.ServerCertRequest(c)
		dns := make([]any, 0, len(server.DNSNames))
		for _, n := range server.DNSNames {
			dns = append(dns, n)
		}
		out = append(out,
			IssuedCertificate{"server", certificate(c, IssuedTLSSecretName(c, ServerTLSSecretSuffix), map[string]any{
				"dnsNames": dns, "ipAddresses": []any{"127.0.0.1", "::1"}, "usages": serverClientUsages})},
			IssuedCertificate{"client", certificate(c, IssuedTLSSecretName(c, ClientTLSSecretSuffix), map[string]any{
				"commonName": ClientCommonName, "usages": clientUsages})})
	}
	if peer {
		dns := []any{}
		for _, n := range o.memberWildcards(c) {
			dns = append(dns, n)
		}
		out = append(out, IssuedCertificate{"peer", certificate(c, IssuedTLSSecretName(c, PeerTLSSecretSuffix), map[string]any{
			"commonName": PeerCommonName(c), "dnsNames": dns, "usages": serverClientUsages})})
	}
	return out
}

// certificate is the Certificate of cluster c that writes Secret name, with spec fields spec.
func certificate(c *etcdv1beta1.EtcdCluster, name string, spec map[string]any) *unstructured.Unstructured {
	ref := c.Spec.TLS.IssuerRef.Defaulted()
	labels := map[string]any{}
	for k, v := range Labels(c) {
		labels[k] = v
	}
	spec["secretName"] = name
	spec["issuerRef"] = map[string]any{"name": ref.Name, "kind": ref.Kind, "group": ref.Group}
	spec["privateKey"] = map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"}
	spec["secretTemplate"] = map[string]any{"labels": labels}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(CertificateGVK)
	u.SetName(name)
	u.SetNamespace(c.Namespace)
	u.SetLabels(Labels(c))
	u.SetOwnerReferences([]metav1.OwnerReference{OwnerReference(c)})
	return u
}
