package probe

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// drain returns the names of the pods of the events waiting on p.
func drain(p *Prober) map[string]bool {
	got := map[string]bool{}
	for {
		select {
		case e := <-p.events:
			got[e.Object.GetName()] = true
		default:
			return got
		}
	}
}

// TestRoundReportsChanges: on a real 3-member cluster, rounds over steady members send nothing; once a
// member stops, the next round sends an event for its pod; a member that is gone from the targets is
// forgotten with its connection.
func TestRoundReportsChanges(t *testing.T) {
	names, hosts := []string{"p-0", "p-1", "p-2"}, []string{"127.0.0.241", "127.0.0.242", "127.0.0.243"}
	members := testenv.StartEtcd(t, names, hosts)
	targets := make([]Target, len(names))
	for i := range names {
		targets[i] = Target{Endpoint: net.JoinHostPort(hosts[i], strconv.Itoa(resources.ClientPort)),
			Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}}
	}
	p := New(func(context.Context) ([]Target, error) { return targets, nil })
	t.Cleanup(p.closeAll)
	ctx := context.Background()

	// the first round learns the answers; steady members send nothing after it (a leader elected just
	// after the start may still change the first answers, so wait for two quiet rounds in a row)
	p.Round(ctx)
	testutil.Eventually(t, 10*time.Second, "steady members send no events", func(context.Context) error {
		drain(p)
		p.Round(ctx)
		p.Round(ctx)
		if got := drain(p); len(got) > 0 {
			return fmt.Errorf("events %v from steady members", got)
		}
		return nil
	})
	for ep, a := range p.last {
		if !a.answered || a.leader == 0 || a.member == 0 {
			t.Fatalf("member at %s: %+v, want an answer with a leader", ep, a)
		}
	}

	members[2].Stop()
	p.Round(ctx)
	if got := drain(p); !got["p-2"] {
		t.Fatalf("events %v after p-2 stopped, want one for p-2", got)
	}
	if a := p.last[targets[2].Endpoint]; a.answered {
		t.Fatalf("p-2 stopped but counts as answering: %+v", a)
	}

	targets = targets[:2]
	p.Round(ctx)
	if _, ok := p.conns[net.JoinHostPort(hosts[2], strconv.Itoa(resources.ClientPort))]; ok || len(p.last) != 2 {
		t.Fatalf("a member no longer targeted is still watched: %d answers, connections %v", len(p.last), p.conns)
	}
}

// TestRoundWakesUnreachedHealthyMember: a member its cluster's status records healthy that does not
// answer sends an event even in the first round that sees it (a member frozen moments after its pod
// was recreated never answered the prober), once: not again while it stays so, nor when the status
// records it down; again once the status records it healthy anew.
func TestRoundWakesUnreachedHealthyMember(t *testing.T) {
	tg := Target{Endpoint: net.JoinHostPort("127.0.0.244", strconv.Itoa(resources.ClientPort)), // nothing listens
		Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "u-0"}}, Healthy: true}
	p := New(func(context.Context) ([]Target, error) { return []Target{tg}, nil })
	t.Cleanup(p.closeAll)
	ctx := context.Background()
	for i, step := range []struct {
		healthy, event bool
	}{
		{true, true},   // first round: recorded healthy, does not answer
		{true, false},  // no change
		{false, false}, // the status records it down: agrees with the prober
		{false, false},
		{true, true}, // recorded healthy again (a pass saw it answer), and it does not answer
	} {
		tg.Healthy = step.healthy
		p.Round(ctx)
		if got := drain(p)["u-0"]; got != step.event {
			t.Fatalf("round %d (recorded healthy %v): event %v, want %v", i+1, step.healthy, got, step.event)
		}
	}
}
