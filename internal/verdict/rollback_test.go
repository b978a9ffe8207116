package verdict

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestRollbackDue: a member that a rolling update restarted, while it served, onto spec B, which no
// other member serves on, and that has been down on B for an hour, crash-looping, is due to be rolled
// back to the pod its claim records it served on (PodToRecreate says RolloutFailed), and Degraded says
// when. It is not when replacing is off (a person decides), when its claim keeps no record of that pod,
// when the recorded pod serves TLS otherwise than the member is to now (a switch of spec.tls went on),
// when another member serves on B (B ran: the member is repaired as any other), or before the end of the
// policy (Degraded gives the time instead).
func TestRollbackDue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *etcdv1beta1.EtcdCluster, hashes *[3]string, served *corev1.Pod, downSince *metav1.Time)
		due    bool
	}{
		{"down on B past the policy", nil, true},
		{"replacing off", func(c *etcdv1beta1.EtcdCluster, _ *[3]string, _ *corev1.Pod, _ *metav1.Time) {
			c.Spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{}}
		}, false},
		{"no record of the pod it served on", func(_ *etcdv1beta1.EtcdCluster, _ *[3]string, served *corev1.Pod, _ *metav1.Time) {
			served.Name = ""
		}, false},
		{"the recorded pod served TLS otherwise", func(c *etcdv1beta1.EtcdCluster, _ *[3]string, served *corev1.Pod, _ *metav1.Time) {
			tls := resources.SpecTLS(c)
			tls.ClientHTTP, tls.ClientHTTPS = !tls.ClientHTTP, !tls.ClientHTTPS
			*served = *resources.Options{}.BuildPod(c, resources.Member{Name: "r-2", InitialClusterState: resources.StateNew, TLS: &tls})
		}, false},
		{"another member serves on B", func(_ *etcdv1beta1.EtcdCluster, hashes *[3]string, _ *corev1.Pod, _ *metav1.Time) {
			hashes[1] = "B"
		}, false},
		{"down for a minute", func(_ *etcdv1beta1.EtcdCluster, _ *[3]string, _ *corev1.Pod, downSince *metav1.Time) {
			*downSince = metav1.NewTime(downSince.Add(59 * time.Minute))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now, long, c, e := thirdDownForAnHour("r")
			c.Namespace = "ns"
			testutil.WithTLS(false, false)(c) // the pods below serve as BuildPod makes them: PodTLSOf reads them
			hashes := [3]string{"A", "A", "B"}
			downSince := long
			tls := resources.SpecTLS(c)
			served := resources.Options{}.BuildPod(c, resources.Member{Name: "r-2", InitialClusterState: resources.StateNew, TLS: &tls})
			if tc.change != nil {
				tc.change(c, &hashes, served, &downSince)
			}
			c.Status.Members[0].DownSince = &downSince
			claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("r-2"), Namespace: "ns",
				Annotations: map[string]string{etcdv1beta1.AnnotationRolledOnto: "B"}}}
			if served.Name != "" {
				rec, err := resources.ServedPodRecord(served)
				if err != nil {
					t.Fatal(err)
				}
				claim.Annotations[etcdv1beta1.AnnotationServedPod] = rec
			}
			var pods []corev1.Pod
			for i, h := range hashes {
				plain := resources.SpecTLS(c)
				p := *resources.Options{}.BuildPod(c, resources.Member{Name: []string{"r-0", "r-1", "r-2"}[i], InitialClusterState: resources.StateNew, TLS: &plain})
				p.CreationTimestamp, p.Annotations[etcdv1beta1.AnnotationSpecHash] = long, h
				if i == 2 {
					p.Status = waitingPodStatus("CrashLoopBackOff")
				}
				pods = append(pods, p)
			}
			m := model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: pods, Claims: []corev1.PersistentVolumeClaim{claim}})
			mem := m.Member("r-2")
			why := RollbackDue(m, mem)
			if (why != "") != tc.due {
				t.Fatalf("RollbackDue = %q, want due %v", why, tc.due)
			}
			reason, _ := PodToRecreate(m, mem, resources.Options{})
			if (reason == etcdv1beta1.ReasonRolloutFailed) != tc.due {
				t.Errorf("PodToRecreate reason %q, want RolloutFailed: %v", reason, tc.due)
			}
			if tc.due && !strings.Contains(why, "CrashLoopBackOff") {
				t.Errorf("RollbackDue = %q: want it to say what keeps the member down", why)
			}
			if ReplaceDue(m, mem) != "" && hashes[1] != "B" {
				t.Errorf("ReplaceDue = %q for a member down on a spec no member has served on", ReplaceDue(m, mem))
			}
			c.Status.Members = memberStatuses(m)
			degraded := strings.Join(downSummary(&c.Spec, c.Status.Members, true, memberNotes(m, "C")), "; ")
			wantAt := tc.name == "down for a minute" // the policy (5m) from when it went down
			at := downSince.Add(c.Spec.ReplaceAfter()).UTC().Format(time.RFC3339)
			if got := strings.Contains(degraded, "it is rolled back at "+at); got != (wantAt || tc.due) {
				t.Errorf("Degraded = %q: says it is rolled back at %s: %v, want %v", degraded, at, got, wantAt || tc.due)
			}
		})
	}
}

// TestClaimRecordsToDrop: the records of a rollout's restart go once the member serves on the spec it
// was restarted onto; the record of a rollback goes once the spec changed, with the record of the pod it
// went back to unless a rollout restarted it since (it is the rollback of that restart).
func TestClaimRecordsToDrop(t *testing.T) {
	now, _, c, e := thirdDownForAnHour("d")
	e.Health[3] = nil
	c.Status.Members = nil
	for _, tc := range []struct {
		name     string
		podHash  string
		records  map[string]string
		current  string
		wantDrop []string
	}{
		{"serves on the spec it was restarted onto", "B", map[string]string{etcdv1beta1.AnnotationRolledOnto: "B", etcdv1beta1.AnnotationServedPod: "{}"}, "B",
			[]string{etcdv1beta1.AnnotationRolledOnto, etcdv1beta1.AnnotationServedPod}},
		{"restart not done yet", "A", map[string]string{etcdv1beta1.AnnotationRolledOnto: "B", etcdv1beta1.AnnotationServedPod: "{}"}, "B", nil},
		{"rolled back from the current spec", "A", map[string]string{etcdv1beta1.AnnotationRolledBackFrom: "B", etcdv1beta1.AnnotationServedPod: "{}"}, "B", nil},
		{"rolled back, spec reverted", "A", map[string]string{etcdv1beta1.AnnotationRolledBackFrom: "B", etcdv1beta1.AnnotationRollbackReason: "x", etcdv1beta1.AnnotationServedPod: "{}"}, "A",
			[]string{etcdv1beta1.AnnotationRolledBackFrom, etcdv1beta1.AnnotationRollbackReason, etcdv1beta1.AnnotationServedPod}},
		{"rolled back, then restarted onto a new change", "A", map[string]string{etcdv1beta1.AnnotationRolledBackFrom: "B", etcdv1beta1.AnnotationRolledOnto: "C", etcdv1beta1.AnnotationServedPod: "{}"}, "C",
			[]string{etcdv1beta1.AnnotationRolledBackFrom, etcdv1beta1.AnnotationRollbackReason}},
	} {
		pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d-2", Annotations: map[string]string{etcdv1beta1.AnnotationSpecHash: tc.podHash}}}
		claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("d-2"), Annotations: tc.records}}
		m := model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: []corev1.Pod{pod}, Claims: []corev1.PersistentVolumeClaim{claim}})
		got := ClaimRecordsToDrop(m.Member("d-2"), tc.current)
		if strings.Join(got, ",") != strings.Join(tc.wantDrop, ",") {
			t.Errorf("%s: ClaimRecordsToDrop = %v, want %v", tc.name, got, tc.wantDrop)
		}
	}
}
