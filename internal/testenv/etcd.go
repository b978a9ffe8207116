package testenv

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// EtcdMember is a real etcd member running in the test process.
type EtcdMember struct {
	Name string
	// Host is the loopback address the member listens on, with the standard ports 2379 and 2380.
	Host string
	Etcd *embed.Etcd
	// TLS is true when the client port serves TLS (StartEtcdClientTLS).
	TLS bool

	cfg  *embed.Config
	mu   sync.Mutex
	stop *sync.Once
}

// Stop stops the member (a crash, as far as its peers and clients can tell); stopping it again, or
// the test ending, does nothing more.
func (m *EtcdMember) Stop() {
	m.mu.Lock()
	stop, e := m.stop, m.Etcd
	m.mu.Unlock()
	stop.Do(e.Close)
}

// Restart stops the member if it runs and starts it again on its data directory (a member that comes
// back after a crash, with its ID and data), waiting up to 30 s for it to be ready; it fails t when it
// does not start.
func (m *EtcdMember) Restart(t testing.TB) {
	t.Helper()
	m.Stop()
	e, err := embed.StartEtcd(m.cfg)
	if err != nil {
		t.Fatalf("restart etcd member %s on %s: %v", m.Name, m.Host, err)
	}
	m.mu.Lock()
	m.Etcd, m.stop = e, &sync.Once{}
	m.mu.Unlock()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("etcd member %s failed after its restart: %v", m.Name, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("etcd member %s not ready within 30s of its restart", m.Name)
	}
}

// ClientURL is the member's client URL, http://<host>:2379 (https:// with TLS).
func (m *EtcdMember) ClientURL() string {
	if m.TLS {
		return "https://" + m.Host + ":2379"
	}
	return "http://" + m.Host + ":2379"
}

// StartEtcd starts one etcd member per name, member i on loopback address hosts[i] (127.0.0.0/8, so
// that each has the standard ports, as member pods do), as one new cluster, and waits up to 30 s for
// all of them to be ready. They stop when the test ends.
func StartEtcd(t testing.TB, names, hosts []string) []*EtcdMember {
	t.Helper()
	return StartEtcdWithToken(t, strings.ReplaceAll(t.Name(), "/", "-"), names, hosts)
}

// StartEtcdWithToken is StartEtcd with the given --initial-cluster-token, from which etcd derives the
// member IDs and the cluster ID: the same names and hosts with another token make another cluster.
func StartEtcdWithToken(t testing.TB, token string, names, hosts []string) []*EtcdMember {
	t.Helper()
	return startEtcd(t, token, names, hosts, nil)
}

// StartEtcdClientTLS is StartEtcd with the client port serving TLS with tlsInfo's certificate, key and
// trusted CA (tlsInfo.ClientCertAuth: clients need a certificate of that CA); the peer port stays plain.
func StartEtcdClientTLS(t testing.TB, names, hosts []string, tlsInfo transport.TLSInfo) []*EtcdMember {
	t.Helper()
	return startEtcd(t, strings.ReplaceAll(t.Name(), "/", "-"), names, hosts, &tlsInfo)
}

func startEtcd(t testing.TB, token string, names, hosts []string, clientTLS *transport.TLSInfo) []*EtcdMember {
	t.Helper()
	scheme := "http"
	if clientTLS != nil {
		scheme = "https"
	}
	var initial []string
	for i, n := range names {
		initial = append(initial, fmt.Sprintf("%s=http://%s:2380", n, hosts[i]))
	}
	members := make([]*EtcdMember, len(names))
	for i, n := range names {
		cfg := embed.NewConfig()
		cfg.Name = n
		cfg.Dir = t.TempDir()
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		cfg.TickMs, cfg.ElectionMs = 25, 500
		cfg.UnsafeNoFsync = true
		cfg.InitialClusterToken = token
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.ClusterState = embed.ClusterStateFlagNew
		peer, _ := url.Parse(fmt.Sprintf("http://%s:2380", hosts[i]))
		cli, _ := url.Parse(fmt.Sprintf("%s://%s:2379", scheme, hosts[i]))
		if clientTLS != nil {
			cfg.ClientTLSInfo = *clientTLS
		}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cli}, []url.URL{*cli}
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			t.Fatalf("start etcd member %s on %s: %v", n, hosts[i], err)
		}
		members[i] = &EtcdMember{Name: n, Host: hosts[i], Etcd: e, TLS: clientTLS != nil, cfg: cfg, stop: &sync.Once{}}
		t.Cleanup(members[i].Stop)
	}
	deadline := time.After(30 * time.Second)
	for _, m := range members {
		select {
		case <-m.Etcd.Server.ReadyNotify():
		case err := <-m.Etcd.Err():
			t.Fatalf("etcd member %s failed: %v", m.Name, err)
		case <-deadline:
			t.Fatalf("etcd member %s not ready within 30s", m.Name)
		}
	}
	return members
}
