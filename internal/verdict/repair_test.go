package verdict

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestRepairDue: with a 4-minute policy, a member down 1 minute is left alone; down 2 minutes its pod
// (created before that point) is recreated, but only once; down 4 minutes it is due for replacement
// once its pod is 2 minutes old (a pod recreated since, on a fixed spec, gets that long to come up);
// a pod that is being deleted is not recreated again; nothing is recreated when the healthy voters
// without the member are no quorum; replacing off ("0s") still recreates after half the default.
func TestRepairDue(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	downFor := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }
	build := func(policy *time.Duration, downFor []*metav1.Time, podAge time.Duration, healthy int, terminating bool, etcdWaits string) *model.Cluster {
		c := testutil.EtcdCluster("r", testutil.WithReplicas(int32(len(downFor))))
		if policy != nil {
			c.Spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{Duration: *policy}}
		}
		e := &model.Etcd{ClusterID: 1, Leader: 1, Health: map[uint64]error{}}
		var pods []corev1.Pod
		for i, since := range downFor {
			name := fmt.Sprintf("r-%d", i)
			e.Members = append(e.Members, etcd.Member{ID: uint64(i + 1), Name: name})
			e.Health[uint64(i+1)] = nil
			if i >= healthy {
				e.Health[uint64(i+1)] = errors.New("connection refused")
			}
			c.Status.Members = append(c.Status.Members, etcdv1beta1.MemberStatus{Name: name, DownSince: since})
			p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-podAge))}}
			if terminating {
				p.DeletionTimestamp = &p.CreationTimestamp
			}
			if i >= healthy && etcdWaits != "" {
				p.Status = waitingPodStatus(etcdWaits)
			}
			pods = append(pods, p)
		}
		return model.Build(model.Input{Cluster: c, Etcd: e, Pods: pods, Now: now})
	}
	four, thirty, twenty, off := 4*time.Minute, 30*time.Second, 20*time.Second, time.Duration(0)
	for _, tc := range []struct {
		name               string
		policy             *time.Duration
		down               time.Duration
		podAge             time.Duration
		healthy            int
		terminating        bool
		etcdWaits          string // the etcd container's waiting reason, its init containers done
		recreate, replaces bool
	}{
		{name: "down 1m", policy: &four, down: time.Minute, podAge: time.Hour, healthy: 2},
		{name: "down 2m: recreate", policy: &four, down: 2 * time.Minute, podAge: time.Hour, healthy: 2, recreate: true},
		{name: "down 3m, recreated 30s ago", policy: &four, down: 3 * time.Minute, podAge: 30 * time.Second, healthy: 2},
		{name: "down 4m: replace", policy: &four, down: 4 * time.Minute, podAge: 2 * time.Minute, healthy: 2, replaces: true},
		{name: "down 4m, its pod recreated 30s ago (a spec fixed since): not yet", policy: &four, down: 4 * time.Minute, podAge: 30 * time.Second, healthy: 2},
		{name: "down 4m, pod deleted 10s ago (a rollout recreates it): not yet", policy: &four, down: 4 * time.Minute, podAge: 10 * time.Second, healthy: 2, terminating: true},
		{name: "down 4m, pod terminating", policy: &four, down: 4 * time.Minute, podAge: time.Hour, healthy: 2, terminating: true, replaces: true},
		{name: "no quorum without it", policy: &four, down: 2 * time.Minute, podAge: time.Hour, healthy: 1},
		{name: "default policy, down 3m: recreate", down: 3 * time.Minute, podAge: time.Hour, healthy: 2, recreate: true},
		{name: "default policy, down 5m: replace", down: 5 * time.Minute, podAge: 150 * time.Second, healthy: 2, replaces: true},
		{name: "default policy, down 5m, pod 1m old: not yet", down: 5 * time.Minute, podAge: time.Minute, healthy: 2},
		{name: "replacing off, down 3m: recreate", policy: &off, down: 3 * time.Minute, podAge: time.Hour, healthy: 2, recreate: true},
		{name: "replacing off, down 1h", policy: &off, down: time.Hour, podAge: time.Minute, healthy: 2},
		{name: "down 4m, its image failing to pull: neither", policy: &four, down: 4 * time.Minute, podAge: time.Hour, healthy: 2, etcdWaits: "ImagePullBackOff"},
		{name: "down 4m, its image still being pulled for the first time: neither", policy: &four, down: 4 * time.Minute, podAge: time.Hour, healthy: 2, etcdWaits: "ContainerCreating"},
		{name: "down 4m, its init containers not done: replace", policy: &four, down: 4 * time.Minute, podAge: 2 * time.Minute, healthy: 2, etcdWaits: "PodInitializing", replaces: true},
		{name: "20s policy, down 40s, its pod made 15s ago, showing no problem: not yet", policy: &twenty, down: 40 * time.Second, podAge: 15 * time.Second, healthy: 2, etcdWaits: "PodInitializing"},
		{name: "20s policy, down 40s, its pod made 15s ago, crash-looping: replace", policy: &twenty, down: 40 * time.Second, podAge: 15 * time.Second, healthy: 2, etcdWaits: "CrashLoopBackOff", replaces: true},
		{name: "20s policy, down 90s, its pod made 65s ago, showing no problem: replace", policy: &twenty, down: 90 * time.Second, podAge: 65 * time.Second, healthy: 2, etcdWaits: "PodInitializing", replaces: true},
		{name: "down 4m, crash-looping: replace", policy: &four, down: 4 * time.Minute, podAge: 2 * time.Minute, healthy: 2, etcdWaits: "CrashLoopBackOff", replaces: true},
		// a restart coming back (made after it went down, its init containers running) is not recreated
		{name: "30s policy, down 16s, its pod made 8s ago, initializing: not recreated", policy: &thirty, down: 16 * time.Second, podAge: 8 * time.Second, healthy: 2, etcdWaits: "PodInitializing"},
		{name: "30s policy, down 16s, its pod made 8s ago, crash-looping: recreate", policy: &thirty, down: 16 * time.Second, podAge: 8 * time.Second, healthy: 2, etcdWaits: "CrashLoopBackOff", recreate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			downs := []*metav1.Time{nil, nil, downFor(tc.down)}
			if tc.healthy == 1 {
				downs[1] = downFor(tc.down)
			}
			m := build(tc.policy, downs, tc.podAge, tc.healthy, tc.terminating, tc.etcdWaits)
			mem := m.Member("r-2")
			if got := RecreateDue(m, mem); got != tc.recreate {
				t.Errorf("RecreateDue = %v, want %v", got, tc.recreate)
			}
			if got := ReplaceDue(m, mem) != ""; got != tc.replaces {
				t.Errorf("ReplaceDue = %v, want %v", got, tc.replaces)
			}
			if got := Replacements(m)["r-2"] != ""; got != tc.replaces {
				t.Errorf("Replacements()[r-2] = %v, want %v", got, tc.replaces)
			}
			if RecreateDue(m, m.Member("r-0")) || ReplaceDue(m, m.Member("r-0")) != "" {
				t.Error("a healthy member is due for repair")
			}
		})
	}
}

// waitingPodStatus is the status of a member's pod whose etcd container waits with reason: with
// PodInitializing its verify-data init container runs; otherwise it has completed, and the etcd
// container has an image ID (it ran before) only when it crash-loops.
func waitingPodStatus(reason string) corev1.PodStatus {
	initState := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}
	if reason == "PodInitializing" {
		initState = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	}
	etcdStatus := corev1.ContainerStatus{Name: resources.EtcdContainer, Image: "docker.io/local/etcd:v3.6.16",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
	if reason == "CrashLoopBackOff" {
		etcdStatus.ImageID = "sha256:0123"
		etcdStatus.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}
	}
	return corev1.PodStatus{
		InitContainerStatuses: []corev1.ContainerStatus{{Name: resources.VerifyDataContainerName, State: initState}},
		ContainerStatuses:     []corev1.ContainerStatus{etcdStatus},
	}
}

// TestLearnerDownClock: a learner's down clock does not run while its pod waits for a node without
// being refused (its claim is being provisioned), starts when the pod got a node (not when the member
// was added), and runs from the record for a pod the scheduler refused; a learner's pod is never
// recreated by the policy, and a learner is replaced once down for the whole policy after its pod got
// a node.
func TestLearnerDownClock(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	policy := 20 * time.Second
	added := metav1.NewTime(now.Add(-time.Minute)) // recorded down since the member was added
	build := func(scheduled *corev1.PodCondition) *model.Cluster {
		c := testutil.EtcdCluster("l", testutil.WithReplicas(3))
		c.Spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{Duration: policy}}
		e := &model.Etcd{ClusterID: 1, Leader: 1, Health: map[uint64]error{}}
		var pods []corev1.Pod
		for i := range 3 {
			name := fmt.Sprintf("l-%d", i)
			m := etcd.Member{ID: uint64(i + 1), Name: name}
			pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
			if i == 2 {
				m.Name, m.IsLearner = "", true // added, never started
				e.Health[m.ID] = errors.New("member l-2 has no running pod")
				c.Status.Members = append(c.Status.Members, etcdv1beta1.MemberStatus{Name: name, Role: etcdv1beta1.RoleLearner, DownSince: &added})
				pod.CreationTimestamp = added
				if scheduled != nil {
					pod.Status.Conditions = []corev1.PodCondition{*scheduled}
				}
			}
			e.Members = append(e.Members, m)
			pods = append(pods, pod)
		}
		e.Members[2].PeerURLs = []string{resources.Options{}.PeerURL(c, "l-2")}
		return model.Build(model.Input{Cluster: c, Etcd: e, Pods: pods, Now: now})
	}
	for _, tc := range []struct {
		name      string
		scheduled *corev1.PodCondition
		since     time.Time
		replaces  bool
	}{
		{"waiting for its claim", &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}, now, false},
		{"no condition yet", nil, now, false},
		{"got a node 5s ago", &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-5 * time.Second))}, now.Add(-5 * time.Second), false},
		{"got a node 25s ago", &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-25 * time.Second))}, now.Add(-25 * time.Second), true},
		{"refused by the scheduler", &corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}, added.Time, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := build(tc.scheduled)
			mem := m.Member("l-2")
			if !mem.Learner() || !mem.Down() || !mem.DownSince.Equal(tc.since) {
				t.Fatalf("learner %v, down %v since %s, want since %s", mem.Learner(), mem.Down(), mem.DownSince, tc.since)
			}
			if RecreateDue(m, mem) {
				t.Error("a learner's pod is due to be recreated by the policy")
			}
			if got := ReplaceDue(m, mem) != ""; got != tc.replaces {
				t.Errorf("ReplaceDue = %v (%q), want %v", got, ReplaceDue(m, mem), tc.replaces)
			}
		})
	}
}

// TestDownSummary: Degraded says of each down member since when, why, and when it will be replaced,
// or that it is not replaced automatically; of a learner, that it is joining; of a voter that has just
// joined (promoted, its etcd not serving yet), that it has joined, with no replacement countdown.
func TestDownSummary(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	members := []etcdv1beta1.MemberStatus{
		{Name: "s-0", Healthy: true},
		{Name: "s-1", DownSince: &since, Problem: "etcd container CrashLoopBackOff (last exit code 2, Error)"},
	}
	spec := &testutil.EtcdCluster("s").Spec
	got := strings.Join(downSummary(spec, members, true, nil), "; ")
	want := "s-1 is down since 2026-12-01T12:00:00Z (etcd container CrashLoopBackOff (last exit code 2, Error)); replaced at 2026-12-01T12:05:00Z unless it recovers"
	if got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	joining := []etcdv1beta1.MemberStatus{{Name: "s-3", Role: etcdv1beta1.RoleLearner, DownSince: &since, Problem: "etcd: connection refused"}}
	got = strings.Join(downSummary(spec, joining, true, nil), "; ")
	want = "s-3 is joining as a learner, not serving yet, since 2026-12-01T12:00:00Z (etcd: connection refused); replaced at 2026-12-01T12:05:00Z unless it serves"
	if got != want {
		t.Errorf("summary of a learner %q, want %q", got, want)
	}
	pulling := []etcdv1beta1.MemberStatus{{Name: "s-2", DownSince: &since, Problem: `etcd container ImagePullBackOff: Back-off pulling image "x"`}}
	if got := strings.Join(downSummary(spec, pulling, true, nil), "; "); !strings.Contains(got, "not replaced while it waits for an image") || strings.Contains(got, "replaced at") {
		t.Errorf("summary of a member waiting for an image %q: want no replacement time, and what to fix", got)
	}
	pulling = []etcdv1beta1.MemberStatus{{Name: "s-2", DownSince: &since, Problem: model.PullingImageProblem + " docker.io/local/etcd:v3.6.16"}}
	if got := strings.Join(downSummary(spec, pulling, true, nil), "; "); !strings.Contains(got, "not replaced while its image is being pulled") || strings.Contains(got, "does not exist") {
		t.Errorf("summary of a member whose image is being pulled %q: want it to say the pull is under way, not that the image may not exist", got)
	}
	promoted := []etcdv1beta1.MemberStatus{{Name: "s-4", Role: etcdv1beta1.RoleVoter, DownSince: &since, Problem: "etcd: context deadline exceeded"}}
	got = strings.Join(downSummary(spec, promoted, true, map[string]memberNote{"s-4": {state: memberJoining}}), "; ")
	if !strings.HasPrefix(got, "s-4 has joined as a voter and does not serve yet") || strings.Contains(got, "replaced at") || strings.Contains(got, "down") {
		t.Errorf("summary of a voter that is joining %q: want it to say so, with no replacement", got)
	}
	if got := strings.Join(downSummary(spec, promoted, true, nil), "; "); !strings.Contains(got, "s-4 is down since") {
		t.Errorf("summary of the same voter not joining %q: want it down", got)
	}
	got = strings.Join(downSummary(spec, promoted, true, map[string]memberNote{"s-4": {state: memberStarting}}), "; ")
	want = "s-4 is starting on a new pod, not serving yet, since 2026-12-01T12:00:00Z (etcd: context deadline exceeded); replaced at 2026-12-01T12:05:00Z unless it serves"
	if got != want {
		t.Errorf("summary of a voter starting on a new pod %q, want %q", got, want)
	}
	// its pod made at 12:04:30: it is given a minute to start, past the end of the policy
	late := map[string]memberNote{"s-4": {state: memberStarting, replaceAt: since.Add(5*time.Minute + 30*time.Second)}}
	got = strings.Join(downSummary(spec, promoted, true, late), "; ")
	want = "s-4 is starting on a new pod, not serving yet, since 2026-12-01T12:00:00Z (etcd: context deadline exceeded); replaced at 2026-12-01T12:05:30Z unless it serves"
	if got != want {
		t.Errorf("summary of a voter starting on a pod made late in the policy %q, want %q", got, want)
	}
	// the first member a rollout restarted onto a new spec, starting (between two crashes, say): not
	// replaced whether it starts or not, and no alarm yet
	first := map[string]memberNote{"s-4": {state: memberStarting, untriedSpec: true}}
	got = strings.Join(downSummary(spec, promoted, true, first), "; ")
	want = "s-4 is starting on a new pod, not serving yet, since 2026-12-01T12:00:00Z (etcd: context deadline exceeded); the first member on this spec: not replaced if it does not start either, since a new member would be made from the same spec"
	if got != want {
		t.Errorf("summary of the first member on an untried spec, starting %q, want %q", got, want)
	}
	spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{}}
	if got := strings.Join(downSummary(spec, members, false, nil), "; "); !strings.Contains(got, "nothing is replaced without a quorum") || strings.Contains(got, "replaced at") {
		t.Errorf("without a quorum: %q", got)
	}
	if got := strings.Join(downSummary(spec, members, true, nil), "; "); !strings.Contains(got, "not replaced automatically") {
		t.Errorf("summary %q, want it to say the member is not replaced automatically", got)
	}
	paused := spec.DeepCopy()
	paused.Paused = true
	if got := strings.Join(downSummary(paused, members, true, nil), "; "); !strings.Contains(got, "not recreated or replaced while spec.paused is true") || strings.Contains(got, "replaced at") {
		t.Errorf("paused: %q", got)
	}
}

// TestPodToRecreate: a failed pod is deleted to be recreated whatever etcd says; a member that is down
// long enough, once; a running member that answers, never.
func TestPodToRecreate(t *testing.T) {
	now, long, c, e := thirdDownForAnHour("f")
	pod := func(name string, phase corev1.PodPhase, reason string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: long}, Status: corev1.PodStatus{Phase: phase, Reason: reason}}
	}
	m := model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: []corev1.Pod{
		pod("f-0", corev1.PodRunning, ""), pod("f-1", corev1.PodFailed, "Evicted"), pod("f-2", corev1.PodRunning, "")}})
	for name, want := range map[string][2]string{
		"f-0": {"", ""},
		"f-1": {"DeletedFailedPod", "failed: Evicted"},
		"f-2": {"RecreatingMember", "down since 2026-12-01T11:00:00Z: etcd: connection refused"},
	} {
		reason, why := PodToRecreate(m, m.Member(name), resources.Options{})
		if reason != want[0] || why != want[1] {
			t.Errorf("%s: PodToRecreate = %q, %q; want %q, %q", name, reason, why, want[0], want[1])
		}
	}
}

// TestCorruptAlarm: one CORRUPT alarm makes the cluster unavailable with reason Corrupt, naming the
// member, while the other members keep quorum (the phase is not QuorumLost); the alarmed member is due
// for replacement at once, whatever the policy; once etcd no longer lists it, its alarm is to be
// disarmed, and an alarm of a listed member never is.
func TestCorruptAlarm(t *testing.T) {
	corrupt := func(in *model.Input) {
		in.Etcd.Health[2] = fmt.Errorf("health: %w: %w", etcd.ErrAlarm, etcd.ErrCorrupt)
		in.Etcd.Alarms = []etcd.Alarm{{MemberID: 2, Type: etcd.AlarmCorrupt}}
		in.Cluster.Spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{}}
	}
	s := observed("abc", true, map[uint64]bool{1: true, 2: true, 3: true}, 1, 0, corrupt)
	Status(s.cluster, s.m, s.report, nil, resources.Options{}, true)
	a := meta.FindStatusCondition(s.cluster.Status.Conditions, etcdv1beta1.ConditionAvailable)
	if a == nil || a.Status != metav1.ConditionFalse || a.Reason != etcdv1beta1.ReasonCorrupt || !strings.Contains(a.Message, "CORRUPT alarm for s-1") {
		t.Errorf("Available %+v: want False, reason Corrupt, naming s-1", a)
	}
	if s.cluster.Status.Phase == etcdv1beta1.PhaseQuorumLost {
		t.Errorf("phase %s: a quorum still answers", s.cluster.Status.Phase)
	}
	if !strings.Contains(ReplaceDue(s.m, s.m.Member("s-1")), "CORRUPT") || ReplaceDue(s.m, s.m.Member("s-0")) != "" {
		t.Error("want s-1, and only s-1, due for replacement at once")
	}
	if got := CorruptToDisarm(s.m); len(got) != 0 {
		t.Errorf("CorruptToDisarm = %v while s-1 is still listed", got)
	}
	removed := observed("abc", true, map[uint64]bool{1: true, 3: true}, 1, 0, corrupt, func(in *model.Input) {
		in.Etcd.Members = slices.DeleteFunc(in.Etcd.Members, func(m etcd.Member) bool { return m.ID == 2 })
	})
	if got := CorruptToDisarm(removed.m); !slices.Equal(got, []uint64{2}) {
		t.Errorf("CorruptToDisarm = %v after s-1 was removed, want [2]", got)
	}
}

// TestPodToRecreateStaleLearner: a learner that has not started is recreated when its pod names other
// members in --initial-cluster than etcd lists now, or was built from an older spec, and left alone
// when both are current (or once it has started: it then restarts from its data, and a rollout, not
// this, updates it).
func TestPodToRecreateStaleLearner(t *testing.T) {
	opts := resources.Options{}
	c := testutil.EtcdCluster("l", testutil.WithReplicas(3))
	members := []etcd.Member{
		{ID: 1, Name: "l-0", PeerURLs: []string{opts.PeerURL(c, "l-0")}},
		{ID: 2, Name: "l-1", PeerURLs: []string{opts.PeerURL(c, "l-1")}},
		{ID: 4, IsLearner: true, PeerURLs: []string{opts.PeerURL(c, "l-2")}}, // added, never started
	}
	current := model.JoinInitialCluster(opts, c, members)
	learnerPod := func(initial, hash string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "l-2", Annotations: map[string]string{etcdv1beta1.AnnotationSpecHash: hash}},
			Spec: testutil.PlainTextMemberSpec("--name=l-2", "--initial-cluster="+initial)}
	}
	hash := opts.SpecHash(c)
	for _, tc := range []struct {
		name, initial, hash string
		started             bool
		want                string
	}{
		{"stale list", "l-0=" + opts.PeerURL(c, "l-0") + ",l-2=" + opts.PeerURL(c, "l-2") + ",l-9=http://gone:2380", hash, false, "RestartingLearner"},
		{"current list", current, hash, false, ""},
		{"older spec", current, "older", false, "RestartingLearner"},
		{"started", "stale", "older", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := append([]etcd.Member(nil), members...)
			if tc.started {
				ms[2].Name = "l-2"
			}
			e := &model.Etcd{ClusterID: 1, Leader: 1, Members: ms, Health: map[uint64]error{1: nil, 2: nil, 4: errors.New("not started")}}
			m := model.Build(model.Input{Cluster: c, Etcd: e, Options: opts, Pods: []corev1.Pod{learnerPod(tc.initial, tc.hash)}})
			if reason, why := PodToRecreate(m, m.Member("l-2"), opts); reason != tc.want {
				t.Errorf("PodToRecreate = %q (%s), want %q", reason, why, tc.want)
			}
		})
	}
	if !strings.Contains(current, "l-2="+opts.PeerURL(c, "l-2")) || strings.Count(current, ",") != 2 {
		t.Errorf("JoinInitialCluster = %q: want the 3 members, the learner included", current)
	}
}

// TestBootstrapPodToRebuild: in a cluster that has not formed, a member's pod built from an older spec
// whose etcd does not run (it waits for an image that does not exist) is to be rebuilt, and the
// reason names its problem; one built from the current spec, or whose etcd runs, is not. The status
// names each member's problem although etcd never answered, and PodProblems names the members that
// share one together.
func TestBootstrapPodToRebuild(t *testing.T) {
	opts := resources.Options{}
	c := testutil.EtcdCluster("n", testutil.WithReplicas(3))
	hash := opts.SpecHash(c)
	mk := func(name, hash string, state corev1.ContainerState) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{etcdv1beta1.AnnotationSpecHash: hash}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: resources.EtcdContainer, State: state}}}}
	}
	pulling := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "docker.io/local/etcd:v3.6.99"`}}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	claims := func(names ...string) (out []corev1.PersistentVolumeClaim) {
		for _, n := range names {
			out = append(out, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName(n)}})
		}
		return out
	}
	m := model.Build(model.Input{Cluster: c, Options: opts, Claims: claims("n-0", "n-1", "n-2"), Pods: []corev1.Pod{
		mk("n-0", "older", pulling), mk("n-1", hash, pulling), mk("n-2", "older", running)}})
	for name, want := range map[string]string{
		"n-0": `built from an older spec, its etcd not running: etcd container ImagePullBackOff: Back-off pulling image "docker.io/local/etcd:v3.6.99"`,
		"n-1": "",
		"n-2": "",
	} {
		if got := BootstrapPodToRebuild(m, m.Member(name), opts); got != want {
			t.Errorf("%s: BootstrapPodToRebuild = %q, want %q", name, got, want)
		}
	}
	// a claim deleted while its pod waited to be scheduled: the pod can never start, and is rebuilt
	pending := corev1.ContainerState{}
	lost := model.Build(model.Input{Cluster: c, Options: opts, Claims: claims("n-0", "n-2"), Pods: []corev1.Pod{
		mk("n-0", hash, pending), mk("n-1", hash, pending), mk("n-2", hash, running)}})
	for name, want := range map[string]string{"n-0": "", "n-1": "its claim is gone or being deleted, so it can never start", "n-2": ""} {
		if got := BootstrapPodToRebuild(lost, lost.Member(name), opts); got != want {
			t.Errorf("claim of n-1 gone: %s: BootstrapPodToRebuild = %q, want %q", name, got, want)
		}
	}
	want := `n-0, n-1: etcd container ImagePullBackOff: Back-off pulling image "docker.io/local/etcd:v3.6.99"`
	if got := PodProblems(m); len(got) != 1 || got[0] != want {
		t.Errorf("PodProblems = %q, want [%q]: members with one problem named together", got, want)
	}
	Status(c, m, &Report{}, nil, opts, true)
	for _, ms := range c.Status.Members {
		if want := (ms.Name != "n-2"); strings.Contains(ms.Problem, "ImagePullBackOff") != want {
			t.Errorf("member %s problem %q: want it to name the image pull: %v", ms.Name, ms.Problem, want)
		}
	}
	if d := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionDegraded); d == nil || !strings.Contains(d.Message, "n-0 is unhealthy (etcd container ImagePullBackOff") {
		t.Errorf("Degraded %+v: want it to name n-0's problem", d)
	}
}

// TestDataNotOwnAndClaimIdentity: a member whose verify-data init container exited 3 is due for
// replacement at once with its message, and the status names the problem; a started member's claim
// without a recorded identity gets its member and cluster ID, a claim that has one keeps it.
func TestDataNotOwnAndClaimIdentity(t *testing.T) {
	c := testutil.EtcdCluster("d", testutil.WithReplicas(3))
	e := &model.Etcd{ClusterID: 0xc1, Leader: 1, Members: []etcd.Member{{ID: 1, Name: "d-0"}, {ID: 2, Name: "d-1"}, {ID: 3, Name: "d-2"}},
		Health: map[uint64]error{1: nil, 2: errors.New("connection refused"), 3: nil}}
	failed := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d-1"}, Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{
		Name: resources.VerifyDataContainerName, LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: resources.ExitNotOwn, Message: "the data is gone\nmore"}}}}}}
	recorded := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("d-2"),
		Annotations: map[string]string{etcdv1beta1.AnnotationMemberID: "00000000000000ff"}}}
	fresh := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("d-0")}}
	m := model.Build(model.Input{Cluster: c, Etcd: e, Pods: []corev1.Pod{failed}, Claims: []corev1.PersistentVolumeClaim{fresh, recorded}})
	if got := ReplaceDue(m, m.Member("d-1")); got != "its data directory is not its own (the data is gone)" {
		t.Errorf("ReplaceDue(d-1) = %q", got)
	}
	if got := m.Member("d-1").Problem(); got != "data directory check: the data is gone" {
		t.Errorf("Problem(d-1) = %q", got)
	}
	want := map[string]string{etcdv1beta1.AnnotationMemberID: "0000000000000001", etcdv1beta1.AnnotationClusterID: "00000000000000c1"}
	if got := ClaimIdentity(m, m.Member("d-0")); !maps.Equal(got, want) {
		t.Errorf("ClaimIdentity(d-0) = %v, want %v", got, want)
	}
	if got := ClaimIdentity(m, m.Member("d-2")); got != nil {
		t.Errorf("ClaimIdentity(d-2) = %v, want nil: the claim records an identity already", got)
	}
}

// TestUnreadableDataReplacedAtOnce: a member whose etcd crash-loops because its database is not a
// valid bbolt file is due for replacement as soon as it is down, whatever the policy (here 5 minutes,
// 10 s into the fault), and AwaitHealthy says why instead of a replacement time; on a spec a rollout
// restarted it onto and no member has served on, it is not (the new spec may be what cannot read it),
// nor with replacing turned off (0s: the data may be salvaged by hand); a member that crash-loops for
// another reason waits for the policy as before.
func TestUnreadableDataReplacedAtOnce(t *testing.T) {
	const invalid = `{"level":"panic","ts":"2026-12-05T16:29:58.389426Z","caller":"backend/backend.go:205","msg":"failed to open database","path":"/var/lib/etcd/data/member/snap/db","error":"invalid database"}` + "\npanic: failed to open database\n"
	const flag = `{"level":"fatal","ts":"2026-12-05T16:29:58.389426Z","msg":"discovery failed","error":"unknown log level"}` + "\n"
	const lost = "panic: tocommit(357) is out of range [lastIndex(71)]. Was the raft log corrupted, truncated, or lost?\n\ngoroutine 171 [running]:\n"
	for _, tc := range []struct {
		name, message, rolled string
		off                   bool // replaceUnhealthyMemberAfter: 0s
		want                  string
	}{
		{"database unreadable", invalid, "", false, "etcd cannot read its data (failed to open database: invalid database)"},
		{"database unreadable on an untried spec", invalid, "B", false, ""},
		{"database unreadable, replacing turned off", invalid, "", true, ""},
		{"another crash loop", flag, "", false, ""},
		{"raft log lost acknowledged entries", lost, "", false, "its raft log lost entries it had acknowledged (tocommit(357) is out of range [lastIndex(71)])"},
		{"raft log lost, replacing turned off", lost, "", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, c, e := thirdDownForAnHour("r")
			if tc.off {
				c.Spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{}}
			}
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			since := metav1.NewTime(now.Add(-10 * time.Second))
			c.Status.Members[0].DownSince = &since
			long := metav1.NewTime(now.Add(-time.Hour))
			var pods []corev1.Pod
			for i := range 3 {
				pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r-%d", i), CreationTimestamp: long,
					Annotations: map[string]string{etcdv1beta1.AnnotationSpecHash: map[bool]string{true: "B", false: "A"}[i == 2]}}})
			}
			pods[2].Status = waitingPodStatus("CrashLoopBackOff")
			pods[2].Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: tc.message}
			claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("r-2")}}
			if tc.rolled != "" {
				claim.Annotations = map[string]string{etcdv1beta1.AnnotationRolledOnto: tc.rolled}
			}
			m := model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: pods, Claims: []corev1.PersistentVolumeClaim{claim}})
			if got := ReplaceDue(m, m.Member("r-2")); got != tc.want {
				t.Errorf("ReplaceDue = %q, want %q", got, tc.want)
			}
			awaited := AwaitHealthy(m).Message
			if got := strings.Contains(awaited, "it is replaced once the other members have a quorum"); got != (tc.want != "") {
				t.Errorf("AwaitHealthy = %q: says it is replaced now: %v, want %v", awaited, got, tc.want != "")
			}
		})
	}
}

// TestNoReplacementForImageProblem: a member down because its image cannot be pulled is not replaced,
// however long it has been down (its replacement would run the same spec), nor is its pod recreated (the
// new pod would wait for the same image; the kubelet retries the pull, and the rollout of a fixed spec
// recreates the pod).
func TestNoReplacementForImageProblem(t *testing.T) {
	now, long, c, e := thirdDownForAnHour("i")
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "i-2", CreationTimestamp: long}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
		Name: "etcd", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}}}
	m := model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: []corev1.Pod{pod}})
	if why := ReplaceDue(m, m.Member("i-2")); why != "" {
		t.Errorf("ReplaceDue = %q, want none for a member that cannot pull its image", why)
	}
	if RecreateDue(m, m.Member("i-2")) {
		t.Error("RecreateDue = true, want the pod left to the kubelet's retries")
	}
}

// thirdDownForAnHour returns a 3-member cluster <name>-0..2 as of now, whose third member etcd lists
// but which does not answer, recorded down since long (an hour before now).
func thirdDownForAnHour(name string) (now time.Time, long metav1.Time, c *etcdv1beta1.EtcdCluster, e *model.Etcd) {
	now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	long = metav1.NewTime(now.Add(-time.Hour))
	c = testutil.EtcdCluster(name, testutil.WithReplicas(3))
	c.Status.Members = []etcdv1beta1.MemberStatus{{Name: name + "-2", DownSince: &long}}
	e = &model.Etcd{ClusterID: 1, Leader: 1, Members: []etcd.Member{{ID: 1, Name: name + "-0"}, {ID: 2, Name: name + "-1"}, {ID: 3, Name: name + "-2"}},
		Health: map[uint64]error{1: nil, 2: nil, 3: errors.New("connection refused")}}
	return now, long, c, e
}

// TestNoReplacementOnUntriedSpec: a member down for an hour, crash-looping on a pod of spec B, is not
// replaced when a rolling update restarted it onto B while it served (its claim records B) and no
// other member serves on B: a new member would be made from B too. Degraded and AwaitHealthy say so
// and what to do. It is replaced as before when another member serves on B (B is not the cause), when
// its claim records no such restart (the rollout moved it onto B while it was already down), or when
// it went down on B and the rollout then moved it onto C. ServedOnRolledSpec holds once it serves on B.
func TestNoReplacementOnUntriedSpec(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rolled   string    // the claim's AnnotationRolledOnto
		hashes   [3]string // the members' pods' spec hashes
		replaced bool
	}{
		{"restarted onto B while serving, no other member on B", "B", [3]string{"A", "A", "B"}, false},
		{"restarted onto B while serving, another member serves on B", "B", [3]string{"A", "B", "B"}, true},
		{"moved onto B while down", "", [3]string{"A", "A", "B"}, true},
		{"restarted onto B while serving, then moved onto C while down", "B", [3]string{"A", "A", "C"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now, long, c, e := thirdDownForAnHour("u")
			var pods []corev1.Pod
			for i, h := range tc.hashes {
				p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("u-%d", i), CreationTimestamp: long,
					Annotations: map[string]string{etcdv1beta1.AnnotationSpecHash: h}}}
				if i == 2 {
					p.Status = waitingPodStatus("CrashLoopBackOff")
				}
				pods = append(pods, p)
			}
			claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("u-2")}}
			if tc.rolled != "" {
				claim.Annotations = map[string]string{etcdv1beta1.AnnotationRolledOnto: tc.rolled}
			}
			m := model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: pods, Claims: []corev1.PersistentVolumeClaim{claim}})
			mem := m.Member("u-2")
			if got := m.DownOnUntriedSpec(mem); got == tc.replaced {
				t.Errorf("DownOnUntriedSpec = %v, want %v", got, !tc.replaced)
			}
			if why := ReplaceDue(m, mem); (why != "") != tc.replaced {
				t.Errorf("ReplaceDue = %q, want replaced %v", why, tc.replaced)
			}
			if ServedOnRolledSpec(mem) {
				t.Error("ServedOnRolledSpec = true for a member that is down")
			}
			c.Status.Members = memberStatuses(m)
			degraded := strings.Join(downSummary(&c.Spec, c.Status.Members, true, memberNotes(m, resources.Options{}.SpecHash(c))), "; ")
			awaited := AwaitHealthy(m).Message
			for what, msg := range map[string]string{"Degraded": degraded, "AwaitHealthy": awaited} {
				if got := strings.Contains(msg, "a rolling update restarted it onto a spec no member has run") && strings.Contains(msg, "fix or undo it"); got == tc.replaced {
					t.Errorf("%s = %q: says the member is not replaced for its spec: %v, want %v", what, msg, got, !tc.replaced)
				}
				if got := strings.Contains(msg, "replaced at "); got != tc.replaced {
					t.Errorf("%s = %q: gives a replacement time: %v, want %v", what, msg, got, tc.replaced)
				}
			}
		})
	}
}

// TestServedOnRolledSpec: the record of a restart onto B goes once the member serves on B, not while
// it serves on another spec (the restart has not happened yet: the eviction was refused).
func TestServedOnRolledSpec(t *testing.T) {
	now, _, c, e := thirdDownForAnHour("s")
	e.Health[3] = nil
	c.Status.Members = nil
	for hash, want := range map[string]bool{"B": true, "A": false} {
		pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "s-2", Annotations: map[string]string{etcdv1beta1.AnnotationSpecHash: hash}}}
		claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("s-2"),
			Annotations: map[string]string{etcdv1beta1.AnnotationRolledOnto: "B"}}}
		m := model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: []corev1.Pod{pod}, Claims: []corev1.PersistentVolumeClaim{claim}})
		if got := ServedOnRolledSpec(m.Member("s-2")); got != want {
			t.Errorf("serving on %s, restarted onto B: ServedOnRolledSpec = %v, want %v", hash, got, want)
		}
	}
}

// TestOutdatedPodDown: with etcd not answering (no quorum: two members crash-loop), the pods of an
// older spec whose etcd does not run are recreated with the current spec; the same pod on the current
// spec is not (its fix is not here yet), a pod of an older spec that shows no problem is not (it may be
// starting), neither is the pod of a member that runs etcd, nor the pod of an emptyDir member (its data
// would go with it).
func TestOutdatedPodDown(t *testing.T) {
	now, long, c, _ := thirdDownForAnHour("o")
	testutil.WithTLS(false, false)(c) // the pods below are plaintext ones: PodCurrent compares TLS too
	c.Status.ClusterID = "1"
	c.Status.Members = []etcdv1beta1.MemberStatus{{Name: "o-0", ID: "1"}, {Name: "o-1", ID: "2"}, {Name: "o-2", ID: "3"}}
	current := resources.Options{}.SpecHash(c)
	pod := func(name, hash string, status corev1.PodStatus) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: long,
			Annotations: map[string]string{etcdv1beta1.AnnotationSpecHash: hash}}, Status: status,
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: resources.EtcdContainer, Command: []string{
				"etcd", "--listen-client-urls=http://0.0.0.0:2379", "--listen-peer-urls=http://0.0.0.0:2380"}}}}}
	}
	running := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: resources.EtcdContainer,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	for _, tc := range []struct {
		name     string
		pods     []corev1.Pod
		emptyDir bool
		want     map[string]bool
	}{
		{"two crash-looping on an older spec", []corev1.Pod{pod("o-0", "old", running), pod("o-1", "old", waitingPodStatus("CrashLoopBackOff")), pod("o-2", "old", waitingPodStatus("CrashLoopBackOff"))},
			false, map[string]bool{"o-0": false, "o-1": true, "o-2": true}},
		// their data would go with their pods: two copies of three
		{"two crash-looping on an older spec, on emptyDir", []corev1.Pod{pod("o-0", "old", running), pod("o-1", "old", waitingPodStatus("CrashLoopBackOff")), pod("o-2", "old", waitingPodStatus("CrashLoopBackOff"))},
			true, map[string]bool{"o-0": false, "o-1": false, "o-2": false}},
		{"crash-looping on the current spec", []corev1.Pod{pod("o-0", current, running), pod("o-1", current, waitingPodStatus("CrashLoopBackOff")), pod("o-2", current, waitingPodStatus("CrashLoopBackOff"))},
			false, map[string]bool{"o-0": false, "o-1": false, "o-2": false}},
		{"an older spec, starting", []corev1.Pod{pod("o-0", "old", running), pod("o-1", "old", waitingPodStatus("PodInitializing")), pod("o-2", "old", corev1.PodStatus{})},
			false, map[string]bool{"o-0": false, "o-1": false, "o-2": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var claims []corev1.PersistentVolumeClaim
			if !tc.emptyDir {
				for _, n := range []string{"o-0", "o-1", "o-2"} {
					claims = append(claims, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName(n)}})
				}
			}
			m := model.Build(model.Input{Cluster: c, Now: now, Pods: tc.pods, Claims: claims})
			for name, want := range tc.want {
				mem := m.Member(name)
				if got := OutdatedPodDown(m, mem, resources.Options{}); got != want {
					t.Errorf("%s: OutdatedPodDown = %v, want %v", name, got, want)
				}
				reason, why := PodToRecreate(m, mem, resources.Options{})
				if want && (reason != "RecreatingMember" || !strings.HasPrefix(why, "built from an older spec, its etcd not running: etcd container CrashLoopBackOff")) {
					t.Errorf("%s: PodToRecreate = %q, %q; want RecreatingMember, built from an older spec", name, reason, why)
				}
			}
		})
	}
}
