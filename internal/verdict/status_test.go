package verdict

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// observed builds a scope of a 3-member cluster "s" whose pods all exist; health says which member
// IDs (1, 2, 3 for s-0, s-1, s-2) answered; leader is the agreed leader; tweaks change the input before
// the model is built.
func observed(clusterID string, etcdUp bool, healthy map[uint64]bool, leader uint64, learner uint64, tweaks ...func(*model.Input)) *scope {
	c := &etcdv1beta1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Generation: 4},
		Spec:       etcdv1beta1.EtcdClusterSpec{Replicas: ptr.To[int32](3)},
		Status:     etcdv1beta1.EtcdClusterStatus{ClusterID: clusterID},
	}
	in := model.Input{Cluster: c}
	for _, name := range []string{"s-0", "s-1", "s-2"} {
		in.Pods = append(in.Pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{etcdv1beta1.AnnotationSpecHash: resources.Options{}.SpecHash(c)}}, Spec: testutil.PlainTextMemberSpec()})
	}
	if etcdUp {
		obs := &model.Etcd{ClusterID: 0xabc, Leader: leader, Status: map[uint64]etcd.EndpointStatus{}, Health: map[uint64]error{}}
		for i, name := range []string{"s-0", "s-1", "s-2"} {
			id := uint64(i + 1)
			obs.Members = append(obs.Members, etcd.Member{ID: id, Name: name, PeerURLs: []string{"http://" + name + ":2380"}, IsLearner: id == learner})
			if healthy[id] {
				obs.Health[id] = nil
				// a member that serves passes its readiness probe: its pod is Ready
				in.Pods[i].Status = corev1.PodStatus{Phase: corev1.PodRunning,
					Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
				obs.Status[id] = etcd.EndpointStatus{Version: "3.6.16", DBSizeBytes: 100, Leader: leader}
			} else {
				obs.Health[id] = errors.New("timeout")
			}
		}
		in.Etcd = obs
	} else {
		in.EtcdErr = errors.New("no member answered")
	}
	for _, tweak := range tweaks {
		tweak(&in)
	}
	return &scope{cluster: c, m: model.Build(in), report: &Report{}}
}

// rolledOnto gives every member a claim, and records on member i's that a rolling update restarted it
// onto the spec of hash ("": the current spec).
func rolledOnto(i int, hash string) func(*model.Input) {
	return func(in *model.Input) {
		if hash == "" {
			hash = resources.Options{}.SpecHash(in.Cluster)
		}
		for j, name := range []string{"s-0", "s-1", "s-2"} {
			pvc := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName(name)}}
			if j == i {
				pvc.Annotations = map[string]string{etcdv1beta1.AnnotationRolledOnto: hash}
			}
			in.Claims = append(in.Claims, pvc)
		}
	}
}

func TestComputeStatus(t *testing.T) {
	all := map[uint64]bool{1: true, 2: true, 3: true}
	tests := []struct {
		name                string
		s                   *scope
		phase               etcdv1beta1.ClusterPhase
		available, degraded metav1.ConditionStatus
		availableReason     string
		ready               int32
		leader              string
	}{
		{"bootstrapping, nothing answers", observed("", false, nil, 0, 0),
			etcdv1beta1.PhaseCreating, metav1.ConditionFalse, metav1.ConditionTrue, etcdv1beta1.ReasonBootstrapping, 0, ""},
		{"all healthy", observed("", true, all, 2, 0),
			etcdv1beta1.PhaseRunning, metav1.ConditionTrue, metav1.ConditionFalse, etcdv1beta1.ReasonQuorumHealthy, 3, "s-1"},
		{"all healthy, no pod Ready yet: the client Service routes to none", observed("abc", true, all, 2, 0, func(in *model.Input) {
			for i := range in.Pods {
				in.Pods[i].Status.Conditions = nil
			}
		}), etcdv1beta1.PhaseRunning, metav1.ConditionFalse, metav1.ConditionFalse, etcdv1beta1.ReasonClientServiceNotReady, 3, "s-1"},
		{"all healthy, one pod Ready: clients are served", observed("abc", true, all, 2, 0, func(in *model.Input) {
			in.Pods[0].Status.Conditions, in.Pods[1].Status.Conditions = nil, nil
		}), etcdv1beta1.PhaseRunning, metav1.ConditionTrue, metav1.ConditionFalse, etcdv1beta1.ReasonQuorumHealthy, 3, "s-1"},
		{"one down keeps quorum", observed("abc", true, map[uint64]bool{1: true, 2: true}, 1, 0),
			etcdv1beta1.PhaseDegraded, metav1.ConditionTrue, metav1.ConditionTrue, etcdv1beta1.ReasonQuorumHealthy, 2, "s-0"},
		{"two down lose quorum", observed("abc", true, map[uint64]bool{1: true}, 0, 0),
			etcdv1beta1.PhaseQuorumLost, metav1.ConditionFalse, metav1.ConditionTrue, etcdv1beta1.ReasonQuorumLost, 1, ""},
		{"formed, nothing answers", observed("abc", false, nil, 0, 0),
			etcdv1beta1.PhaseQuorumLost, metav1.ConditionFalse, metav1.ConditionTrue, etcdv1beta1.ReasonQuorumLost, 0, ""},
		{"a learner is not a ready voter", observed("abc", true, all, 1, 3),
			etcdv1beta1.PhaseScaling, metav1.ConditionTrue, metav1.ConditionTrue, etcdv1beta1.ReasonQuorumHealthy, 2, "s-0"},
		{"a pod of an older spec is being rolled", observed("abc", true, all, 1, 0, func(in *model.Input) {
			in.Pods[2].Annotations[etcdv1beta1.AnnotationSpecHash] = "old"
		}), etcdv1beta1.PhaseUpgrading, metav1.ConditionTrue, metav1.ConditionFalse, etcdv1beta1.ReasonQuorumHealthy, 3, "s-0"},
		{"the last member a rolling update restarted starts on the current spec", observed("abc", true, map[uint64]bool{1: true, 2: true}, 1, 0, rolledOnto(2, "")),
			etcdv1beta1.PhaseUpgrading, metav1.ConditionTrue, metav1.ConditionTrue, etcdv1beta1.ReasonQuorumHealthy, 2, "s-0"},
		{"the last member a rolling update restarted crash-loops", observed("abc", true, map[uint64]bool{1: true, 2: true}, 1, 0, rolledOnto(2, ""), func(in *model.Input) {
			in.Pods[2].Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.EtcdContainer,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
		}), etcdv1beta1.PhaseDegraded, metav1.ConditionTrue, metav1.ConditionTrue, etcdv1beta1.ReasonQuorumHealthy, 2, "s-0"},
		{"a member down whose claim records an older spec", observed("abc", true, map[uint64]bool{1: true, 2: true}, 1, 0, rolledOnto(2, "old")),
			etcdv1beta1.PhaseDegraded, metav1.ConditionTrue, metav1.ConditionTrue, etcdv1beta1.ReasonQuorumHealthy, 2, "s-0"},
		{"one NOSPACE alarm stops writes: not available, not lost", observed("abc", true, all, 1, 0, func(in *model.Input) {
			in.Etcd.Health[2] = fmt.Errorf("health: %w: %w", etcd.ErrAlarm, etcd.ErrNoSpace)
		}), etcdv1beta1.PhaseDegraded, metav1.ConditionFalse, metav1.ConditionTrue, etcdv1beta1.ReasonNoSpace, 2, "s-0"},
		{"NOSPACE and a member down: a serving quorum refuses writes", observed("abc", true, map[uint64]bool{1: true}, 1, 0, func(in *model.Input) {
			in.Etcd.Health[2] = fmt.Errorf("health: %w: %w", etcd.ErrAlarm, etcd.ErrNoSpace)
			in.Etcd.Health[3] = errors.New("timeout")
		}), etcdv1beta1.PhaseDegraded, metav1.ConditionFalse, metav1.ConditionTrue, etcdv1beta1.ReasonNoSpace, 1, "s-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			Status(tt.s.cluster, tt.s.m, tt.s.report, nil, resources.Options{}, true)
			st := tt.s.cluster.Status
			if st.Phase != tt.phase {
				t.Errorf("phase = %s, want %s", st.Phase, tt.phase)
			}
			a := meta.FindStatusCondition(st.Conditions, etcdv1beta1.ConditionAvailable)
			if a.Status != tt.available || a.Reason != tt.availableReason {
				t.Errorf("Available = %s/%s (%s), want %s/%s", a.Status, a.Reason, a.Message, tt.available, tt.availableReason)
			}
			if a.ObservedGeneration != 4 || st.ObservedGeneration != 4 {
				t.Errorf("observedGeneration: condition %d, status %d, want 4", a.ObservedGeneration, st.ObservedGeneration)
			}
			if d := meta.FindStatusCondition(st.Conditions, etcdv1beta1.ConditionDegraded); d.Status != tt.degraded {
				t.Errorf("Degraded = %s (%s), want %s", d.Status, d.Message, tt.degraded)
			}
			if st.ReadyReplicas != tt.ready || st.Leader != tt.leader {
				t.Errorf("ready %d leader %q, want %d %q", st.ReadyReplicas, st.Leader, tt.ready, tt.leader)
			}
			if st.Replicas != 3 || st.Selector == "" || st.ClientService != "s-client" {
				t.Errorf("replicas %d selector %q clientService %q", st.Replicas, st.Selector, st.ClientService)
			}
		})
	}
}

// TestComputeStatusStable: computing the status twice from the same observation changes nothing, so
// a pass that observes nothing new writes nothing.
func TestComputeStatusStable(t *testing.T) {
	s := observed("", true, map[uint64]bool{1: true, 2: true, 3: true}, 1, 0)
	Status(s.cluster, s.m, s.report, nil, resources.Options{}, true)
	first := s.cluster.Status.DeepCopy()
	Status(s.cluster, s.m, s.report, nil, resources.Options{}, true)
	if !StatusEqual(first, &s.cluster.Status) {
		t.Errorf("status changed on a second computation:\n%+v\n%+v", first, s.cluster.Status)
	}
}

func TestFailedPassKeepsObservedGeneration(t *testing.T) {
	s := observed("abc", true, map[uint64]bool{1: true, 2: true, 3: true}, 1, 0)
	s.cluster.Status.ObservedGeneration = 3
	Status(s.cluster, s.m, s.report, nil, resources.Options{}, false)
	if s.cluster.Status.ObservedGeneration != 3 {
		t.Errorf("observedGeneration advanced to %d on a failed pass", s.cluster.Status.ObservedGeneration)
	}
}

// TestAwaitHealthy: with nothing else to do, a member that is not healthy makes the pass wait for it
// (Progressing False, naming it and when its pod is recreated and it is replaced, that it is neither
// while it waits for its image, or that it is replaced once its pod is gone when its data goes with
// it); a member starting on a new pod that shows no problem is waited for as progress (Progressing
// True, WaitingForMembers); a NOSPACE alarm alone does not; a healthy cluster has no step.
func TestAwaitHealthy(t *testing.T) {
	all := map[uint64]bool{1: true, 2: true, 3: true}
	if st := AwaitHealthy(observed("abc", true, all, 1, 0).m); st != nil {
		t.Errorf("healthy cluster: step %+v", st)
	}
	down := observed("abc", true, map[uint64]bool{1: true, 3: true}, 1, 0).m
	since := down.Member("s-1").DownSince.UTC()
	want := fmt.Sprintf("Waiting for s-1 (its pod is recreated at %s if it is still down; replaced at %s) to become healthy",
		since.Add(2*time.Minute+30*time.Second).Format(time.RFC3339), since.Add(5*time.Minute).Format(time.RFC3339))
	st := AwaitHealthy(down)
	if st == nil || st.Kind != KindStalled || st.Reason != etcdv1beta1.ReasonMembersUnhealthy || st.Message != want {
		t.Errorf("one member down: step %+v, want the message %q", st, want)
	}
	stopping := observed("abc", true, map[uint64]bool{1: true, 3: true}, 1, 0, func(in *model.Input) {
		in.Pods[1].DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}).m
	want = "Waiting for s-1 (its pod is stopping and its data is deleted: it is replaced once the pod is gone) to become healthy"
	if st := AwaitHealthy(stopping); st == nil || st.Message != want {
		t.Errorf("a member whose pod stops without a claim: step %+v, want the message %q", st, want)
	}
	made := time.Now().Add(-5 * time.Second).UTC().Truncate(time.Second)
	wentDown := metav1.NewTime(made.Add(-10 * time.Second))
	restarted := observed("abc", true, map[uint64]bool{1: true, 3: true}, 1, 0, func(in *model.Input) {
		in.Pods[1].CreationTimestamp = metav1.NewTime(made)
		in.Cluster.Status.Members = []etcdv1beta1.MemberStatus{{Name: "s-1", DownSince: &wentDown}} // down before its pod was made
	}).m
	want = "Waiting for s-1 (its pod was made at " + made.Format(time.RFC3339) + ") to start, catch up and be Ready"
	if st := AwaitHealthy(restarted); st == nil || st.Kind != KindActing || st.Reason != etcdv1beta1.ReasonWaitingForMembers || st.Message != want {
		t.Errorf("a member starting on a new pod: step %+v, want Acting/WaitingForMembers %q", st, want)
	}
	notReady := observed("abc", true, all, 1, 0, func(in *model.Input) {
		in.Pods[2].CreationTimestamp = metav1.NewTime(made)
		in.Pods[2].Status.Conditions = nil // etcd serves; the kubelet's readiness probe has not passed yet
	}).m
	want = "Waiting for s-2 (serves; its pod, made at " + made.Format(time.RFC3339) + ", is not Ready yet) to start, catch up and be Ready"
	if st := AwaitHealthy(notReady); st == nil || st.Kind != KindActing || st.Reason != etcdv1beta1.ReasonWaitingForMembers || st.Message != want || !st.Watched {
		t.Errorf("a member that serves, its new pod (no readiness gate) not Ready: step %+v, want Acting/WaitingForMembers %q, Watched (the kubelet's report wakes a pass)", st, want)
	}
	if st := AwaitHealthy(restarted); st == nil || st.Watched {
		t.Errorf("a member starting on a new pod: step %+v, want one not Watched (etcd's answers are no pod update)", st)
	}
	if st := AwaitHealthy(notReady); st == nil || st.After <= 50*time.Second || st.After > 55*time.Second {
		t.Errorf("a member that serves, its pod made 5 s ago: step %+v, want After about 55 s (when the pod stops being new)", st)
	}
	mixed := observed("abc", true, map[uint64]bool{1: true, 3: true}, 1, 0, func(in *model.Input) {
		in.Pods[1].CreationTimestamp = metav1.NewTime(made)
		in.Cluster.Status.Members = []etcdv1beta1.MemberStatus{{Name: "s-1", DownSince: &wentDown}}
		in.Pods[2].CreationTimestamp = metav1.NewTime(made)
		in.Pods[2].Status.Conditions = nil
	}).m
	if st := AwaitHealthy(mixed); st == nil || st.Kind != KindActing || st.Watched {
		t.Errorf("one member starting, one serving with its pod not Ready: step %+v, want Acting, not Watched", st)
	}
	for _, gate := range []corev1.ConditionStatus{"", corev1.ConditionFalse, corev1.ConditionTrue} {
		gated := observed("abc", true, all, 1, 0, func(in *model.Input) {
			in.Pods[2].CreationTimestamp = metav1.NewTime(made)
			in.Pods[2].Status.Conditions = nil
			in.Pods[2].Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: resources.ServingCondition}}
			if gate != "" {
				in.Pods[2].Status.Conditions = []corev1.PodCondition{{Type: resources.ServingCondition, Status: gate}}
			}
		}).m
		st := AwaitHealthy(gated)
		if want := gate == corev1.ConditionTrue; st == nil || st.Watched != want {
			t.Errorf("a member that serves, its new pod's gate %q: step %+v, want Watched %v (only once the operator has marked it)", gate, st, want)
		}
	}
	oldNotReady := observed("abc", true, all, 1, 0, func(in *model.Input) { in.Pods[2].Status.Conditions = nil }).m
	if st := AwaitHealthy(oldNotReady); st != nil {
		t.Errorf("a member that serves, its old pod not Ready (a probe that fails for another reason): step %+v, want none", st)
	}
	stoppedOnIt := observed("abc", true, map[uint64]bool{1: true, 3: true}, 1, 0, func(in *model.Input) {
		in.Pods[1].CreationTimestamp = metav1.NewTime(made) // it served on this pod, then stopped: not starting
	}).m
	if st := AwaitHealthy(stoppedOnIt); st == nil || st.Kind != KindStalled {
		t.Errorf("a member that went down on its young pod: step %+v, want Stalled", st)
	}
	crashing := observed("abc", true, map[uint64]bool{1: true, 3: true}, 1, 0, func(in *model.Input) {
		in.Pods[1].CreationTimestamp = metav1.NewTime(made)
		in.Pods[1].Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	}).m
	if st := AwaitHealthy(crashing); st == nil || st.Kind != KindStalled || !strings.Contains(st.Message, "its pod is recreated at") {
		t.Errorf("a new pod that crash-loops: step %+v, want Stalled with the repair times", st)
	}
	pulling := observed("abc", true, map[uint64]bool{1: true, 3: true}, 1, 0, func(in *model.Input) {
		in.Pods[1].Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
	}).m
	if st := AwaitHealthy(pulling); st == nil || st.Kind != KindStalled || !strings.Contains(st.Message, "waits for its image: it is neither recreated nor replaced") {
		t.Errorf("a member waiting for its image: step %+v, want Stalled saying it is not recreated or replaced", st)
	}
	noSpace := observed("abc", true, all, 1, 0, func(in *model.Input) {
		in.Etcd.Health[2] = fmt.Errorf("health: %w: %w", etcd.ErrAlarm, etcd.ErrNoSpace)
	})
	if st := AwaitHealthy(noSpace.m); st != nil {
		t.Errorf("NOSPACE alone: step %+v", st)
	}
}

// TestRestartLosesData: only a 1-member emptyDir cluster loses its data with a restart.
func TestRestartLosesData(t *testing.T) {
	for _, tc := range []struct {
		c    *etcdv1beta1.EtcdCluster
		want bool
	}{
		{testutil.EtcdCluster("a", testutil.WithReplicas(1), testutil.WithEmptyDir()), true},
		{testutil.EtcdCluster("a", testutil.WithReplicas(3), testutil.WithEmptyDir()), false},
		{testutil.EtcdCluster("a", testutil.WithReplicas(1)), false},
	} {
		if got := RestartLosesData(tc.c); got != tc.want {
			t.Errorf("%d members, emptyDir %v: %v, want %v", tc.c.Spec.ReplicasOrDefault(), tc.c.Spec.Storage.EmptyDir != nil, got, tc.want)
		}
	}
}

// TestUnreachableIsNotQuorumLost: when no member answers the operator but a quorum of the member pods
// are Ready, the operator is cut off from the members: the phase is Unreachable and Available says to
// check the network, not that quorum is lost; with the pods not Ready it is QuorumLost. A pass that
// stopped before observing changes only Progressing.
func TestUnreachableIsNotQuorumLost(t *testing.T) {
	recorded := func(ready int) func(*model.Input) {
		return func(in *model.Input) {
			for i, name := range []string{"s-0", "s-1", "s-2"} {
				in.Cluster.Status.Members = append(in.Cluster.Status.Members,
					etcdv1beta1.MemberStatus{Name: name, ID: fmt.Sprint(i + 1), Role: etcdv1beta1.RoleVoter})
				if i < ready {
					in.Pods[i].Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
						Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
				}
			}
		}
	}
	for _, tc := range []struct {
		ready  int
		phase  etcdv1beta1.ClusterPhase
		reason string
		says   string
	}{
		{2, etcdv1beta1.PhaseUnreachable, etcdv1beta1.ReasonEtcdUnreachable, "the operator is cut off from the members"},
		{1, etcdv1beta1.PhaseQuorumLost, etcdv1beta1.ReasonQuorumLost, "Ready member pods: 1, fewer than the quorum of 2: quorum is lost"},
	} {
		s := observed("abc", false, nil, 0, 0, recorded(tc.ready))
		Status(s.cluster, s.m, s.report, nil, resources.Options{}, true)
		a := meta.FindStatusCondition(s.cluster.Status.Conditions, etcdv1beta1.ConditionAvailable)
		if s.cluster.Status.Phase != tc.phase || a == nil || a.Reason != tc.reason || !strings.Contains(a.Message, tc.says) {
			t.Errorf("%d pods Ready: phase %s, Available %+v; want phase %s, reason %s saying %q", tc.ready, s.cluster.Status.Phase, a, tc.phase, tc.reason, tc.says)
		}
	}

	s := observed("abc", true, map[uint64]bool{1: true, 2: true, 3: true}, 1, 0)
	Status(s.cluster, s.m, s.report, nil, resources.Options{}, true)
	before := s.cluster.Status.DeepCopy()
	notObserved := model.Build(model.Input{Cluster: s.cluster, EtcdErr: model.ErrNotObserved})
	Status(s.cluster, notObserved, &Report{}, Acting(etcdv1beta1.ReasonReconcileError, "create service: boom"), resources.Options{}, false)
	p := meta.FindStatusCondition(s.cluster.Status.Conditions, etcdv1beta1.ConditionProgressing)
	if p == nil || p.Reason != etcdv1beta1.ReasonReconcileError {
		t.Errorf("Progressing %+v after a pass that did not observe, want its step", p)
	}
	for _, cond := range before.Conditions {
		if cond.Type == etcdv1beta1.ConditionProgressing {
			continue
		}
		if got := meta.FindStatusCondition(s.cluster.Status.Conditions, cond.Type); got == nil || got.Status != cond.Status || got.Message != cond.Message {
			t.Errorf("condition %s changed by a pass that did not observe: %+v -> %+v", cond.Type, cond, got)
		}
	}
	if s.cluster.Status.Phase != before.Phase || len(s.cluster.Status.Members) != len(before.Members) || s.cluster.Status.Replicas != before.Replicas {
		t.Errorf("status changed by a pass that did not observe: %+v -> %+v", before, s.cluster.Status)
	}
}

// TestNoCommonLeaderSaysSo: every voter healthy but no leader agreed on (the statuses were read during
// an election): not Available, and the message says why instead of "3 of 3 healthy; quorum needs 2".
func TestNoCommonLeaderSaysSo(t *testing.T) {
	s := observed("abc", true, map[uint64]bool{1: true, 2: true, 3: true}, 0, 0)
	Status(s.cluster, s.m, s.report, nil, resources.Options{}, true)
	a := meta.FindStatusCondition(s.cluster.Status.Conditions, etcdv1beta1.ConditionAvailable)
	if a.Status != metav1.ConditionFalse || !strings.Contains(a.Message, "3 of 3 voting members are healthy, a quorum, but they report no common leader") {
		t.Errorf("Available = %s (%s), want False saying the healthy quorum reports no common leader", a.Status, a.Message)
	}
}

// TestDivergedMemberReplaced: a member that serves but whose pod records that its data diverged from
// the majority's is due to be replaced at once, and the membership planner counts it as not healthy
// (so that it removes it); not with replacing off (0s), and not a member without the record.
func TestDivergedMemberReplaced(t *testing.T) {
	all := map[uint64]bool{1: true, 2: true, 3: true}
	diverged := func(in *model.Input) {
		in.Pods[1].Annotations[etcdv1beta1.AnnotationDataDiverged] = "at revision 100 its key-value hash is 00000008"
	}
	s := observed("abc", true, all, 1, 0, diverged)
	if got, want := ReplaceDue(s.m, s.m.Member("s-1")), "its data diverged from its peers' (at revision 100 its key-value hash is 00000008)"; got != want {
		t.Errorf("ReplaceDue(s-1) = %q, want %q", got, want)
	}
	if got := ReplaceDue(s.m, s.m.Member("s-0")); got != "" {
		t.Errorf("ReplaceDue(s-0) = %q, want none", got)
	}
	next := membership.Next(s.m.Membership(Replacements(s.m)))
	if next.Kind != membership.Remove || next.Member != "s-1" || !next.Replacing {
		t.Errorf("next membership action %+v, want s-1 removed to be replaced", next)
	}
	off := observed("abc", true, all, 1, 0, diverged, func(in *model.Input) {
		in.Cluster.Spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{}}
	})
	if got := ReplaceDue(off.m, off.m.Member("s-1")); got != "" {
		t.Errorf("replacing off: ReplaceDue(s-1) = %q, want none", got)
	}
}

// TestDegradedSaysRollingUpdate: Degraded names a member that a rolling update restarts onto the
// current spec as restarting, while its old pod terminates and while its new pod starts without a
// problem; one that crash-loops on its new pod, or whose claim records an older spec, is down.
func TestDegradedSaysRollingUpdate(t *testing.T) {
	const restarting = "s-2 is restarting onto the current spec (rolling update), not serving yet, since "
	terminating := func(in *model.Input) {
		in.Pods[2].Annotations[etcdv1beta1.AnnotationSpecHash] = "old"
		in.Pods[2].DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	crashLoop := func(in *model.Input) {
		in.Pods[2].Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.EtcdContainer,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	}
	down := map[uint64]bool{1: true, 2: true}
	for _, tc := range []struct {
		name       string
		s          *scope
		restarting bool
	}{
		{"old pod terminating", observed("abc", true, down, 1, 0, rolledOnto(2, ""), terminating), true},
		{"new pod starting", observed("abc", true, down, 1, 0, rolledOnto(2, "")), true},
		{"new pod crash-looping", observed("abc", true, down, 1, 0, rolledOnto(2, ""), crashLoop), false},
		{"claim records an older spec", observed("abc", true, down, 1, 0, rolledOnto(2, "old")), false},
		{"no record", observed("abc", true, down, 1, 0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			Status(tc.s.cluster, tc.s.m, tc.s.report, nil, resources.Options{}, true)
			d := meta.FindStatusCondition(tc.s.cluster.Status.Conditions, etcdv1beta1.ConditionDegraded)
			if d == nil || d.Status != metav1.ConditionTrue {
				t.Fatalf("Degraded %+v, want True", d)
			}
			if got := strings.Contains(d.Message, restarting); got != tc.restarting {
				t.Errorf("Degraded %q: says restarting %v, want %v", d.Message, got, tc.restarting)
			}
			if tc.restarting && !strings.Contains(d.Message, "unless it serves") {
				t.Errorf("Degraded %q: want the replacement countdown", d.Message)
			}
		})
	}
}

// TestJustJoinedIsScaling: a member added and promoted moments ago that does not serve yet
// (model.Member.Joining) is the scale-up still under way: phase Scaling, and the pass waits for it as
// progress (Progressing True, WaitingForMembers), not as a member down (False, MembersUnhealthy).
func TestJustJoinedIsScaling(t *testing.T) {
	s := observed("abc", true, map[uint64]bool{1: true, 2: true}, 1, 0, func(in *model.Input) {
		p := &in.Pods[2]
		p.CreationTimestamp = metav1.NewTime(time.Now().Add(-20 * time.Second))
		p.Spec.Containers = []corev1.Container{{Name: resources.EtcdContainer, Command: []string{"/usr/local/bin/etcd", "--name=s-2", "--initial-cluster-state=existing"}}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.EtcdContainer,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-2 * time.Second))}}}}
	})
	if !s.m.Member("s-2").Joining(s.m.Now) {
		t.Fatal("the fixture's s-2 is not joining")
	}
	st := AwaitHealthy(s.m)
	if st == nil || st.Kind != KindActing || st.Reason != etcdv1beta1.ReasonWaitingForMembers || !strings.Contains(st.Message, "s-2 (joined; it serves once it has published its name through raft") {
		t.Errorf("step %+v, want Acting/WaitingForMembers naming s-2 as joined", st)
	}
	Status(s.cluster, s.m, s.report, st, resources.Options{}, true)
	if s.cluster.Status.Phase != etcdv1beta1.PhaseScaling {
		t.Errorf("phase %s, want Scaling", s.cluster.Status.Phase)
	}
	if p := meta.FindStatusCondition(s.cluster.Status.Conditions, etcdv1beta1.ConditionProgressing); p == nil || p.Status != metav1.ConditionTrue {
		t.Errorf("Progressing %+v, want True", p)
	}
}

// TestJoinedVoterInRaftKeepsQuorum: in a scale-up from one member, the first new voter may not serve
// for 7 s after it joined (etcd-io/etcd#16436), and the cluster then has two voters of which one
// serves. Once the new voter's readiness probe passes (it takes part in raft), it counts for quorum:
// the cluster is Available and Scaling, not QuorumLost. Before that, Available is False for that
// reason (MemberJoining), still Scaling; a new member whose etcd restarted is no longer joining, and
// quorum is lost.
func TestJoinedVoterInRaftKeepsQuorum(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ready    bool
		restarts int32
		want     metav1.ConditionStatus
		reason   string
		message  string
		phase    etcdv1beta1.ClusterPhase
	}{
		{"its probe passed", true, 0, metav1.ConditionTrue, etcdv1beta1.ReasonQuorumHealthy,
			"1 of 2 voting members are healthy, and s-1 joined moments ago and takes part in raft", etcdv1beta1.PhaseScaling},
		{"its probe has not passed yet", false, 0, metav1.ConditionFalse, etcdv1beta1.ReasonMemberJoining,
			"s-1 joined moments ago and counts for quorum (2) once its readiness probe passes", etcdv1beta1.PhaseScaling},
		{"its etcd restarted: not joining", false, 1, metav1.ConditionFalse, etcdv1beta1.ReasonQuorumLost,
			"1 of 2 voting members are healthy; quorum needs 2", etcdv1beta1.PhaseQuorumLost},
	} {
		s := observed("abc", true, map[uint64]bool{1: true}, 1, 0, func(in *model.Input) {
			in.Etcd.Members = in.Etcd.Members[:2] // s-2 is not added yet
			in.Pods = in.Pods[:2]
			p := &in.Pods[1]
			p.CreationTimestamp = metav1.NewTime(time.Now().Add(-10 * time.Second))
			p.Spec.Containers = []corev1.Container{{Name: resources.EtcdContainer, Command: []string{"/usr/local/bin/etcd", "--name=s-1", "--initial-cluster-state=existing"}}}
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: resources.EtcdContainer,
				Ready: tc.ready, RestartCount: tc.restarts,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-3 * time.Second))}}}}}
		})
		Status(s.cluster, s.m, s.report, AwaitHealthy(s.m), resources.Options{}, true)
		a := meta.FindStatusCondition(s.cluster.Status.Conditions, etcdv1beta1.ConditionAvailable)
		if a == nil || a.Status != tc.want || a.Reason != tc.reason || !strings.Contains(a.Message, tc.message) {
			t.Errorf("%s: Available %+v, want %s/%s with %q", tc.name, a, tc.want, tc.reason, tc.message)
		}
		if s.cluster.Status.Phase != tc.phase {
			t.Errorf("%s: phase %s, want %s", tc.name, s.cluster.Status.Phase, tc.phase)
		}
	}
}

// TestLastMemberNotReadyKeepsThePhase: when the last member of a rollout or a scale-up serves and its
// new pod is not Ready yet, the phase stays what it was (Upgrading, Scaling) while Progressing is True
// (WaitingForMembers), so that the phase turns Running with Progressing False; a cluster that was
// Running stays Running.
func TestLastMemberNotReadyKeepsThePhase(t *testing.T) {
	for _, was := range []etcdv1beta1.ClusterPhase{etcdv1beta1.PhaseUpgrading, etcdv1beta1.PhaseScaling, etcdv1beta1.PhaseRunning} {
		s := observed("abc", true, map[uint64]bool{1: true, 2: true, 3: true}, 1, 0, func(in *model.Input) {
			in.Cluster.Status.Phase = was
			p := &in.Pods[2]
			p.CreationTimestamp = metav1.NewTime(time.Now().Add(-5 * time.Second))
			p.Status.Conditions = nil // serves, not Ready yet
		})
		st := AwaitHealthy(s.m)
		if st == nil || st.Reason != etcdv1beta1.ReasonWaitingForMembers {
			t.Fatalf("step %+v, want WaitingForMembers", st)
		}
		Status(s.cluster, s.m, s.report, st, resources.Options{}, true)
		if s.cluster.Status.Phase != was {
			t.Errorf("was %s: phase %s, want it kept", was, s.cluster.Status.Phase)
		}
	}
}

// TestDegradedSaysRollingReplace: on emptyDir, a member whose pod of an older spec is stopping is being
// replaced by the rolling update (its data goes with its pod), which Degraded says, with no countdown;
// a stopping pod of the current spec is a member down.
func TestDegradedSaysRollingReplace(t *testing.T) {
	emptyDir := func(outdated bool) func(*model.Input) {
		return func(in *model.Input) {
			in.Cluster.Spec.Storage.EmptyDir = &corev1.EmptyDirVolumeSource{}
			if outdated {
				in.Pods[2].Annotations[etcdv1beta1.AnnotationSpecHash] = "old"
			}
			in.Pods[2].DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
	}
	const replacing = "s-2 is being replaced by a member of the current spec since "
	for _, tc := range []struct {
		name      string
		outdated  bool
		replacing bool
	}{{"pod of an older spec stopping", true, true}, {"pod of the current spec stopping", false, false}} {
		s := observed("abc", true, map[uint64]bool{1: true, 2: true}, 1, 0, emptyDir(tc.outdated))
		Status(s.cluster, s.m, s.report, nil, resources.Options{}, true)
		d := meta.FindStatusCondition(s.cluster.Status.Conditions, etcdv1beta1.ConditionDegraded)
		if d == nil || strings.Contains(d.Message, replacing) != tc.replacing || (tc.replacing && strings.Contains(d.Message, "replaced at")) {
			t.Errorf("%s: Degraded %+v, want being replaced %v and no countdown", tc.name, d, tc.replacing)
		}
	}
}

// TestDegradedSaysClaimDeleted: a member whose claim is being deleted while its pod runs makes the
// cluster Degraded although every member serves, and the message says its data goes when its pod
// stops and what the operator does: replace it once every other member serves, nothing while paused,
// and wait for the pod with replacement off. With another member down, both are said.
func TestDegradedSaysClaimDeleted(t *testing.T) {
	deleted := metav1.NewTime(time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC))
	claims := func(in *model.Input) {
		for _, name := range []string{"s-0", "s-1", "s-2"} {
			pvc := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName(name)}}
			if name == "s-1" {
				pvc.DeletionTimestamp = &deleted
			}
			in.Claims = append(in.Claims, pvc)
		}
	}
	const doomed = "the claim data-s-1 of s-1 is being deleted (since 2026-12-06T04:00:00Z): its data goes when its pod stops; "
	all := map[uint64]bool{1: true, 2: true, 3: true}
	for _, tc := range []struct {
		name    string
		healthy map[uint64]bool
		tweak   func(*model.Input)
		want    []string
	}{
		{"every member serves", all, func(*model.Input) {}, []string{"All 3 members are healthy voters, but " + doomed + "s-1 is replaced once every other member serves"}},
		{"paused", all, func(in *model.Input) { in.Cluster.Spec.Paused = true }, []string{doomed + "the cluster is paused: nothing is done"}},
		{"replacement off", all, func(in *model.Input) {
			in.Cluster.Spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{}}
		}, []string{doomed + "spec.recovery.replaceUnhealthyMemberAfter is 0s: s-1 is replaced once its pod stops"}},
		{"another member down", map[uint64]bool{1: true, 2: true}, func(*model.Input) {}, []string{"s-2 is down since", "; and " + doomed}},
		{"a learner", all, func(in *model.Input) { in.Etcd.Members[1].IsLearner = true },
			[]string{doomed + "s-1 is a learner being added, whose data is a copy of the voters': it is removed and its pod deleted at once, and a new learner joins on a new claim"}},
		{"the only member", all, func(in *model.Input) {
			in.Cluster.Spec.Replicas = ptr.To[int32](1)
			in.Etcd.Members = in.Etcd.Members[1:2] // s-1
			in.Pods, in.Claims = in.Pods[1:2], in.Claims[1:2]
		}, []string{"The only member is a healthy voter, but " + doomed + "s-1 is the only member, so it is not replaced (its data has no other copy)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := observed("abc", true, tc.healthy, 1, 0, claims, tc.tweak)
			Status(s.cluster, s.m, s.report, nil, resources.Options{}, true)
			d := meta.FindStatusCondition(s.cluster.Status.Conditions, etcdv1beta1.ConditionDegraded)
			if d == nil || d.Status != metav1.ConditionTrue || d.Reason != etcdv1beta1.ReasonMembersUnhealthy {
				t.Fatalf("Degraded %+v, want True, MembersUnhealthy", d)
			}
			for _, w := range tc.want {
				if !strings.Contains(d.Message, w) {
					t.Errorf("Degraded says %q, want %q in it", d.Message, w)
				}
			}
		})
	}
	s := observed("abc", true, all, 1, 0, claims, func(in *model.Input) { in.Claims[1].DeletionTimestamp = nil })
	Status(s.cluster, s.m, s.report, nil, resources.Options{}, true)
	if d := meta.FindStatusCondition(s.cluster.Status.Conditions, etcdv1beta1.ConditionDegraded); d == nil || d.Status != metav1.ConditionFalse {
		t.Errorf("no claim being deleted: Degraded %+v, want False", d)
	}
}

// TestDegradedSaysPodlessRecreated: a member down without a pod, its claim kept, is said to be
// recreated on its data, with no replacement countdown (the policy does not replace it: its new pod
// would be made from the same spec); with its claim gone too, that is not said (it is replaced).
func TestDegradedSaysPodlessRecreated(t *testing.T) {
	const recreated = "s-2 is down since"
	for _, tc := range []struct {
		name      string
		keepClaim bool
		want      string
		not       string
	}{
		{"claim kept", true, "its pod is recreated on its data, and it is not replaced meanwhile", "replaced at"},
		{"claim gone", false, recreated, "its pod is recreated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := observed("abc", true, map[uint64]bool{1: true, 2: true}, 1, 0, rolledOnto(-1, ""), func(in *model.Input) {
				in.Pods = in.Pods[:2]
				if !tc.keepClaim {
					in.Claims = in.Claims[:2]
				}
				in.Cluster.Status.Members = []etcdv1beta1.MemberStatus{{Name: "s-2", DownSince: &metav1.Time{Time: time.Now().Add(-time.Minute)}}}
			})
			Status(s.cluster, s.m, s.report, nil, resources.Options{}, true)
			d := meta.FindStatusCondition(s.cluster.Status.Conditions, etcdv1beta1.ConditionDegraded)
			if d == nil || !strings.Contains(d.Message, recreated) || !strings.Contains(d.Message, tc.want) || strings.Contains(d.Message, tc.not) {
				t.Errorf("Degraded %+v, want %q and not %q", d, tc.want, tc.not)
			}
		})
	}
}

// TestProblemWhileNothingAnswers: while no member answers, a member's problem is what its pod shows
// now, not what an earlier status recorded: a pod gone is "no pod", a pod recorded terminating that
// runs again shows none, and a problem recorded from etcd stays.
func TestProblemWhileNothingAnswers(t *testing.T) {
	s := observed("abc", false, nil, 0, 0, func(in *model.Input) {
		in.Cluster.Status.Members = []etcdv1beta1.MemberStatus{
			{Name: "s-0", Problem: "pod terminating"},
			{Name: "s-1", Problem: "pod terminating"},
			{Name: "s-2", Problem: "etcd: context deadline exceeded"},
		}
		in.Pods = []corev1.Pod{in.Pods[0], in.Pods[2]} // s-1's pod is gone
		in.Pods[0].Status = corev1.PodStatus{Phase: corev1.PodRunning}
		in.Pods[1].Status = corev1.PodStatus{Phase: corev1.PodRunning}
	})
	got := map[string]string{}
	for _, ms := range memberStatuses(s.m) {
		got[ms.Name] = ms.Problem
	}
	want := map[string]string{"s-0": "", "s-1": "no pod", "s-2": "etcd: context deadline exceeded"}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: problem %q, want %q", name, got[name], w)
		}
	}
}
