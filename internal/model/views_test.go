package model

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestPlannerViews: the membership view counts a member with a NOSPACE alarm as healthy and carries
// the pods and claims of names etcd does not list (a removed member's, still going); the rollout view
// marks a member up to date by its pod's spec hash and ready by its pod's Ready condition.
func TestPlannerViews(t *testing.T) {
	c := testutil.EtcdCluster("w", testutil.WithReplicas(3))
	ready := pod("w-0", false)
	ready.Annotations = map[string]string{etcdv1alpha1.AnnotationSpecHash: "new"}
	ready.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	old := pod("w-1", false)
	old.Annotations = map[string]string{etcdv1alpha1.AnnotationSpecHash: "old"}
	e := &Etcd{ClusterID: 1, Leader: 1,
		Members: []etcd.Member{{ID: 1, Name: "w-0"}, {ID: 2, Name: "w-1"}},
		Health:  map[uint64]error{1: nil, 2: etcd.ErrNoSpace},
	}
	m := Build(Input{Cluster: c, Etcd: e, Pods: []corev1.Pod{ready, old, pod("w-5", true)},
		Claims: []corev1.PersistentVolumeClaim{claim("w-5", nil)}})

	ms := m.Membership()
	if ms.Replicas != 3 || ms.Leader != 1 || len(ms.Members) != 2 || !ms.Members[1].Healthy {
		t.Errorf("membership view %+v", ms)
	}
	if got := ms.Resources["w-5"]; got != (membership.Resources{PodTerminating: true, Data: true}) {
		t.Errorf("resources of the removed member %+v", got)
	}
	ro := m.Rollout("new")
	if len(ro.Members) != 2 || !ro.Members[0].UpToDate || !ro.Members[0].Ready || ro.Members[1].UpToDate || ro.Members[1].Ready || !ro.Members[1].Healthy {
		t.Errorf("rollout view %+v", ro.Members)
	}
}

// TestDownSince: a member is down since its pod's Ready condition turned False; a Ready pod, a pod
// without the condition yet, or no pod at all gives the zero time.
func TestDownSince(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC))
	down := pod("d-0", false)
	down.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: at}}
	up := pod("d-1", false)
	up.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at}}
	fresh := pod("d-2", false)
	for _, tc := range []struct {
		m    *Member
		want time.Time
	}{
		{&Member{Name: "d-0", Pod: &down}, at.Time},
		{&Member{Name: "d-1", Pod: &up}, time.Time{}},
		{&Member{Name: "d-2", Pod: &fresh}, time.Time{}},
		{&Member{Name: "d-3"}, time.Time{}},
	} {
		if got := tc.m.DownSince(); !got.Equal(tc.want) {
			t.Errorf("%s: DownSince %v, want %v", tc.m.Name, got, tc.want)
		}
	}
}
