package model

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// TestAwaitsAdd: a pod counts as waiting for its add only while its await-add init container has not
// finished, its etcd has never run and its claim records no member: the pod of a member since removed,
// whose etcd ran, never does (its data is a removed member's), whatever its init containers were.
func TestAwaitsAdd(t *testing.T) {
	pod := func(init corev1.ContainerState, etcd *corev1.ContainerStatus) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: resources.AwaitAddContainerName}}}}
		p.Status.PodIP = "10.0.0.9"
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: resources.AwaitAddContainerName, State: init}}
		if etcd != nil {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{*etcd}
		}
		return p
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	done := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	waiting := &corev1.ContainerStatus{Name: resources.EtcdContainer, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}
	ran := &corev1.ContainerStatus{Name: resources.EtcdContainer, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}, RestartCount: 1}
	claimed := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{etcdv1beta1.AnnotationMemberID: "aa"}}}
	for _, tc := range []struct {
		name          string
		m             Member
		awaits, added bool
	}{
		{"its init container waits, etcd never ran", Member{Pod: pod(running, waiting)}, true, true},
		{"just created, no status yet", Member{Pod: &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: resources.AwaitAddContainerName}}}}}, true, false},
		{"its init container finished: etcd starts", Member{Pod: pod(done, waiting)}, false, false},
		{"etcd ran and restarted", Member{Pod: pod(running, ran)}, false, true},
		{"its claim records a member", Member{Pod: pod(running, waiting), Claim: claimed}, false, true},
		{"a pod without the container", Member{Pod: &corev1.Pod{}}, false, false},
	} {
		if got := tc.m.AwaitsAdd(); got != tc.awaits {
			t.Errorf("%s: AwaitsAdd = %v, want %v", tc.name, got, tc.awaits)
		}
		if got := tc.m.AwaitAddRunning(); got != tc.added {
			t.Errorf("%s: AwaitAddRunning = %v, want %v", tc.name, got, tc.added)
		}
	}
}

// TestAwaitingClaim: a claim made for a member before its add counts as waiting (its pod made, or
// made again, on it) until etcd has started on it; a pod that waits without its claim counts as waiting
// for ClaimLostGrace after it was made (the claim may just not be seen yet), then no longer.
func TestAwaitingClaim(t *testing.T) {
	now := time.Now()
	claim := func(ann map[string]string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: ann}}
	}
	for _, tc := range []struct {
		name string
		m    Member
		want bool
	}{
		{"made for an add", Member{Claim: claim(map[string]string{etcdv1beta1.AnnotationAwaitsAdd: "true"})}, true},
		{"etcd started on it", Member{Claim: claim(map[string]string{etcdv1beta1.AnnotationAwaitsAdd: "true", etcdv1beta1.AnnotationMemberID: "aa"})}, false},
		{"a member's claim", Member{Claim: claim(nil)}, false},
		{"no claim", Member{}, false},
	} {
		if got := tc.m.AwaitingClaim(); got != tc.want {
			t.Errorf("%s: AwaitingClaim = %v, want %v", tc.name, got, tc.want)
		}
	}
	pod := func(age time.Duration, claimVolume bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		if claimVolume {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-x"}}}}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		m    Member
		want bool
	}{
		{"claim not seen yet", Member{Pod: pod(time.Second, true)}, false},
		{"claim gone", Member{Pod: pod(ClaimLostGrace+time.Second, true)}, true},
		{"claim there", Member{Pod: pod(time.Minute, true), Claim: claim(nil)}, false},
		{"emptyDir", Member{Pod: pod(time.Minute, false)}, false},
	} {
		if got := tc.m.AwaitingClaimLost(now); got != tc.want {
			t.Errorf("%s: AwaitingClaimLost = %v, want %v", tc.name, got, tc.want)
		}
	}
}
