package linearizability

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

const (
	// runFor is how long the clients of TestEtcdHistoryAcrossLeaderRestart write at least.
	runFor = 5 * time.Second
	// phaseOps is how many operations the clients must record in each phase of that test (before
	// the stop, while a member is down, after its restart) before the next begins.
	phaseOps = 60
	// etcdCheckTimeout bounds the check of the recorded history.
	etcdCheckTimeout = 30 * time.Second
)

// TestEtcdHistoryAcrossLeaderRestart: 4 clients put, read and CAS 5 keys of a real 3-member etcd
// cluster while its leader is stopped and, once the two others have carried on, started again from
// its data; then each key is read through each member. The recorded history (more than 100
// operations, some of unknown outcome when requests were cut) is linearizable, and every member
// finally reads the same values.
func TestEtcdHistoryAcrossLeaderRestart(t *testing.T) {
	members := testenv.StartEtcd(t, []string{"lin-0", "lin-1", "lin-2"}, []string{"127.0.0.200", "127.0.0.201", "127.0.0.202"})
	var endpoints []string
	for _, m := range members {
		endpoints = append(endpoints, m.ClientURL())
	}
	rec := NewRecorder()
	ctx, stopClients := context.WithCancel(t.Context())
	defer stopClients()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- RunClients(ctx, endpoints, nil, 4, 5, 1, rec) }()

	waitForOps(t, rec, phaseOps, "before the stop")
	leader := leaderOf(t, members)
	cfg := leader.Etcd.Config()
	crash(leader)
	t.Logf("crashed the leader %s after %d operations", leader.Name, rec.Len())
	waitForOps(t, rec, rec.Len()+phaseOps, "with the leader stopped")

	restarted, err := embed.StartEtcd(&cfg)
	if err != nil {
		t.Fatalf("restart %s from its data: %v", leader.Name, err)
	}
	t.Cleanup(restarted.Close)
	waitReady(t, restarted)
	t.Logf("restarted %s after %d operations", leader.Name, rec.Len())
	waitForOps(t, rec, rec.Len()+phaseOps, "after the restart")

	// The clients write for runFor at least: a bound on the run, not a wait for a condition.
	select {
	case <-time.After(time.Until(start.Add(runFor))):
	case <-t.Context().Done():
	}
	stopClients()
	if err := <-done; err != nil {
		t.Fatalf("RunClients: %v", err)
	}
	ran := time.Since(start)

	finalReadsAgree(t, rec, endpoints, 5)

	ops := rec.Operations()
	res, err := Check(ops, etcdCheckTimeout, WithVisualization(filepath.Join(t.ArtifactDir(), "history.html")))
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	t.Logf("clients ran %s; %s", ran.Round(time.Millisecond), res)
	if res.Verdict != porcupine.Ok {
		t.Fatalf("the history is not linearizable: %s", res)
	}
	if res.Operations <= 100 || res.Keys != 5 {
		t.Fatalf("history too small to mean anything: %s", res)
	}

	// The checker has teeth on this history: one read made to return a value never written is caught.
	read := -1
	for i, op := range ops {
		if op.Input.(Input).Kind == Get {
			read = i
		}
	}
	mutated := slices.Clone(ops)
	mutated[read].Output = Output{Value: neverWritten}
	res, err = Check(mutated, etcdCheckTimeout)
	if err != nil || res.Verdict != porcupine.Illegal {
		t.Fatalf("the history with read %d returning %q: %s, %v; want Illegal", read, neverWritten, res, err)
	}
}

// waitForOps waits up to 30 s until rec has at least n operations.
func waitForOps(t *testing.T, rec *Recorder, n int, phase string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%d operations recorded %s", n, phase), func(context.Context) error {
		if got := rec.Len(); got < n {
			return fmt.Errorf("%d recorded", got)
		}
		return nil
	})
}

// leaderOf returns the member the others follow, once they agree on one.
func leaderOf(t *testing.T, members []*testenv.EtcdMember) *testenv.EtcdMember {
	t.Helper()
	var leader *testenv.EtcdMember
	testutil.Eventually(t, 30*time.Second, "a leader all members follow", func(context.Context) error {
		leader = nil
		lead := members[0].Etcd.Server.Leader()
		for _, m := range members {
			if m.Etcd.Server.Leader() != lead {
				return fmt.Errorf("%s follows %s, %s follows %s", members[0].Name, lead, m.Name, m.Etcd.Server.Leader())
			}
			if m.Etcd.Server.MemberID() == lead {
				leader = m
			}
		}
		if leader == nil {
			return fmt.Errorf("no member is the leader %s", lead)
		}
		return nil
	})
	return leader
}

// crash stops m's raft server at once, without handing its leadership over or finishing the requests
// it serves, as a crash would; then it closes its listeners, so that it can be started again on the
// same addresses.
func crash(m *testenv.EtcdMember) {
	m.Etcd.Server.HardStop()
	m.Stop()
}

// waitReady waits up to 30 s until the restarted member serves.
func waitReady(t *testing.T, e *embed.Etcd) {
	t.Helper()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("restarted member failed: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("restarted member not ready within 30s")
	}
}

// finalReadsAgree reads each of the keys Key(0) to Key(keys-1) through each endpoint alone, recording
// the reads in rec, and fails the test unless every endpoint reads the same value of each key.
func finalReadsAgree(t *testing.T, rec *Recorder, endpoints []string, keys int) {
	t.Helper()
	want := map[string]string{}
	for _, ep := range endpoints {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: RequestTimeout, Logger: zap.NewNop()})
		if err != nil {
			t.Fatalf("client of %s: %v", ep, err)
		}
		for i := range keys {
			key := Key(i)
			var got string
			testutil.Eventually(t, 30*time.Second, "read "+key+" through "+ep, func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
				defer cancel()
				got, err = rec.Get(ctx, cli, key)
				return err
			})
			if v, ok := want[key]; ok && v != got {
				t.Errorf("%s reads %s = %q, an earlier endpoint %q", ep, key, got, v)
			}
			want[key] = got
		}
		_ = cli.Close()
	}
}
