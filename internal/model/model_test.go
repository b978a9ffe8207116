package model

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"pgregory.net/rapid"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

func pod(name string, deleting bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: testutil.PlainTextMemberSpec()}
	if deleting {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

func claim(member string, annotations map[string]string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName(member), Annotations: annotations}}
}

// TestBuildJoinsByName: a member's pod, claim and etcd member land on one Member; objects that are not
// a member's are left out; claims of an earlier cluster of the same name are foreign.
func TestBuildJoinsByName(t *testing.T) {
	c := testutil.EtcdCluster("d")
	c.UID = types.UID("uid-now")
	opts := resources.Options{}
	e := &Etcd{ClusterID: 7, Leader: 1,
		Members: []etcd.Member{
			{ID: 1, Name: "d-0", PeerURLs: []string{opts.PeerURL(c, "d-0")}},
			// a learner that has not started: named from its peer URL
			{ID: 3, PeerURLs: []string{opts.PeerURL(c, "d-2")}, IsLearner: true},
			// a member nobody can name
			{ID: 0xff, PeerURLs: []string{"http://elsewhere:2380"}},
		},
		Status: map[uint64]etcd.EndpointStatus{1: {Version: "3.6.16"}},
		Health: map[uint64]error{1: nil, 3: errors.New("timeout")},
	}
	m := Build(Input{Cluster: c, Options: opts, Etcd: e,
		Pods: []corev1.Pod{pod("d-0", false), pod("d-2", true), pod("d-backup-x", false), pod("other-0", false)},
		Claims: []corev1.PersistentVolumeClaim{claim("d-0", nil), claim("d-1", nil),
			claim("d-5", map[string]string{etcdv1beta1.AnnotationClusterUID: "uid-before"})},
	})
	var names []string
	for _, mem := range m.Members {
		names = append(names, mem.Name)
	}
	if got, want := fmt.Sprint(names), "[00000000000000ff d-0 d-1 d-2]"; got != want {
		t.Fatalf("members %s, want %s", got, want)
	}
	d0, d1, d2, ff := m.Member("d-0"), m.Member("d-1"), m.Member("d-2"), m.Member(etcd.FormatID(0xff))
	switch {
	case d0.Pod == nil || d0.Claim == nil || d0.ID() != 1 || !d0.Healthy() || d0.Status == nil || !d0.Voter() || !d0.Started():
		t.Errorf("d-0 not joined: %+v", d0)
	case d1.Pod != nil || d1.Claim == nil || d1.Listed() || d1.Voter():
		t.Errorf("d-1 has only a claim: %+v", d1)
	case !d2.Learner() || d2.Started() || d2.Healthy() || !d2.PodTerminating() || d2.HasPod():
		t.Errorf("d-2 is a terminating, unstarted learner: %+v", d2)
	case !errors.Is(ff.Health, ErrNotAsked) || ff.Healthy():
		t.Errorf("a member not asked is not healthy: %+v", ff)
	case m.Member("d-5") != nil || fmt.Sprint(m.ForeignClaims) != "[data-d-5]":
		t.Errorf("foreign claims %v", m.ForeignClaims)
	case m.Voters() != 2 || m.HealthyVoters() != 1 || m.Learners() != 1 || m.Quorum() != 2:
		t.Errorf("voters %d healthy %d learners %d quorum %d", m.Voters(), m.HealthyVoters(), m.Learners(), m.Quorum())
	case m.Leader() != d0 || !m.Formed() || len(m.Listed()) != 3 || m.Listed()[1] != d2:
		t.Errorf("leader %v formed %v listed %v", m.Leader(), m.Formed(), m.Listed())
	}
}

// TestBuildWithoutEtcd: when no member answers, the members the status last listed are what the cluster
// has; a voter counts only if etcd listed it (it has an ID).
func TestBuildWithoutEtcd(t *testing.T) {
	c := testutil.EtcdCluster("d")
	c.Status.ClusterID = "abc"
	c.Status.Members = []etcdv1beta1.MemberStatus{
		{Name: "d-0", ID: "1", Role: etcdv1beta1.RoleVoter},
		{Name: "d-1", ID: "2", Role: etcdv1beta1.RoleVoter},
		{Name: "d-2", Role: etcdv1beta1.RoleVoter}, // recorded while etcd did not answer
		{Name: "d-3", ID: "4", Role: etcdv1beta1.RoleLearner},
	}
	m := Build(Input{Cluster: c, Pods: []corev1.Pod{pod("d-0", false)}, EtcdErr: errors.New("down")})
	if m.Answered() || !m.Formed() || m.Voters() != 2 || m.HealthyVoters() != 0 || m.Quorum() != 2 || len(m.Registered()) != 4 || m.Leader() != nil {
		t.Errorf("answered %v formed %v voters %d healthy %d registered %d", m.Answered(), m.Formed(), m.Voters(), m.HealthyVoters(), len(m.Registered()))
	}
	if len(m.Listed()) != 0 {
		t.Errorf("nothing is listed when etcd did not answer")
	}
}

// TestStartedAs: a member restarts with the flags its claim recorded when it was first started.
func TestStartedAs(t *testing.T) {
	m := &Member{Name: "d-3", Claim: &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		etcdv1beta1.AnnotationInitialClusterState: resources.StateExisting,
		etcdv1beta1.AnnotationInitialCluster:      "d-0=http://a:2380,d-3=http://b:2380",
	}}}}
	got := m.StartedAs()
	if got.Name != "d-3" || got.InitialClusterState != resources.StateExisting || got.InitialCluster != "d-0=http://a:2380,d-3=http://b:2380" {
		t.Errorf("StartedAs = %+v", got)
	}
	if got := (&Member{Name: "d-0", Claim: &corev1.PersistentVolumeClaim{}}).StartedAs(); got.InitialClusterState != resources.StateNew {
		t.Errorf("a claim that records nothing started as %q, want new", got.InitialClusterState)
	}
}

// TestModelCounts: for any cluster, the counts agree with each other and with the members: healthy
// voters ≤ serving voters ≤ voters, voters + learners = members etcd lists (a member removed moments
// ago, which the status still records as a voter, is none), a quorum is a strict
// majority, every member is found by name, and the model does not depend on the order of its input.
func TestModelCounts(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := testutil.EtcdCluster("d")
		n := rapid.IntRange(0, 7).Draw(rt, "members")
		e := &Etcd{ClusterID: 1, Status: map[uint64]etcd.EndpointStatus{}, Health: map[uint64]error{}}
		var pods []corev1.Pod
		for i := range n {
			name := resources.MemberName(c, i)
			id := uint64(i + 1)
			e.Members = append(e.Members, etcd.Member{ID: id, Name: name, IsLearner: rapid.Bool().Draw(rt, "learner")})
			switch rapid.IntRange(0, 2).Draw(rt, "health") {
			case 0:
				e.Health[id] = nil
			case 1:
				e.Health[id] = fmt.Errorf("health: %w", etcd.ErrNoSpace)
			default:
				e.Health[id] = errors.New("timeout")
			}
			if rapid.Bool().Draw(rt, "pod") {
				pods = append(pods, pod(name, rapid.Bool().Draw(rt, "deleting")))
			}
			if rapid.Bool().Draw(rt, "recorded") {
				c.Status.Members = append(c.Status.Members, etcdv1beta1.MemberStatus{Name: name, ID: etcd.FormatID(id), Role: etcdv1beta1.RoleVoter})
			}
		}
		// members removed moments ago: the status still records them as voters, and their pods are
		// still there, but etcd lists them no more
		for i := n; i < n+rapid.IntRange(0, 2).Draw(rt, "removed"); i++ {
			name := resources.MemberName(c, i)
			pods = append(pods, pod(name, false))
			c.Status.Members = append(c.Status.Members, etcdv1beta1.MemberStatus{Name: name, ID: etcd.FormatID(uint64(i + 1)), Role: etcdv1beta1.RoleVoter, Healthy: true})
		}
		m := Build(Input{Cluster: c, Etcd: e, Pods: pods})
		if m.HealthyVoters() > m.ServingVoters() || m.ServingVoters() > m.Voters() {
			rt.Fatalf("healthy %d serving %d voters %d", m.HealthyVoters(), m.ServingVoters(), m.Voters())
		}
		if m.Voters()+m.Learners() != len(e.Members) || len(m.Listed()) != len(e.Members) {
			rt.Fatalf("voters %d + learners %d != listed %d", m.Voters(), m.Learners(), len(e.Members))
		}
		if q := m.Quorum(); 2*q <= m.Voters() || 2*(q-1) > m.Voters() {
			rt.Fatalf("quorum %d of %d voters is not the smallest strict majority", q, m.Voters())
		}
		for _, mem := range m.Members {
			if m.Member(mem.Name) != mem {
				rt.Fatalf("member %s not found by name", mem.Name)
			}
		}
		reversed := append([]corev1.Pod(nil), pods...)
		for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
			reversed[i], reversed[j] = reversed[j], reversed[i]
		}
		other := Build(Input{Cluster: c, Etcd: e, Pods: reversed})
		for i, mem := range other.Members {
			if mem.Name != m.Members[i].Name || (mem.Pod == nil) != (m.Members[i].Pod == nil) {
				rt.Fatalf("the order of the pods changed the model at %d", i)
			}
		}
	})
}

// TestJoining: a new member that etcd lists under its name and that does not serve yet is joining for
// JoinGrace after its etcd started, unless it restarted, serves, runs on data that is not new, or was
// not made to join a running cluster (a member of a new cluster that stops answering, as in C06).
func TestJoining(t *testing.T) {
	now := time.Date(2026, 12, 4, 7, 0, 0, 0, time.UTC)
	member := func(started, claimAge time.Duration, restarts int32, health error) *Member {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-3", CreationTimestamp: metav1.NewTime(now.Add(-claimAge))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: resources.EtcdContainer,
				Command: []string{"/usr/local/bin/etcd", "--name=demo-3", "--initial-cluster-state=existing"}}}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: resources.EtcdContainer, RestartCount: restarts,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-started))}}}}}}
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-demo-3", CreationTimestamp: metav1.NewTime(now.Add(-claimAge))}}
		return &Member{Name: "demo-3", Pod: pod, Claim: claim, Etcd: &etcd.Member{ID: 4, Name: "demo-3"}, Health: health}
	}
	down := errors.New("connection refused")
	for _, tc := range []struct {
		name string
		m    *Member
		want bool
	}{
		{"new, started 2 s ago, not serving", member(2*time.Second, 20*time.Second, 0, down), true},
		{"serving", member(2*time.Second, 20*time.Second, 0, nil), false},
		{"started longer than JoinGrace ago", member(JoinGrace+time.Second, 30*time.Second, 0, down), false},
		{"its etcd restarted", member(2*time.Second, 20*time.Second, 1, down), false},
		{"its data is not new: a member that has been there", member(2*time.Second, time.Hour, 0, down), false},
		{"etcd does not list its name: not started", func() *Member { m := member(2*time.Second, 20*time.Second, 0, down); m.Etcd.Name = ""; return m }(), false},
		{"a member of the bootstrap (--initial-cluster-state=new), down moments after it started", func() *Member {
			m := member(2*time.Second, 20*time.Second, 0, down)
			m.Pod.Spec.Containers[0].Command[2] = "--initial-cluster-state=new"
			return m
		}(), false},
		{"no pod", func() *Member { m := member(2*time.Second, 20*time.Second, 0, down); m.Pod = nil; return m }(), false},
		{"etcd lists its name before the kubelet reports its container started", func() *Member {
			m := member(2*time.Second, 20*time.Second, 0, down)
			m.Pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
			m.Pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Second))}}
			return m
		}(), true},
		{"a pod made again, whose etcd image cannot be pulled, under a name an earlier pod published", func() *Member {
			m := member(2*time.Second, 20*time.Second, 0, down)
			m.Pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}
			m.Pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Second))}}
			return m
		}(), false},
		{"a pod made again whose init containers finished longer ago than JoinGrace", func() *Member {
			m := member(2*time.Second, 20*time.Second, 0, down)
			m.Pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
			m.Pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-JoinGrace - time.Second))}}
			return m
		}(), false},
		{"a pod made again whose init containers have not finished (its volume is not attached yet)", func() *Member {
			m := member(2*time.Second, 20*time.Second, 0, down)
			m.Pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
			return m
		}(), false},
		{"its container waits after it ended once", func() *Member {
			m := member(2*time.Second, 20*time.Second, 0, down)
			m.Pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			m.Pod.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1}
			return m
		}(), false},
	} {
		if got := tc.m.Joining(now); got != tc.want {
			t.Errorf("%s: Joining = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestInRaft: a joining voter takes part in raft, and counts for quorum, once its etcd container is
// ready (its readiness probe passed); a learner, a member not joining, or one whose probe has not
// passed does not.
func TestInRaft(t *testing.T) {
	now := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	member := func(ready, learner bool, started time.Duration) *Member {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-0", CreationTimestamp: metav1.NewTime(now.Add(-20 * time.Second))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: resources.EtcdContainer,
				Command: []string{"/usr/local/bin/etcd", "--name=demo-0", "--initial-cluster-state=existing"}}}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: resources.EtcdContainer, Ready: ready,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now.Add(-started))}}}}}}
		return &Member{Name: "demo-0", Pod: pod, Etcd: &etcd.Member{ID: 1, Name: "demo-0", IsLearner: learner},
			Health: errors.New("context deadline exceeded")}
	}
	for _, tc := range []struct {
		name string
		m    *Member
		want bool
	}{
		{"a voter promoted moments ago whose probe passed", member(true, false, 3*time.Second), true},
		{"its probe has not passed yet", member(false, false, 3*time.Second), false},
		{"a learner (its probe fails on non_learner; were it to pass)", member(true, true, 3*time.Second), false},
		{"started longer than JoinGrace ago: no longer joining", member(true, false, JoinGrace+time.Second), false},
		{"it serves: healthy, not joining", func() *Member { m := member(true, false, 3*time.Second); m.Health = nil; return m }(), false},
	} {
		if got := tc.m.InRaft(now); got != tc.want {
			t.Errorf("%s: InRaft = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestFirstLineCutsBetweenWords: a long first line keeps its beginning and its end around "…", each
// cut between words, and a short one is kept whole.
func TestFirstLineCutsBetweenWords(t *testing.T) {
	pull := `failed to pull and unpack image "registry.example:5000/mirror/etcd:v3.6.99": failed to resolve reference "registry.example:5000/mirror/etcd:v3.6.99": failed to do request: Head "https://registry.example:5000/v2/mirror/etcd/manifests/v3.6.99": dial tcp: lookup registry.example: no such host`
	got := firstLine(pull + "\nsecond line")
	head, tail, ok := strings.Cut(got, " … ")
	if !ok || len(got) > 205 {
		t.Fatalf("firstLine = %q (%d bytes), want at most about 200 bytes around \" … \"", got, len(got))
	}
	if !strings.HasPrefix(pull, head) || !strings.HasPrefix(pull[len(head):], " ") {
		t.Errorf("head %q is not cut before a space of the line", head)
	}
	if !strings.HasSuffix(pull, tail) || !strings.HasSuffix(pull[:len(pull)-len(tail)], " ") {
		t.Errorf("tail %q is not cut after a space of the line", tail)
	}
	if !strings.HasSuffix(got, "dial tcp: lookup registry.example: no such host") {
		t.Errorf("firstLine = %q, want the cause at its end", got)
	}
	if short := "pull access denied"; firstLine(short+"\nmore") != short {
		t.Errorf("firstLine of a short line = %q", firstLine(short+"\nmore"))
	}
}
