package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// Timing of the in-process test clusters. Ticks are short so elections are
// quick, but the election timeout leaves room for a loaded 2-core machine.
const (
	testTickMs     = 25
	testElectionMs = 500
	// readyTimeout bounds how long a member may take to become ready.
	readyTimeout = 20 * time.Second
	// reconfigTimeout bounds polling for a reconfiguration etcd refuses
	// at first: strict reconfig check wants peers connected for 5 s.
	reconfigTimeout = 20 * time.Second
)

// testMember is one embedded etcd member.
type testMember struct {
	name      string
	peerURL   string
	clientURL string
	dir       string

	mu     sync.Mutex
	etcd   *embed.Etcd
	closed bool
}

// stop closes the member's server; later calls do nothing.
func (m *testMember) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.etcd == nil || m.closed {
		return
	}
	m.closed = true
	m.etcd.Close()
}

// testCluster is a set of embedded etcd members on 127.0.0.1.
type testCluster struct {
	t       *testing.T
	token   string
	members []*testMember
}

// poll polls a live in-process cluster: every 50 ms, each call bounded by 5 s.
var poll = testutil.Poller{Interval: 50 * time.Millisecond, AttemptTimeout: 5 * time.Second}

// newTestMember allocates ports and a data directory for a member that is
// not started yet.
func newTestMember(t *testing.T, name string) *testMember {
	p := testutil.FreePorts(t, 2)
	return &testMember{
		name:      name,
		peerURL:   fmt.Sprintf("http://127.0.0.1:%d", p[0]),
		clientURL: fmt.Sprintf("http://127.0.0.1:%d", p[1]),
		dir:       t.TempDir(),
	}
}

// newTestCluster starts an n-member cluster and waits until every member is
// ready. The members are closed when the test ends.
func newTestCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	c := &testCluster{t: t, token: "tc-" + strings.ReplaceAll(t.Name(), "/", "-")}
	var initial []string
	for i := range n {
		m := newTestMember(t, fmt.Sprintf("m%d", i))
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL)
	}
	t.Cleanup(c.stopAll)
	for _, m := range c.members {
		c.start(m, embed.ClusterStateFlagNew, strings.Join(initial, ","))
	}
	for _, m := range c.members {
		c.waitReady(m)
	}
	return c
}

// start starts m's server with the given --initial-cluster-state and
// --initial-cluster; it does not wait for it to be ready.
func (c *testCluster) start(m *testMember, state, initialCluster string) {
	c.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.TickMs = testTickMs
	cfg.ElectionMs = testElectionMs
	cfg.UnsafeNoFsync = true
	cfg.InitialClusterToken = c.token
	cfg.InitialCluster = initialCluster
	cfg.ClusterState = state
	peer, client := mustURL(c.t, m.peerURL), mustURL(c.t, m.clientURL)
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		c.t.Fatalf("start etcd member %s: %v", m.name, err)
	}
	m.mu.Lock()
	m.etcd, m.closed = e, false
	m.mu.Unlock()
}

// waitReady waits until m has joined the cluster and serves clients.
func (c *testCluster) waitReady(m *testMember) {
	c.t.Helper()
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case <-m.etcd.Server.ReadyNotify():
	case err := <-m.etcd.Err():
		c.t.Fatalf("etcd member %s failed: %v", m.name, err)
	case <-timer.C:
		c.t.Fatalf("etcd member %s not ready after %v", m.name, readyTimeout)
	}
}

// startJoining starts m as a member that was already added to the cluster
// (--initial-cluster-state=existing), with --initial-cluster built from the
// named members of the current member list plus m, and waits until it is
// ready. m is closed when the test ends.
func (c *testCluster) startJoining(m *testMember, members []Member) {
	c.t.Helper()
	initial := []string{m.name + "=" + m.peerURL}
	for _, mem := range members {
		if mem.Name != "" && mem.Name != m.name {
			initial = append(initial, mem.Name+"="+mem.PeerURLs[0])
		}
	}
	c.members = append(c.members, m)
	c.start(m, embed.ClusterStateFlagExisting, strings.Join(initial, ","))
	c.waitReady(m)
}

// stopAll closes the followers concurrently and then the leader. A leader
// stopping while its peers still run first tries to hand leadership over
// (up to etcd's request timeout, 5 s + 2 election timeouts) and fails if the
// chosen peer is stopping too; once its peers are gone it skips that.
func (c *testCluster) stopAll() {
	var (
		wg     sync.WaitGroup
		leader *testMember
	)
	for _, m := range c.members {
		m.mu.Lock()
		running := m.etcd != nil && !m.closed
		isLeader := running && m.etcd.Server.Leader() == m.etcd.Server.MemberID()
		m.mu.Unlock()
		if isLeader && leader == nil {
			leader = m
			continue
		}
		wg.Go(m.stop)
	}
	wg.Wait()
	if leader != nil {
		leader.stop()
	}
}

// endpoints returns the client URLs of all members.
func (c *testCluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

// memberID returns the raft ID of m as its server knows it.
func (m *testMember) memberID() uint64 {
	return uint64(m.etcd.Server.MemberID())
}

// newClient creates a Client for endpoints, closed when the test ends.
func newClient(t *testing.T, endpoints ...string) Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := New(ctx, Config{Endpoints: endpoints, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("New(%v): %v", endpoints, err)
	}
	t.Cleanup(func() {
		if err := cli.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return cli
}

// callCtx returns a context for one call against a live cluster.
func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// retryUnhealthy is for poll.Eventually: it keeps polling while etcd's strict
// reconfig check refuses, and stops polling on any other outcome, storing
// that outcome in *out.
func retryUnhealthy(out *error, f func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		err := f(ctx)
		if errors.Is(err, ErrUnhealthyCluster) {
			return err
		}
		*out = err
		return nil
	}
}

func mustURL(t *testing.T, s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("parse URL %q: %v", s, err)
	}
	return *u
}
