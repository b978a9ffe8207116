package etcd

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestClientResumesTLSSessions: with pki.ClientConfig, the connections a pass opens to a member
// (the client's own, then one per Status and per health check) resume the TLS session of the first,
// against a real etcd that requires client certificates; a configuration of its own (another
// cluster's, or one made after a certificate changed) resumes nothing of it, and a member whose
// certificate the configuration does not trust is refused even when a session exists.
func TestClientResumesTLSSessions(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("tls-test-ca", pki.CAValidity, now)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const serviceName = "demo-client.ns.svc.cluster.local"
	serverCert, serverKey, err := ca.Issue(pki.Request{CommonName: "m0", DNSNames: []string{serviceName}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey, err := ca.Issue(pki.Request{CommonName: "root", Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	p := testutil.FreePorts(t, 2)
	cfg := embed.NewConfig()
	cfg.Name = "m0"
	cfg.Dir = t.TempDir()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.TickMs, cfg.ElectionMs, cfg.UnsafeNoFsync = testTickMs, testElectionMs, true
	peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", p[0])}
	client := url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", p[1])}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = "m0=" + peer.String()
	cfg.ClientTLSInfo.CertFile = write("server.crt", serverCert)
	cfg.ClientTLSInfo.KeyFile = write("server.key", serverKey)
	cfg.ClientTLSInfo.TrustedCAFile = write("ca.crt", ca.CertPEM)
	cfg.ClientTLSInfo.ClientCertAuth = true
	testutil.StartEtcd(t, cfg)

	pair, err := tls.X509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := pki.Pool(ca.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	// handshakes records, for each connection a configuration made, whether it resumed a session
	type handshakes struct {
		mu      sync.Mutex
		resumed []bool
	}
	recorded := func(name string) (*tls.Config, *handshakes) {
		c := pki.ClientConfig(pair, roots, name)
		h := &handshakes{}
		verify := c.VerifyConnection
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			err := verify(cs)
			if err == nil {
				h.mu.Lock()
				h.resumed = append(h.resumed, cs.DidResume)
				h.mu.Unlock()
			}
			return err
		}
		return c, h
	}
	pass := func(c *tls.Config, within time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		cli, err := New(ctx, Config{Endpoints: []string{client.String()}, TLS: c})
		if err != nil {
			return err
		}
		defer func() { _ = cli.Close() }()
		if _, _, err := cli.MemberList(ctx); err != nil {
			return err
		}
		if _, err := cli.Status(ctx, client.String()); err != nil {
			return err
		}
		return cli.Health(ctx, client.String())
	}

	c, h := recorded(serviceName)
	for range 2 {
		if err := pass(c, 10*time.Second); err != nil {
			t.Fatalf("a pass over TLS: %v", err)
		}
	}
	h.mu.Lock()
	got := append([]bool(nil), h.resumed...)
	h.mu.Unlock()
	if len(got) < 6 || got[0] {
		t.Fatalf("connections of two passes resumed %v; want at least 6 connections, the first a full handshake", got)
	}
	for i, r := range got[1:] {
		if !r {
			t.Errorf("connection %d of %v was a full handshake: etcd's session was not resumed", i+2, got)
		}
	}

	other, oh := recorded(serviceName)
	if err := pass(other, 10*time.Second); err != nil {
		t.Fatalf("a pass with another configuration: %v", err)
	}
	if len(oh.resumed) == 0 || oh.resumed[0] {
		t.Errorf("another configuration's first connection resumed (%v): sessions must stay with the configuration that made them", oh.resumed)
	}

	// a session exists for this address, but the configuration trusts another name: the resumed
	// session is refused
	wrong := pki.ClientConfig(pair, roots, "other-client.ns.svc.cluster.local")
	wrong.ClientSessionCache = c.ClientSessionCache
	var refusedResumed sync.Map
	verifyWrong := wrong.VerifyConnection
	wrong.VerifyConnection = func(cs tls.ConnectionState) error {
		err := verifyWrong(cs)
		if err != nil && cs.DidResume {
			refusedResumed.Store(true, true)
		}
		return err
	}
	if err := pass(wrong, 2*time.Second); err == nil {
		t.Error("a member whose certificate names another Service was accepted through a resumed session")
	}
	if _, ok := refusedResumed.Load(true); !ok {
		t.Error("no resumed session was checked and refused: VerifyConnection must run on resumed sessions")
	}
}
