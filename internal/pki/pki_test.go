package pki

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"
)

func TestIssueAndCheck(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ca, err := NewCA("test CA", CAValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	req := Request{CommonName: "server", DNSNames: []string{"*.demo-peer.ns.svc", "demo-client"}, Server: true, Client: true}
	certPEM, keyPEM, err := ca.Issue(req, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(ca, certPEM, keyPEM, req, now); err != nil {
		t.Fatalf("a fresh certificate fails its check: %v", err)
	}
	cert, err := ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.VerifyHostname("demo-3.demo-peer.ns.svc"); err != nil {
		t.Errorf("the wildcard does not cover a member: %v", err)
	}
	if got := cert.NotAfter.Sub(now); got != LeafValidity {
		t.Errorf("valid for %v, want %v", got, LeafValidity)
	}

	for _, tc := range []struct {
		name string
		err  error
	}{
		{"other names", check(ca, certPEM, keyPEM, Request{CommonName: "server", DNSNames: []string{"x"}, Server: true, Client: true}, now)},
		{"other usages", check(ca, certPEM, keyPEM, Request{CommonName: "server", DNSNames: req.DNSNames, Server: true}, now)},
		{"due", check(ca, certPEM, keyPEM, req, now.Add(LeafValidity*2/3+time.Hour))},
		{"garbage", check(ca, []byte("x"), keyPEM, req, now)},
	} {
		if tc.err == nil {
			t.Errorf("%s: Check passed", tc.name)
		}
		if tc.err != nil && strings.Contains(tc.err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: the error quotes key material: %v", tc.name, tc.err)
		}
	}
	other, err := NewCA("other CA", CAValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(other, certPEM, keyPEM, req, now); err == nil || !strings.Contains(err.Error(), "not issued by the current CA") {
		t.Errorf("another CA's check: %v", err)
	}
	_, otherKey, err := other.Issue(req, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(ca, certPEM, otherKey, req, now); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("a foreign key's check: %v", err)
	}
}

func TestLeafNeverOutlivesCA(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("short CA", 24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := ca.Issue(Request{CommonName: "c", Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if cert.NotAfter.After(ca.Cert.NotAfter) {
		t.Errorf("leaf valid until %v, after its CA (%v)", cert.NotAfter, ca.Cert.NotAfter)
	}
}

func TestParseCARoundTrip(t *testing.T) {
	ca, err := NewCA("ca", CAValidity, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseCA(ca.CertPEM, keyPEM)
	if err != nil || back.Fingerprint() != ca.Fingerprint() {
		t.Fatalf("ParseCA: %v", err)
	}
	other, err := NewCA("other", CAValidity, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := other.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseCA(ca.CertPEM, otherKey); err == nil {
		t.Error("a CA with another CA's key was accepted")
	}
	leafPEM, leafKey, err := ca.Issue(Request{CommonName: "leaf", Server: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseCA(leafPEM, leafKey); err == nil {
		t.Error("a leaf was accepted as a CA")
	}
}

func TestVerifyServer(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("ca", CAValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := Pool(ca.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	state := func(req Request) tls.ConnectionState {
		certPEM, _, err := ca.Issue(req, now)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := ParseCert(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		return tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	}
	verify := VerifyServer(roots, "demo-client.ns.svc.cluster.local")
	if err := verify(state(Request{CommonName: "s", DNSNames: []string{"demo-client.ns.svc.cluster.local"}, Server: true})); err != nil {
		t.Errorf("the cluster's serving certificate is refused: %v", err)
	}
	if err := verify(state(Request{CommonName: "s", DNSNames: []string{"other-client.ns.svc.cluster.local"}, Server: true})); err == nil {
		t.Error("a certificate for another name is accepted")
	}
	if err := verify(state(Request{CommonName: "c", DNSNames: []string{"demo-client.ns.svc.cluster.local"}, Client: true})); err == nil {
		t.Error("a client-only certificate is accepted as a server's")
	}
	if err := verify(tls.ConnectionState{}); err == nil {
		t.Error("no certificate is accepted")
	}
}

// TestCheckUsable: a certificate someone else issued is usable when it matches its key, chains to the
// CAs given, names every name asked (a wildcard checked with one host it covers) and allows the
// usages asked, at the time given; otherwise the error says which.
func TestCheckUsable(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ca, err := NewCA("users' CA", CAValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("another CA", CAValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	want := Request{DNSNames: []string{"*.demo-peer.ns.svc.cluster.local", "demo-client.ns.svc.cluster.local"}, Server: true, Client: true}
	good := Request{DNSNames: []string{"*.demo-peer.ns.svc.cluster.local", "demo-client.ns.svc.cluster.local", "localhost"}, Server: true, Client: true}
	certPEM, keyPEM, err := ca.Issue(good, now)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err := CheckUsable(certPEM, keyPEM, ca.CertPEM, want, now); err != nil || cert == nil {
		t.Fatalf("a certificate with every name and usage: %v", err)
	}
	_, otherKey, _ := ca.Issue(good, now)
	serverOnly, serverOnlyKey, _ := ca.Issue(Request{DNSNames: good.DNSNames, Server: true}, now)
	explicit, explicitKey, _ := ca.Issue(Request{DNSNames: []string{"demo-0.demo-peer.ns.svc.cluster.local", "demo-client.ns.svc.cluster.local"}, Server: true, Client: true}, now)
	foreign, foreignKey, _ := other.Issue(good, now)
	for _, tc := range []struct {
		name            string
		cert, key, root []byte
		at              time.Time
		want            string
	}{
		{"key of another certificate", certPEM, otherKey, ca.CertPEM, now, "tls.key is not the key of tls.crt"},
		{"another CA", foreign, foreignKey, ca.CertPEM, now, "not valid for server authentication with the CAs of ca.crt"},
		{"no client usage", serverOnly, serverOnlyKey, ca.CertPEM, now, "not valid for client authentication"},
		{"members named one by one", explicit, explicitKey, ca.CertPEM, now, "does not name *.demo-peer.ns.svc.cluster.local"},
		{"expired", certPEM, keyPEM, ca.CertPEM, now.Add(2 * LeafValidity), "not valid for server authentication"},
		{"no CA", certPEM, keyPEM, nil, now, "ca.crt: no PEM certificate"},
		{"no certificate", nil, keyPEM, ca.CertPEM, now, "tls.crt: no PEM certificate"},
	} {
		if _, err := CheckUsable(tc.cert, tc.key, tc.root, want, tc.at); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if got := EarliestNotAfter(append(append([]byte{}, ca.CertPEM...), certPEM...)); !got.Equal(now.Add(LeafValidity)) {
		t.Errorf("EarliestNotAfter = %v, want the leaf's %v", got, now.Add(LeafValidity))
	}
}

// check is what the keeper asks of a leaf Secret: ca issued it for req (CheckIssued), and it is not due
// for renewal at now (CheckRenewal).
func check(ca *CA, certPEM, keyPEM []byte, req Request, now time.Time) error {
	cert, err := ca.CheckIssued(certPEM, keyPEM, req)
	if err != nil {
		return err
	}
	return CheckRenewal(cert, now)
}

// TestDigest: the same parts give the same digest; the same bytes split differently, or other bytes,
// give another.
func TestDigest(t *testing.T) {
	want := Digest([]byte("ab"), []byte("c"))
	if again := Digest([]byte("a"+"b"), []byte{'c'}); again != want {
		t.Error("the same parts give two digests")
	}
	for _, other := range [][][]byte{{[]byte("a"), []byte("bc")}, {[]byte("abc")}, {[]byte("ab"), []byte("d")}, {[]byte("ab"), []byte("c"), nil}} {
		if Digest(other...) == want {
			t.Errorf("%q has the digest of [ab c]", other)
		}
	}
}
