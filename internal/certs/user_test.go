package certs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/certs"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// userSecret writes a kubernetes.io/tls Secret of the user (no owner) with a certificate ca issues for
// req, and ca.crt.
func userSecret(t *testing.T, ns, name string, ca *pki.CA, req pki.Request, caPEM []byte) *corev1.Secret {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{resources.TLSCertKey: certPEM, resources.TLSKeyKey: keyPEM, resources.CAKey: caPEM}}
	if err := k8s.Create(context.Background(), s); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	} else if err != nil {
		if err := k8s.Update(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestUserSecrets: with spec.tls.secrets the keeper creates no CA and writes no Secret; it checks the
// user's Secrets, reports them, and dials a real member serving the user's certificate with the user's
// client certificate. A Secret that is missing, or whose certificate does not name the client Service,
// or a client Secret whose ca.crt does not verify the members, blocks with a message naming it.
func TestUserSecrets(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	c.Spec.TLS.Secrets = &etcdv1beta1.TLSSecrets{Server: "etcd-server", Peer: "etcd-peer", Client: "etcd-client"}
	if err := k8s.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	opts := resources.Options{}
	serverReq, peerReq, clientReq := opts.UserCertRequests(c)
	peerReq.CommonName = "demo-peer"
	serverReq.DNSNames = append(serverReq.DNSNames, "localhost")
	serverReq.IPs = resources.Options{}.ServerCertRequest(c).IPs
	ca, err := pki.NewCA("users' CA", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	userSecret(t, c.Namespace, "etcd-server", ca, serverReq, ca.CertPEM)
	userSecret(t, c.Namespace, "etcd-client", ca, clientReq, ca.CertPEM)

	k := &certs.Keeper{Client: k8s, Options: opts}
	_, err = k.Ensure(ctx, c)
	if reason, blocked := certs.Blocked(err); !blocked || reason != etcdv1beta1.ReasonTLSSecretUnusable ||
		!strings.Contains(err.Error(), "secret etcd-peer (spec.tls.secrets.peer) is not usable: it does not exist") {
		t.Fatalf("the peer Secret is missing: %v (reason %s), want it blocked, naming the Secret", err, reason)
	}
	peer := userSecret(t, c.Namespace, "etcd-peer", ca, peerReq, ca.CertPEM)
	// one CA for every certificate: without a peer common name, a client certificate would pass as a member
	if _, err := k.Ensure(ctx, c); !errors.Is(err, certs.ErrUnusableSecret) || !strings.Contains(err.Error(), "shares the CA \"users' CA\" with the server Secret etcd-server") {
		t.Errorf("one CA for the peer and the client port, no peer common name: %v; want it refused", err)
	}
	c.Spec.TLS.Secrets.PeerCommonName = "etcd-peer"
	if _, err := k.Ensure(ctx, c); !errors.Is(err, certs.ErrUnusableSecret) || !strings.Contains(err.Error(), `common name is "demo-peer", not spec.tls.secrets.peerCommonName "etcd-peer"`) {
		t.Errorf("a peer common name the certificate does not have: %v; want it refused", err)
	}
	c.Spec.TLS.Secrets.PeerCommonName = "demo-peer"
	res, err := k.Ensure(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed) != 0 || !res.UserSecrets || res.ClientSecret != "etcd-client" || res.TrustedCAsHash == "" || res.NotAfter.IsZero() ||
		!res.RenewAt.IsZero() || !res.CANotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("result %+v: want nothing changed, the user's client Secret, a trust hash, the expiries and no renewal", res)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: "demo-ca"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("a CA Secret was created: %v", err)
	}
	if got := secret(t, c, "etcd-peer"); got.ResourceVersion != peer.ResourceVersion {
		t.Error("the user's peer Secret was written")
	}

	// the operator reaches a real member serving the user's certificate, with the user's client certificate
	const host = "127.0.0.97"
	startTLSMember(t, host, writeSecret(t, secret(t, c, "etcd-server")), "")
	opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cl, err := etcd.New(opCtx, etcd.Config{Endpoints: []string{"https://" + host + ":2379"}, TLS: k.ClientTLS(c.Namespace, c.Name), DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Close() }()
	if _, _, err := cl.MemberList(opCtx); err != nil {
		t.Fatalf("the operator's client configuration from the user's Secret is refused: %v", err)
	}

	// a server certificate that does not name the client Service, and a client Secret of another CA
	noService := serverReq
	noService.DNSNames = serverReq.DNSNames[:1]
	userSecret(t, c.Namespace, "etcd-server", ca, noService, ca.CertPEM)
	if _, err := k.Ensure(ctx, c); !errors.Is(err, certs.ErrUnusableSecret) ||
		!strings.Contains(err.Error(), "spec.tls.secrets.server") || !strings.Contains(err.Error(), "does not name demo-client."+c.Namespace+".svc.cluster.local") {
		t.Errorf("a server certificate without the client Service's name: %v", err)
	}
	userSecret(t, c.Namespace, "etcd-server", ca, serverReq, ca.CertPEM)
	other, err := pki.NewCA("another CA", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	userSecret(t, c.Namespace, "etcd-client", ca, clientReq, other.CertPEM)
	if _, err := k.Ensure(ctx, c); !errors.Is(err, certs.ErrUnusableSecret) ||
		!strings.Contains(err.Error(), "spec.tls.secrets.client") || !strings.Contains(err.Error(), "its ca.crt does not verify the server certificate of Secret etcd-server") {
		t.Errorf("a client Secret whose ca.crt is another CA's: %v", err)
	}
}
