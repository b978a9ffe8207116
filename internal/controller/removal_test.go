package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// stoppedLeader is the client of a leader that removes itself: it makes the removal (when remove is
// set), then answers as etcd's leader may once it has applied it, and cannot list the members.
type stoppedLeader struct {
	etcd.Client
	remove bool
}

var errServerStopped = errors.New("etcdserver: server stopped")

func (l stoppedLeader) RemoveMember(ctx context.Context, id uint64) error {
	if l.remove {
		if err := l.Client.RemoveMember(ctx, id); err != nil {
			return err
		}
	}
	return errServerStopped
}

func (l stoppedLeader) MemberList(context.Context) (uint64, []etcd.Member, error) {
	return 0, nil, errServerStopped
}

// TestRemovalThatFailedButWasMade: a removal through the leader alone that etcd made although the
// call failed (the leader removing itself answers "etcdserver: server stopped") counts as made, by the
// member list of the other members, so that its MemberRemoved event is written and the pass goes on;
// one that etcd did not make stays an error. Real etcd members.
func TestRemovalThatFailedButWasMade(t *testing.T) {
	members := testenv.StartEtcd(t, []string{"rm-0", "rm-1", "rm-2"}, []string{"127.0.0.131", "127.0.0.132", "127.0.0.133"})
	ctx := context.Background()
	var urls []string
	for _, m := range members {
		urls = append(urls, m.ClientURL())
	}
	all, err := etcd.New(ctx, etcd.Config{Endpoints: urls})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = all.Close() })
	_, list, err := all.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	idOf := func(name string) uint64 {
		for _, m := range list {
			if m.Name == name {
				return m.ID
			}
		}
		t.Fatalf("no member %s in %+v", name, list)
		return 0
	}
	r := &EtcdClusterReconciler{}
	s := &scope{cluster: testutil.EtcdCluster("rm"), etcdClient: all}
	remove := func(name string, leader etcd.Client) (bool, error) {
		_, removed, err := r.removeMember(ctx, s, leader, membership.Action{Kind: membership.Remove, Member: name, ID: idOf(name), Reason: "test", Replacing: true})
		return removed, err
	}

	// the call fails and etcd did not remove the member: an error, not a removal
	if removed, err := remove("rm-2", stoppedLeader{Client: all}); removed || !errors.Is(err, errServerStopped) {
		t.Errorf("removal not made: removed %v, error %v; want not removed, the call's error", removed, err)
	}
	// the call fails and etcd removed the member: a removal (etcd refuses any removal until its members
	// have been connected for 5 s: a step to retry, no error)
	testutil.Eventually(t, 30*time.Second, "the removal made counted", func(context.Context) error {
		switch removed, err := remove("rm-2", stoppedLeader{Client: all, remove: true}); {
		case err != nil:
			t.Fatalf("removal made, call failed: %v; want it counted as made", err)
		case !removed:
			return errors.New("not removed yet")
		}
		return nil
	})
	_, after, err := all.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 2 {
		t.Errorf("members after the removal: %+v, want 2", after)
	}
}
