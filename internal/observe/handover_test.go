package observe

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestHealthThroughLeaderHandover: leadership moves from member to member (as when the leader's pod is
// deleted: etcd hands leadership over before it stops) while passes observe the cluster back to back.
// Every member keeps answering, so every pass must find all three healthy and a leader they agree on: a
// member the status recorded healthy that answers "no leader" or "leader changed" during the handover
// is asked again, not reported down, and its status read again once it has a leader (either made the
// cluster's Available condition say QuorumLost for a moment on deletions of a leader's pod).
func TestHealthThroughLeaderHandover(t *testing.T) {
	names := []string{"lh-0", "lh-1", "lh-2"}
	hosts := []string{"127.0.0.181", "127.0.0.182", "127.0.0.183"}
	members := testenv.StartEtcd(t, names, hosts)
	c := testutil.EtcdCluster("lh", testutil.WithReplicas(3))
	var pods []corev1.Pod
	for i, n := range names {
		pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: hosts[i]}})
		// as the last pass recorded them: healthy voters
		c.Status.Members = append(c.Status.Members, etcdv1beta1.MemberStatus{Name: n, ID: etcd.FormatID(uint64(members[i].Etcd.Server.MemberID())),
			Role: etcdv1beta1.RoleVoter, Healthy: true})
	}
	m := model.Build(model.Input{Cluster: c, Pods: pods})

	const handovers = 10
	// passes back to back, while leadership moves
	var passes atomic.Int64
	stop := make(chan struct{})
	observed := make(chan struct{})
	go func() {
		defer close(observed)
		for {
			select {
			case <-stop:
				return
			default:
			}
			obs, cli, err := Etcd(context.Background(), etcd.New, m, resources.Options{}, 3*time.Second, etcd.Config{})
			if cli != nil {
				_ = cli.Close()
			}
			n := passes.Add(1)
			if err != nil {
				t.Errorf("pass %d: %v", n, err)
				continue
			}
			for _, mem := range members {
				if herr := obs.Health[uint64(mem.Etcd.Server.MemberID())]; herr != nil {
					t.Errorf("pass %d: %s reported down: %v", n, mem.Name, herr)
				}
			}
			// the cluster is Available only with a leader its members agree on (verdict.JudgeHealth)
			if obs.Leader == 0 {
				t.Errorf("pass %d: no agreed leader; statuses %+v", n, obs.Status)
			}
		}
	}()
	defer func() { close(stop); <-observed }()
	for i := range handovers {
		leader := -1
		for j, mem := range members {
			if mem.Etcd.Server.Leader() == mem.Etcd.Server.MemberID() {
				leader = j
			}
		}
		if leader < 0 {
			t.Fatalf("handover %d: no member leads", i)
		}
		next := members[(leader+1)%len(members)]
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{members[leader].ClientURL()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = cli.MoveLeader(ctx, uint64(next.Etcd.Server.MemberID()))
		cancel()
		_ = cli.Close()
		if err != nil {
			t.Fatalf("handover %d: move leadership to %s: %v", i, next.Name, err)
		}
		if err := allFollow(members, next, 5*time.Second); err != nil {
			t.Fatalf("handover %d: %v", i, err)
		}
		// the next handover waits until a whole pass ran after this one: passes see one at a time
		after := passes.Load() + 2
		testutil.Eventually(t, 10*time.Second, "a whole pass after the handover", func(context.Context) error {
			if n := passes.Load(); n < after {
				return fmt.Errorf("%d passes, waiting for %d", n, after)
			}
			return nil
		})
	}
	t.Logf("%d passes during %d handovers", passes.Load(), handovers)
}

// allFollow waits, polling, until every member follows leader, at most within.
func allFollow(members []*testenv.EtcdMember, leader *testenv.EtcdMember, within time.Duration) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(within)
	for {
		var behind []string
		for _, mem := range members {
			if mem.Etcd.Server.Leader() != leader.Etcd.Server.MemberID() {
				behind = append(behind, mem.Name)
			}
		}
		if len(behind) == 0 {
			return nil
		}
		select {
		case <-tick.C:
		case <-deadline:
			return fmt.Errorf("%v do not follow %s within %s", behind, leader.Name, within)
		}
	}
}
