//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"math/big"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/certs"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// putUserSecret writes Secret name in ns as a user or cert-manager does (no owner): a certificate ca
// issues for req, its key, and ca's certificate as ca.crt. It returns the certificate.
func putUserSecret(t *testing.T, ns, name string, ca *pki.CA, req pki.Request) []byte {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{resources.TLSCertKey: certPEM, resources.TLSKeyKey: keyPEM, resources.CAKey: ca.CertPEM}}
	ctx := context.Background()
	err = k8s.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		err = k8s.Update(ctx, s) // Secrets take an update without a resourceVersion
	}
	if err != nil {
		t.Fatalf("secret %s: %v", name, err)
	}
	return certPEM
}

// TestUserTLSSecrets: a cluster whose certificates are Secrets the user keeps (spec.tls.secrets, as
// cert-manager writes them) becomes Available with no CA of the operator's; its members serve the
// user's certificates on both ports, and a client with the user's client certificate reads and writes
// through the client Service. When the user renews the server certificate (a new one of the same CA,
// as cert-manager does), every member serves it without a restart while a writer runs, and no
// acknowledged write is lost.
func TestUserTLSSecrets(t *testing.T) {
	t.Parallel() // mostly waits: runs with the others of its kind once the serial tests are done (suite_test.go)
	ctx := context.Background()
	const ns, name = "e2e-tls-secrets", "demo"
	c := testutil.EtcdCluster(name, testutil.InNamespace(ns), testutil.WithReplicas(3), testutil.WithTLS(true, true),
		testutil.WithTLSSecrets("etcd-server", "etcd-peer", "etcd-client"))
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ca, err := pki.NewCA("users' etcd CA", 24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// the names a cert-manager Certificate would list: every member's and the client Service's
	opts := resources.Options{}
	server, peer, clientReq := opts.UserCertRequests(c)
	short := fmt.Sprintf("*.%s-peer.%s.svc", name, ns)
	server.DNSNames = append(server.DNSNames, short, fmt.Sprintf("%s-client.%s.svc", name, ns))
	peer.DNSNames = append(peer.DNSNames, short)
	clientReq.CommonName, peer.CommonName = "app", "etcd-peer"
	servedBefore := putUserSecret(t, ns, "etcd-server", ca, server)
	putUserSecret(t, ns, "etcd-peer", ca, peer)
	putUserSecret(t, ns, "etcd-client", ca, clientReq)

	// one CA for every certificate, as a single cert-manager Issuer gives: the peer common name tells a
	// member's certificate from a client's
	c = newCluster(t, ns, name, 3, testutil.WithTLS(true, true), testutil.WithTLSSecrets("etcd-server", "etcd-peer", "etcd-client"),
		func(c *etcdv1beta1.EtcdCluster) { c.Spec.TLS.Secrets.PeerCommonName = "etcd-peer" })
	took, got := assertAvailable(t, c, availableTimeout)
	t.Logf("apply -> Available with the user's certificates in %s", took.Round(100*time.Millisecond))
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + resources.CASecretSuffix}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the operator created a CA Secret for a cluster whose certificates the user keeps: %v", err)
	}
	if got.Status.TLS == nil || got.Status.TLS.ClientSecret != "etcd-client" || got.Status.TLS.RenewAt != nil {
		t.Errorf("status.tls %+v, want the user's client Secret and no renewal time", got.Status.TLS)
	}
	before, err := pki.ParseCert(servedBefore)
	if err != nil {
		t.Fatal(err)
	}
	uids := assertServedCA(t, c, ca.Cert, "the user's CA")

	ep := clientServiceEndpoint(t, c) // dials with the user's client Secret (clusterClientTLS)
	w := startWriter(t, ep)
	// the user renews the server certificate: a new one of the same CA
	renewed, err := pki.ParseCert(putUserSecret(t, ns, "etcd-server", ca, server))
	if err != nil {
		t.Fatal(err)
	}
	if renewed.SerialNumber.Cmp(before.SerialNumber) == 0 {
		t.Fatal("the renewed certificate has the old serial")
	}
	took = assertRenewedInPlace(t, c, uids, w, ep, func(context.Context) (*big.Int, error) { return renewed.SerialNumber, nil })
	t.Logf("server Secret renewed -> every member serves it in %s", took.Round(time.Second))
}

// assertRenewedInPlace waits (up to 5 minutes) until every member of cluster c serves on its client
// port the server certificate whose serial renewed returns (an error while there is none yet), then
// checks that no member pod was restarted (uids are their UIDs from before) and that writer w, which
// writes through ep, saw no request fail for a certificate reason and lost no acknowledged write. It
// returns how long the members took.
func assertRenewedInPlace(t *testing.T, c *etcdv1beta1.EtcdCluster, uids map[string]string, w *writer, ep string,
	renewed func(context.Context) (*big.Int, error)) time.Duration {
	t.Helper()
	took := poll.Eventually(t, 5*time.Minute, "every member serves the renewed server certificate", func(ctx context.Context) error {
		serial, err := renewed(ctx)
		if err != nil {
			return err
		}
		pods, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		for n, p := range pods {
			cert, err := certs.ServedCertificate(ctx, p.Status.PodIP+":2379")
			if err != nil {
				return err
			}
			if cert.SerialNumber.Cmp(serial) != 0 {
				return fmt.Errorf("%s serves serial %s, not the renewed %s", n, cert.SerialNumber, serial)
			}
		}
		return nil
	})
	pods, err := memberPods(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	for n, p := range pods {
		if string(p.UID) != uids[n] {
			t.Errorf("member pod %s was restarted for a renewed certificate", n)
		}
	}
	assertNoCertificateFailures(t, w)
	w.stopAndVerify(t, ep)
	return took
}

// assertServedCA checks that every member pod of cluster c serves, on its client and its peer port, a
// certificate that ca (named what in messages) signed, and returns the pods' UIDs by member name.
func assertServedCA(t *testing.T, c *etcdv1beta1.EtcdCluster, ca *x509.Certificate, what string) map[string]string {
	t.Helper()
	ctx := context.Background()
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]string{}
	for n, p := range pods {
		uids[n] = string(p.UID)
		for _, port := range []string{":2379", ":2380"} {
			cert, err := certs.ServedCertificate(ctx, p.Status.PodIP+port)
			if err != nil || cert.CheckSignatureFrom(ca) != nil {
				t.Errorf("%s does not serve a certificate of %s on port %s (%v)", n, what, port, err)
			}
		}
	}
	return uids
}
