package etcd

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestMemberAddRefusedByAYoungMember: etcd checks a member add against how long the member that takes
// the call has been connected to its peers (5 s, etcdserver.HealthInterval). A member that has just
// joined and been promoted refuses the next add (ErrUnhealthyCluster), while the leader takes it at
// once: why the operator sends member adds and removals to the leader alone.
func TestMemberAddRefusedByAYoungMember(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := context.Background()
	all := newClient(t, c.endpoints()...)
	m3 := newTestMember(t, "m3")
	var members []Member
	// a cluster just started refuses too, until its members have been connected for 5 s
	poll.Eventually(t, 30*time.Second, "m3 added", func(ctx context.Context) (err error) {
		_, members, err = all.AddLearner(ctx, m3.peerURL)
		return err
	})
	started := time.Now()
	c.startJoining(m3, members)
	poll.Eventually(t, 30*time.Second, "m3 promoted", func(ctx context.Context) error { return all.PromoteLearner(ctx, m3.memberID()) })
	poll.Eventually(t, 10*time.Second, "m3 applied its promotion", func(context.Context) error {
		if m3.etcd.Server.IsLearner() {
			return errors.New("m3 is a learner still")
		}
		return nil
	})

	m4 := newTestMember(t, "m4")
	_, _, err := newClient(t, m3.clientURL).AddLearner(ctx, m4.peerURL)
	switch young := time.Since(started); {
	case young < 4*time.Second && !errors.Is(err, ErrUnhealthyCluster):
		t.Errorf("a member add through m3, %.1f s after it was added: %v; want ErrUnhealthyCluster", young.Seconds(), err)
	case young >= 4*time.Second:
		t.Logf("m3 took %.1f s to join and be promoted: too long to see its refusal", young.Seconds())
	}
	var leader *testMember
	for _, m := range c.members {
		if m.etcd.Server.Leader() == m.etcd.Server.MemberID() {
			leader = m
		}
	}
	if leader == nil || leader == m3 {
		t.Fatalf("no leader among the first three members (%v)", leader)
	}
	if _, _, err := newClient(t, leader.clientURL).AddLearner(ctx, m4.peerURL); err != nil {
		t.Errorf("a member add through the leader, right after m3's promotion: %v; want it taken", err)
	}
}
