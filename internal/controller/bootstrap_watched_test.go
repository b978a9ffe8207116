package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// TestBootstrapWaitingWatched: a bootstrap waits for a pod update (and looks again only after
// RequeueWatched) while every initial member has a pod and none runs etcd; with a pod missing or being
// deleted, or an etcd container running, it looks again every RequeueProgressing.
func TestBootstrapWaitingWatched(t *testing.T) {
	c := testutil.EtcdCluster("w", testutil.WithReplicas(3))
	names := resources.InitialMemberNames(c)
	pod := func(name string, etcdRunning, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: resources.MemberLabels(c, name),
			CreationTimestamp: metav1.Now()}}
		if deleting {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		st := corev1.ContainerStatus{Name: resources.EtcdContainer}
		if etcdRunning {
			st.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Now()}
		} else {
			st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{st}
		return p
	}
	for _, tt := range []struct {
		name    string
		pods    []corev1.Pod
		watched bool
	}{
		{"every pod made, no etcd running", []corev1.Pod{pod(names[0], false, false), pod(names[1], false, false), pod(names[2], false, false)}, true},
		{"a pod not made yet", []corev1.Pod{pod(names[0], false, false), pod(names[1], false, false)}, false},
		{"a pod being deleted", []corev1.Pod{pod(names[0], false, false), pod(names[1], false, true), pod(names[2], false, false)}, false},
		{"an etcd running", []corev1.Pod{pod(names[0], false, false), pod(names[1], true, false), pod(names[2], false, false)}, false},
	} {
		s := &scope{cluster: c, m: model.Build(model.Input{Cluster: c, Pods: tt.pods, EtcdErr: model.ErrNotObserved})}
		st := bootstrapWaiting(s, names, nil)
		if st.Watched != tt.watched {
			t.Errorf("%s: Watched = %v; want %v (%s)", tt.name, st.Watched, tt.watched, st.Message)
		}
		want := verdict.RequeueProgressing
		if tt.watched {
			want = verdict.RequeueWatched
		}
		if got := verdict.Requeue(c, &verdict.Report{}, st, time.Hour); got != want {
			t.Errorf("%s: requeue after %s; want %s", tt.name, got, want)
		}
		if st.Reason != etcdv1beta1.ReasonBootstrapping {
			t.Errorf("%s: reason %s; want %s", tt.name, st.Reason, etcdv1beta1.ReasonBootstrapping)
		}
	}
}
