package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// etcdVersion is the server version the module pins (go.etcd.io/etcd/server/v3).
const etcdVersion = "3.6.16"

func TestNewRejectsNoEndpoints(t *testing.T) {
	if _, err := New(context.Background(), Config{}); err == nil {
		t.Fatal("New with no endpoints: want error")
	}
}

func TestNewHonoursCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New(ctx, Config{Endpoints: []string{"http://127.0.0.1:1"}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("New with canceled ctx: got %v, want context.Canceled", err)
	}
}

// TestUnreachableEndpoint checks that calls against an endpoint nobody
// serves return at the caller's deadline instead of hanging: one endpoint
// refuses connections, the other accepts TCP but never speaks HTTP/2.
func TestUnreachableEndpoint(t *testing.T) {
	t.Parallel()
	refused := fmt.Sprintf("http://127.0.0.1:%d", testutil.FreePort(t))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // hold it open, say nothing
		}
	}()
	silent := "http://" + ln.Addr().String()

	cli := newClient(t, refused, silent)
	const deadline = 500 * time.Millisecond
	const slack = 2 * time.Second
	calls := map[string]func(ctx context.Context, ep string) error{
		"Status": func(ctx context.Context, ep string) error { _, err := cli.Status(ctx, ep); return err },
		"Health": cli.Health,
	}
	for _, ep := range []string{refused, silent} {
		for name, call := range calls {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			start := time.Now()
			err := call(ctx, ep)
			took := time.Since(start)
			cancel()
			if err == nil {
				t.Errorf("%s(%s): want error", name, ep)
			}
			if took > deadline+slack {
				t.Errorf("%s(%s) took %v, want at most %v", name, ep, took, deadline+slack)
			}
			t.Logf("%s(%s) after %v: %v", name, ep, took.Round(time.Millisecond), err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	if _, _, err := cli.MemberList(ctx); err == nil {
		t.Error("MemberList: want error")
	}
	if err := cli.MoveLeader(ctx, 1); err == nil {
		t.Error("MoveLeader: want error")
	}
	if took := time.Since(start); took > deadline+slack {
		t.Errorf("MemberList+MoveLeader took %v, want at most %v", took, deadline+slack)
	}
}

func TestMemberList(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)

	var clusterIDs []uint64
	for _, m := range c.members {
		cli := newClient(t, m.clientURL)
		cid, members, err := cli.MemberList(callCtx(t))
		if err != nil {
			t.Fatalf("MemberList via %s: %v", m.clientURL, err)
		}
		clusterIDs = append(clusterIDs, cid)
		if len(members) != 3 {
			t.Fatalf("MemberList via %s: %d members, want 3: %+v", m.clientURL, len(members), members)
		}
		for _, want := range c.members {
			i := slices.IndexFunc(members, func(got Member) bool { return got.Name == want.name })
			if i < 0 {
				t.Fatalf("MemberList via %s: no member named %s in %+v", m.clientURL, want.name, members)
			}
			got := members[i]
			if got.ID != want.memberID() {
				t.Errorf("member %s: ID %s, want %s", want.name, FormatID(got.ID), FormatID(want.memberID()))
			}
			if !slices.Equal(got.PeerURLs, []string{want.peerURL}) {
				t.Errorf("member %s: peer URLs %v, want [%s]", want.name, got.PeerURLs, want.peerURL)
			}
			if !slices.Equal(got.ClientURLs, []string{want.clientURL}) {
				t.Errorf("member %s: client URLs %v, want [%s]", want.name, got.ClientURLs, want.clientURL)
			}
			if got.IsLearner {
				t.Errorf("member %s: IsLearner, want voter", want.name)
			}
		}
	}
	if clusterIDs[0] == 0 {
		t.Errorf("cluster ID is 0")
	}
	for i, cid := range clusterIDs {
		if cid != clusterIDs[0] {
			t.Errorf("cluster ID via %s is %s, via %s it is %s", c.members[i].clientURL, FormatID(cid), c.members[0].clientURL, FormatID(clusterIDs[0]))
		}
	}
}

func TestStatusAndHealth(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	cli := newClient(t, c.endpoints()...)

	var leaders []uint64
	for _, m := range c.members {
		st, err := cli.Status(callCtx(t), m.clientURL)
		if err != nil {
			t.Fatalf("Status(%s): %v", m.clientURL, err)
		}
		if st.Endpoint != m.clientURL || st.MemberID != m.memberID() {
			t.Errorf("Status(%s): endpoint %s member %s, want member %s", m.clientURL, st.Endpoint, FormatID(st.MemberID), FormatID(m.memberID()))
		}
		if st.Version != etcdVersion {
			t.Errorf("Status(%s): version %q, want %q", m.clientURL, st.Version, etcdVersion)
		}
		if st.DBSizeBytes <= 0 || st.DBSizeInUseBytes <= 0 || st.DBSizeInUseBytes > st.DBSizeBytes {
			t.Errorf("Status(%s): db size %d in use %d, want 0 < in use <= size", m.clientURL, st.DBSizeBytes, st.DBSizeInUseBytes)
		}
		if st.RaftTerm == 0 || st.RaftIndex == 0 || st.IsLearner || len(st.Errors) != 0 {
			t.Errorf("Status(%s): unexpected %+v", m.clientURL, st)
		}
		leaders = append(leaders, st.Leader)
	}
	if leaders[0] == 0 || slices.Index(c.memberIDs(), leaders[0]) < 0 {
		t.Fatalf("leader %s is not a member", FormatID(leaders[0]))
	}
	for i, l := range leaders {
		if l != leaders[0] {
			t.Errorf("%s reports leader %s, %s reports %s", c.members[i].name, FormatID(l), c.members[0].name, FormatID(leaders[0]))
		}
	}

	for _, m := range c.members {
		if err := cli.Health(callCtx(t), m.clientURL); err != nil {
			t.Errorf("Health(%s): %v", m.clientURL, err)
		}
	}

	// Stop a follower; its endpoint must fail within the deadline while
	// the rest stays healthy.
	stopped := c.members[slices.IndexFunc(c.members, func(m *testMember) bool { return m.memberID() != leaders[0] })]
	stopped.stop()
	const deadline = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	err := cli.Health(ctx, stopped.clientURL)
	took := time.Since(start)
	if err == nil {
		t.Fatalf("Health(%s) of stopped member: want error", stopped.clientURL)
	}
	if took > deadline+2*time.Second {
		t.Errorf("Health(%s) of stopped member took %v", stopped.clientURL, took)
	}
	t.Logf("Health of stopped member after %v: %v", took.Round(time.Millisecond), err)

	for _, m := range c.members {
		if m == stopped {
			continue
		}
		if err := cli.Health(callCtx(t), m.clientURL); err != nil {
			t.Errorf("Health(%s) with one member down: %v", m.clientURL, err)
		}
	}
}

func TestMoveLeader(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	cli := newClient(t, c.endpoints()...)

	st, err := cli.Status(callCtx(t), c.members[0].clientURL)
	if err != nil {
		t.Fatal(err)
	}
	oldLeader := st.Leader
	if err := cli.MoveLeader(callCtx(t), oldLeader); err != nil {
		t.Fatalf("MoveLeader to the current leader: %v", err)
	}

	var target uint64
	for _, id := range c.memberIDs() {
		if id != oldLeader {
			target = id
			break
		}
	}
	if err := cli.MoveLeader(callCtx(t), target); err != nil {
		t.Fatalf("MoveLeader(%s): %v", FormatID(target), err)
	}
	poll.Eventually(t, 10*time.Second, "all members see the new leader", func(ctx context.Context) error {
		for _, m := range c.members {
			st, err := cli.Status(ctx, m.clientURL)
			if err != nil {
				return err
			}
			if st.Leader != target {
				return fmt.Errorf("%s sees leader %s, want %s", m.name, FormatID(st.Leader), FormatID(target))
			}
		}
		return nil
	})
}

// TestMembership walks a learner through its life on one cluster: add,
// replayed add, promotion refused while it is not running, promotion once
// it has synced, removal, replayed removal.
func TestMembership(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	cli := newClient(t, c.endpoints()...)
	learner := newTestMember(t, "learner")

	var (
		added   Member
		members []Member
		addErr  error
	)
	// A fresh cluster refuses reconfiguration until its peers have been
	// connected for etcd's 5 s health interval.
	poll.Eventually(t, reconfigTimeout, "AddLearner", retryUnhealthy(&addErr, func(ctx context.Context) error {
		var err error
		added, members, err = cli.AddLearner(ctx, learner.peerURL)
		return err
	}))
	if addErr != nil {
		t.Fatalf("AddLearner(%s): %v", learner.peerURL, addErr)
	}
	if added.ID == 0 || !added.IsLearner || !slices.Equal(added.PeerURLs, []string{learner.peerURL}) {
		t.Fatalf("AddLearner returned %+v", added)
	}
	if len(members) != 4 {
		t.Fatalf("AddLearner returned %d members, want 4", len(members))
	}

	t.Run("AddLearner", func(t *testing.T) {
		_, got, err := cli.MemberList(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(got, func(m Member) bool { return m.ID == added.ID })
		if len(got) != 4 || i < 0 {
			t.Fatalf("member list %+v: want 4 members including %s", got, FormatID(added.ID))
		}
		if m := got[i]; !m.IsLearner || m.Name != "" || !slices.Equal(m.PeerURLs, []string{learner.peerURL}) || len(m.ClientURLs) != 0 {
			t.Errorf("unstarted learner listed as %+v", m)
		}
	})

	t.Run("AddLearnerReplayed", func(t *testing.T) {
		again, got, err := cli.AddLearner(callCtx(t), learner.peerURL)
		if err != nil {
			t.Fatalf("second AddLearner: %v", err)
		}
		if again.ID != added.ID {
			t.Errorf("second AddLearner returned %s, want %s", FormatID(again.ID), FormatID(added.ID))
		}
		_, listed, err := cli.MemberList(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 4 || len(listed) != 4 {
			t.Errorf("after second AddLearner: returned %d, listed %d members, want 4", len(got), len(listed))
		}
	})

	t.Run("PromoteNotReady", func(t *testing.T) {
		err := cli.PromoteLearner(callCtx(t), added.ID)
		if !errors.Is(err, ErrLearnerNotReady) {
			t.Fatalf("PromoteLearner of unstarted learner: got %v, want ErrLearnerNotReady", err)
		}
		t.Logf("PromoteLearner of unstarted learner: %v", err)
	})

	t.Run("PromoteUnknown", func(t *testing.T) {
		if err := cli.PromoteLearner(callCtx(t), 0x1234); !errors.Is(err, ErrMemberNotFound) {
			t.Fatalf("PromoteLearner of unknown ID: got %v, want ErrMemberNotFound", err)
		}
	})

	t.Run("Promote", func(t *testing.T) {
		c.startJoining(learner, members)
		st, err := cli.Status(callCtx(t), learner.clientURL)
		if err != nil {
			t.Fatal(err)
		}
		if !st.IsLearner || st.MemberID != added.ID {
			t.Errorf("Status of started learner: %+v, want learner %s", st, FormatID(added.ID))
		}
		if err := cli.Health(callCtx(t), learner.clientURL); !errors.Is(err, ErrIsLearner) {
			t.Errorf("Health of learner: got %v, want ErrIsLearner", err)
		}

		poll.Eventually(t, 15*time.Second, "PromoteLearner", func(ctx context.Context) error {
			return cli.PromoteLearner(ctx, added.ID)
		})
		_, got, err := cli.MemberList(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(got, func(m Member) bool { return m.ID == added.ID })
		if i < 0 || got[i].IsLearner || got[i].Name != learner.name || !slices.Equal(got[i].ClientURLs, []string{learner.clientURL}) {
			t.Fatalf("after promotion member list is %+v", got)
		}
		if err := cli.PromoteLearner(callCtx(t), added.ID); err != nil {
			t.Errorf("PromoteLearner of a voter: %v, want nil", err)
		}
		poll.Eventually(t, 10*time.Second, "promoted member healthy", func(ctx context.Context) error {
			return cli.Health(ctx, learner.clientURL)
		})
	})

	t.Run("RemoveMember", func(t *testing.T) {
		victim := c.members[1]
		id := victim.memberID()
		var removeErr error
		poll.Eventually(t, reconfigTimeout, "RemoveMember", retryUnhealthy(&removeErr, func(ctx context.Context) error {
			return cli.RemoveMember(ctx, id)
		}))
		if removeErr != nil {
			t.Fatalf("RemoveMember(%s): %v", FormatID(id), removeErr)
		}
		_, got, err := cli.MemberList(callCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || slices.ContainsFunc(got, func(m Member) bool { return m.ID == id }) {
			t.Fatalf("after removing %s member list is %+v", FormatID(id), got)
		}
		if err := cli.RemoveMember(callCtx(t), id); err != nil {
			t.Errorf("removing %s again: %v, want nil", FormatID(id), err)
		}
	})
}

// memberIDs returns the raft IDs of all members.
func (c *testCluster) memberIDs() []uint64 {
	var ids []uint64
	for _, m := range c.members {
		ids = append(ids, m.memberID())
	}
	return ids
}

// TestHealthNoSpace: a member whose only alarm is NOSPACE is unhealthy with both ErrAlarm and
// ErrNoSpace; a CORRUPT alarm is ErrAlarm and ErrCorrupt without ErrNoSpace, and Alarms lists it;
// DisarmNoSpace and DisarmCorrupt clear them (twice is fine) and the member is healthy again.
func TestHealthNoSpace(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1)
	m := c.members[0]
	cli := newClient(t, c.endpoints()...)
	activate := func(alarm pb.AlarmType) {
		t.Helper()
		m.mu.Lock()
		srv := m.etcd.Server
		m.mu.Unlock()
		if _, err := srv.Alarm(callCtx(t), &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: m.memberID(), Alarm: alarm}); err != nil {
			t.Fatalf("activate %s: %v", alarm, err)
		}
	}
	activate(pb.AlarmType_NOSPACE)
	err := cli.Health(callCtx(t), m.clientURL)
	if !errors.Is(err, ErrAlarm) || !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Health with NOSPACE = %v, want ErrAlarm and ErrNoSpace", err)
	}
	for range 2 {
		if err := cli.DisarmNoSpace(callCtx(t), m.memberID()); err != nil {
			t.Fatalf("DisarmNoSpace: %v", err)
		}
	}
	if err := cli.Health(callCtx(t), m.clientURL); err != nil {
		t.Fatalf("Health after DisarmNoSpace: %v", err)
	}
	activate(pb.AlarmType_CORRUPT)
	err = cli.Health(callCtx(t), m.clientURL)
	if !errors.Is(err, ErrAlarm) || !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNoSpace) {
		t.Fatalf("Health with CORRUPT = %v, want ErrAlarm and ErrCorrupt without ErrNoSpace", err)
	}
	alarms, err := cli.Alarms(callCtx(t))
	if err != nil || len(alarms) != 1 || alarms[0] != (Alarm{MemberID: m.memberID(), Type: "CORRUPT"}) {
		t.Fatalf("Alarms = %+v, %v; want the CORRUPT alarm of member %s", alarms, err, FormatID(m.memberID()))
	}
	for range 2 {
		if err := cli.DisarmCorrupt(callCtx(t), m.memberID()); err != nil {
			t.Fatalf("DisarmCorrupt: %v", err)
		}
	}
	if err := cli.Health(callCtx(t), m.clientURL); err != nil {
		t.Fatalf("Health after DisarmCorrupt: %v", err)
	}
	if alarms, err := cli.Alarms(callCtx(t)); err != nil || len(alarms) != 0 {
		t.Fatalf("Alarms after DisarmCorrupt = %+v, %v; want none", alarms, err)
	}
}
