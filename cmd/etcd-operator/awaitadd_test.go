package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestAwaitAdd: await-add keeps asking the peers' /members while they do not list its peer URL (one
// peer not answering at all), and returns once one lists it; it reports what it waits for meanwhile.
func TestAwaitAdd(t *testing.T) {
	const self = "https://demo-3.demo-peer.ns.svc.cluster.local:2380"
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/members" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		members := []peerMember{{ID: 1, Name: "demo-0", PeerURLs: []string{"https://demo-0:2380"}}}
		if asked.Add(1) > 3 {
			members = append(members, peerMember{ID: 0xab, PeerURLs: []string{self}})
		}
		_ = json.NewEncoder(w).Encode(members)
	}))
	defer srv.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // a peer that does not answer

	var out bytes.Buffer
	cmd := newAwaitAddCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--peer-url=" + self, "--peers=" + down.URL + "," + srv.URL, "--interval=10ms", "--progress-interval=20ms"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("await-add: %v\n%s", err, out.String())
	}
	if n := asked.Load(); n != 4 {
		t.Errorf("the peer was asked %d times, want 4 (it lists the member the 4th time)", n)
	}
	if !strings.Contains(out.String(), "etcd lists member ab at "+self) {
		t.Errorf("output does not say the member is listed:\n%s", out.String())
	}
}

// TestAwaitAddFlags: the peer URL and the peers are required.
func TestAwaitAddFlags(t *testing.T) {
	cmd := newAwaitAddCommand()
	cmd.SetArgs([]string{"--peers=http://x:2380"})
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--peer-url") {
		t.Errorf("without --peer-url: %v", err)
	}
}

// TestAwaitAddFollowsTLSFiles: a pod that waits through a CA rotation follows its trust bundle. The peer
// serves a certificate of a new CA that the files first do not trust, so every ask is refused; once
// ca.crt is rewritten with both CAs (as a Secret volume is updated in place), await-add reads it and
// finds itself listed. Connections are kept between asks: fewer TLS connections than asks.
func TestAwaitAddFollowsTLSFiles(t *testing.T) {
	now := time.Now()
	oldCA, err := pki.NewCA("old", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := pki.NewCA("new", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey, err := newCA.Issue(pki.Request{CommonName: "peer", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true, Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	cliCert, cliKey, err := newCA.Issue(pki.Request{CommonName: "demo-3", Server: true, Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	bundle := append(append([]byte{}, oldCA.CertPEM...), newCA.CertPEM...)
	pool, err := pki.Pool(bundle)
	if err != nil {
		t.Fatal(err)
	}
	const self = "https://demo-3.demo-peer.ns.svc.cluster.local:2380"
	var asked, conns atomic.Int32
	dir := t.TempDir()
	// Written as kubelet updates a Secret volume: at once (a new file renamed over the old), so that
	// await-add never reads a file half written.
	write := func(name string, b []byte) {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write(resources.TLSCertKey, cliCert)
	write(resources.TLSKeyKey, cliKey)
	write(resources.CAKey, oldCA.CertPEM)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		members := []peerMember{{ID: 1, PeerURLs: []string{"https://demo-0:2380"}}}
		if asked.Add(1) > 3 {
			members = append(members, peerMember{ID: 0xab, PeerURLs: []string{self}})
		}
		_ = json.NewEncoder(w).Encode(members)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()

	var out bytes.Buffer
	cmd := newAwaitAddCommand()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--peer-url=" + self, "--peers=" + srv.URL, "--peer-tls-dir=" + dir, "--interval=10ms", "--progress-interval=1h"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	// refused until the trust bundle holds the new CA: the handshakes fail before any request is served
	testutil.Eventually(t, 5*time.Second, "3 refused handshakes", func(context.Context) error {
		if n := conns.Load(); n < 3 {
			return fmt.Errorf("%d handshakes", n)
		}
		return nil
	})
	if n := asked.Load(); n != 0 {
		t.Fatalf("the peer answered %d asks while await-add did not trust it", n)
	}
	before := conns.Load()
	write(resources.CAKey, bundle)
	if err := <-done; err != nil {
		t.Fatalf("await-add: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "etcd lists member ab") {
		t.Errorf("output does not say the member is listed:\n%s", out.String())
	}
	if n := asked.Load(); n != 4 {
		t.Errorf("asked %d times after the bundle changed, want 4", n)
	}
	// at most one handshake under way when the bundle changed, refused, and one kept connection
	if n := conns.Load() - before; n > 2 {
		t.Errorf("%d connections for %d asks after the bundle changed: connections are not kept", n, asked.Load())
	}
}
