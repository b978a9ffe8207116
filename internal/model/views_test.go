package model

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestPlannerViews: the membership view counts a member with a NOSPACE alarm as healthy and carries
// the pods and claims of names etcd does not list (a removed member's, still going); the rollout view
// marks a member up to date by its pod's spec hash (one without a pod is: there is nothing to restart)
// and ready by its pod's Ready condition.
func TestPlannerViews(t *testing.T) {
	c := testutil.EtcdCluster("w", testutil.WithReplicas(3))
	ready := pod("w-0", false)
	ready.Annotations = map[string]string{etcdv1beta1.AnnotationSpecHash: "new"}
	ready.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	old := pod("w-1", false)
	old.Annotations = map[string]string{etcdv1beta1.AnnotationSpecHash: "old"}
	e := &Etcd{ClusterID: 1, Leader: 1,
		Members: []etcd.Member{{ID: 1, Name: "w-0"}, {ID: 2, Name: "w-1"}},
		Health:  map[uint64]error{1: nil, 2: etcd.ErrNoSpace},
	}
	m := Build(Input{Cluster: c, Etcd: e, Pods: []corev1.Pod{ready, old, pod("w-5", true)},
		Claims: []corev1.PersistentVolumeClaim{claim("w-5", nil)}})

	ms := m.Membership(map[string]string{"w-1": "down too long"})
	if ms.Replicas != 3 || ms.Leader != 1 || len(ms.Members) != 2 || !ms.Members[1].Healthy || ms.Members[0].Replace != "" || ms.Members[1].Replace != "down too long" {
		t.Errorf("membership view %+v", ms)
	}
	if got := ms.Resources["w-5"]; got != (membership.Resources{PodTerminating: true, Data: true}) {
		t.Errorf("resources of the removed member %+v", got)
	}
	ro := m.Rollout("new")
	if len(ro.Members) != 2 || !ro.Members[0].UpToDate || !ro.Members[0].Ready || ro.Members[1].UpToDate || ro.Members[1].Ready || !ro.Members[1].Healthy {
		t.Errorf("rollout view %+v", ro.Members)
	}
	// a member etcd lists whose pod is gone has nothing to restart: the rollout must not pick it
	// (its pod is recreated, with the current spec, by the phases before)
	gone := Build(Input{Cluster: c, Etcd: e, Pods: []corev1.Pod{ready}})
	if ro := gone.Rollout("new"); len(ro.Members) != 2 || !ro.Members[1].UpToDate || ro.Members[1].Ready {
		t.Errorf("rollout view with w-1's pod gone %+v; want it up to date and not ready", ro.Members)
	}
}

// TestDownSince: a member etcd lists that does not answer is down since the earliest of what the status
// recorded, its pod's Ready condition turning False, and the pass; a member that answers, or one etcd
// does not list, is not down. The time survives the pod being recreated (a new pod's Ready transition
// is later than the recorded time). A member promoted since the status listed it as a learner starts
// again from the pass (etcd promotes only a learner in sync with the leader).
func TestDownSince(t *testing.T) {
	now := time.Date(2026, 12, 1, 3, 10, 0, 0, time.UTC)
	notReadyAt := metav1.NewTime(now.Add(-5 * time.Minute))
	recordedAt := metav1.NewTime(now.Add(-8 * time.Minute))
	down := pod("d-0", false)
	down.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: notReadyAt}}
	up := pod("d-1", false)
	up.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: notReadyAt}}
	recreated := pod("d-2", false)
	recreated.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
	promoted := pod("d-5", false)
	promoted.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: notReadyAt}}
	c := testutil.EtcdCluster("d", testutil.WithReplicas(7))
	c.Status.Members = []etcdv1beta1.MemberStatus{{Name: "d-2", DownSince: &recordedAt}, {Name: "d-4", DownSince: &recordedAt},
		{Name: "d-5", Role: etcdv1beta1.RoleLearner, DownSince: &recordedAt}}
	e := &Etcd{ClusterID: 1, Leader: 2,
		Members: []etcd.Member{{ID: 1, Name: "d-0"}, {ID: 2, Name: "d-1"}, {ID: 3, Name: "d-2"}, {ID: 4, Name: "d-3"}, {ID: 5, Name: "d-4"}, {ID: 6, Name: "d-5"}},
		Health: map[uint64]error{1: errors.New("context deadline exceeded"), 2: nil, 3: errors.New("connection refused"), 5: nil,
			6: errors.New("context deadline exceeded")},
	}
	m := Build(Input{Cluster: c, Etcd: e, Now: now, Pods: []corev1.Pod{down, up, recreated, promoted}})
	for name, want := range map[string]time.Time{
		"d-0": notReadyAt.Time, // down: since its pod stopped being Ready
		"d-1": {},              // answers
		"d-2": recordedAt.Time, // recreated pod: the recorded time is earlier
		"d-3": now,             // not asked, no pod: down from this pass
		"d-4": {},              // answers again: no longer down, whatever was recorded
		"d-5": now,             // promoted since the status listed it a learner: in sync then, down from this pass
	} {
		if got := m.Member(name).DownSince; !got.Equal(want) {
			t.Errorf("%s: DownSince %v, want %v", name, got, want)
		}
	}
}

// TestProblem: a down member's problem names its pod's state, the etcd container's waiting reason and
// last exit, or etcd's error; a member that is not down has none.
func TestProblem(t *testing.T) {
	crash := pod("p-0", false)
	crash.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd",
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}}}
	pull := pod("p-1", false)
	pull.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "failed to pull image \"nope\": not found\nmore"}}}}
	pending := pod("p-2", false)
	pending.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}
	gone := pod("p-3", true)
	healthy := pod("p-5", false)
	c := testutil.EtcdCluster("p", testutil.WithReplicas(5))
	e := &Etcd{ClusterID: 1, Leader: 6,
		Members: []etcd.Member{{ID: 1, Name: "p-0"}, {ID: 2, Name: "p-1"}, {ID: 3, Name: "p-2"}, {ID: 4, Name: "p-3"}, {ID: 5, Name: "p-4"}, {ID: 6, Name: "p-5"}},
		Health:  map[uint64]error{1: errors.New("x"), 2: errors.New("x"), 3: errors.New("x"), 4: errors.New("x"), 5: errors.New("dial tcp: connection refused\nsecond line"), 6: nil},
	}
	m := Build(Input{Cluster: c, Etcd: e, Pods: []corev1.Pod{crash, pull, pending, gone, healthy}})
	for name, want := range map[string]string{
		"p-0": "etcd container CrashLoopBackOff (last exit code 2, Error)",
		"p-1": `etcd container ErrImagePull: failed to pull image "nope": not found`,
		"p-2": "pod not scheduled: Unschedulable 0/1 nodes are available",
		"p-3": "pod terminating",
		"p-4": "no pod",
		"p-5": "",
	} {
		if got := m.Member(name).Problem(); got != want {
			t.Errorf("%s: Problem %q, want %q", name, got, want)
		}
	}
}
