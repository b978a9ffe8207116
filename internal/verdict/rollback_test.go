package verdict

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
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
			c.Spec.Recovery.ReplaceUnhealthyMemberAfter = &metav1.Duration{}
		}, false},
		{"rollbacks off (the default)", func(c *etcdv1beta1.EtcdCluster, _ *[3]string, _ *corev1.Pod, _ *metav1.Time) {
			c.Spec.Recovery.RollBackFailedRollouts = false
		}, false},
		{"the spec asks for another etcd minor than the members run", func(c *etcdv1beta1.EtcdCluster, _ *[3]string, _ *corev1.Pod, _ *metav1.Time) {
			c.Spec.Version = "3.5.26"
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
			rollbacksOn(c, e)
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
// was restarted onto; the record of a rollback goes once the spec changed, or when the record of the pod
// it went back to is unusable, with that record unless a rollout restarted it since (it is the rollback
// of that restart); the record of the pod another member served on stays while a rollback holds and
// goes after.
func TestClaimRecordsToDrop(t *testing.T) {
	now, _, c, e := thirdDownForAnHour("d")
	c.Namespace = "ns"
	e.Health[3] = nil
	c.Status.Members = nil
	rollbacksOn(c, e)
	plain := resources.SpecTLS(c)
	rec, err := resources.ServedPodRecord(resources.Options{}.BuildPod(c, resources.Member{Name: "d-2", InitialClusterState: resources.StateNew, TLS: &plain}))
	if err != nil {
		t.Fatal(err)
	}
	const (
		onto, served, from, why = etcdv1beta1.AnnotationRolledOnto, etcdv1beta1.AnnotationServedPod, etcdv1beta1.AnnotationRolledBackFrom, etcdv1beta1.AnnotationRollbackReason
	)
	for _, tc := range []struct {
		name     string
		podHash  string
		records  map[string]string
		other    map[string]string // d-1's claim
		current  string
		wantDrop []string
	}{
		{"serves on the spec it was restarted onto", "B", map[string]string{onto: "B", served: rec}, nil, "B", []string{onto, served}},
		{"restart not done yet", "A", map[string]string{onto: "B", served: rec}, nil, "B", nil},
		{"rolled back from the current spec", "A", map[string]string{from: "B", served: rec}, nil, "B", nil},
		{"rolled back from the current spec, record unusable", "A", map[string]string{from: "B", why: "x", served: "{}"}, nil, "B", []string{from, why, served}},
		{"rolled back, spec reverted", "A", map[string]string{from: "B", why: "x", served: rec}, nil, "A", []string{from, why, served}},
		{"rolled back, then restarted onto a new change", "A", map[string]string{from: "B", onto: "C", served: rec}, nil, "C", []string{from, why}},
		{"another member rolled back from the current spec", "A", map[string]string{served: rec}, map[string]string{from: "B", served: rec}, "B", nil},
		{"no rollback holds", "A", map[string]string{served: rec}, map[string]string{from: "B", served: rec}, "C", []string{served}},
		{"record of the rollback removed by hand", "A", map[string]string{why: "x", served: rec}, nil, "B", []string{why, served}},
	} {
		pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d-2", Namespace: "ns", Annotations: map[string]string{etcdv1beta1.AnnotationSpecHash: tc.podHash}}}
		claims := []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("d-2"), Namespace: "ns", Annotations: tc.records}}}
		if tc.other != nil {
			claims = append(claims, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("d-1"), Namespace: "ns", Annotations: tc.other}})
		}
		m := model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: []corev1.Pod{pod}, Claims: claims})
		got := ClaimRecordsToDrop(m, m.Member("d-2"), tc.current)
		if strings.Join(got, ",") != strings.Join(tc.wantDrop, ",") {
			t.Errorf("%s: ClaimRecordsToDrop = %v, want %v", tc.name, got, tc.wantDrop)
		}
	}
	// rollbacks turned off: the records go, and nothing holds
	c.Spec.Recovery.RollBackFailedRollouts = false
	claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("d-2"), Namespace: "ns",
		Annotations: map[string]string{from: "B", why: "x", served: rec}}}
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d-2", Namespace: "ns", Annotations: map[string]string{etcdv1beta1.AnnotationSpecHash: "A"}}}
	m := model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: []corev1.Pod{pod}, Claims: []corev1.PersistentVolumeClaim{claim}})
	if got := ClaimRecordsToDrop(m, m.Member("d-2"), "B"); strings.Join(got, ",") != strings.Join([]string{from, why, served}, ",") {
		t.Errorf("rollbacks off: ClaimRecordsToDrop = %v, want every record", got)
	}
	if m.RolledBack("B") != nil {
		t.Error("rollbacks off: RolledBack holds")
	}
}

// TestRolledBackMember: while a member's pod is rolled back from the current spec, the member is not
// replaced when it is down for the policy (a new member would be made from that spec), and Degraded
// says so; another member whose claim records the pod it served on is recreated from it (PodToRestore),
// and not once no rollback holds. A rolled-back member found on a pod of the current spec (its
// deletion failed) is rolled back again, but only with a usable record (no deletion each pass
// otherwise). A pod the kubelet keeps while it is deleted still counts for DownOnUntriedSpec, and
// RecreateDue does not recreate a member due to be rolled back.
func TestRolledBackMember(t *testing.T) {
	now, long, c, e := thirdDownForAnHour("b")
	c.Namespace = "ns"
	testutil.WithTLS(false, false)(c)
	rollbacksOn(c, e)
	current := resources.Options{}.SpecHash(c)
	plain := resources.SpecTLS(c)
	record := func(name string) string {
		rec, err := resources.ServedPodRecord(resources.Options{}.BuildPod(c, resources.Member{Name: name, InitialClusterState: resources.StateNew, TLS: &plain}))
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	build := func(hash2 string, claim2, claim1 map[string]string, terminating bool) *model.Cluster {
		var pods []corev1.Pod
		for i, h := range []string{"A", "A", hash2} {
			p := *resources.Options{}.BuildPod(c, resources.Member{Name: fmt.Sprintf("b-%d", i), InitialClusterState: resources.StateNew, TLS: &plain})
			p.CreationTimestamp, p.Annotations[etcdv1beta1.AnnotationSpecHash] = long, h
			if i == 2 {
				p.Status = waitingPodStatus("CrashLoopBackOff")
				if terminating {
					p.DeletionTimestamp = &long
				}
			}
			pods = append(pods, p)
		}
		claims := []corev1.PersistentVolumeClaim{
			{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("b-2"), Namespace: "ns", Annotations: claim2}},
			{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("b-1"), Namespace: "ns", Annotations: claim1}},
		}
		return model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: pods, Claims: claims})
	}
	rolledBack := map[string]string{etcdv1beta1.AnnotationRolledBackFrom: current, etcdv1beta1.AnnotationServedPod: record("b-2")}
	served1 := map[string]string{etcdv1beta1.AnnotationServedPod: record("b-1")}

	m := build("A", rolledBack, served1, false)
	if why := ReplaceDue(m, m.Member("b-2")); why != "" {
		t.Errorf("ReplaceDue = %q for a member rolled back from the current spec", why)
	}
	c.Status.Members = memberStatuses(m)
	if d := strings.Join(downSummary(&c.Spec, c.Status.Members, true, memberNotes(m, current)), "; "); !strings.Contains(d, "not replaced: it was rolled back from the current spec") {
		t.Errorf("Degraded = %q: want it to say the member is not replaced, rolled back", d)
	}
	if p := PodToRestore(m, m.Member("b-1")); p == nil || p.Name != "b-1" {
		t.Errorf("PodToRestore(b-1) = %v while b-2 is rolled back, want b-1's recorded pod", p)
	}
	if m := build("A", map[string]string{etcdv1beta1.AnnotationRolledBackFrom: "other"}, served1, false); PodToRestore(m, m.Member("b-1")) != nil {
		t.Error("PodToRestore(b-1) gives a pod while no rollback holds")
	}

	// found on the current spec again
	m = build(current, rolledBack, nil, false)
	if reason, _ := PodToRecreate(m, m.Member("b-2"), resources.Options{}); reason != etcdv1beta1.ReasonRolloutFailed {
		t.Errorf("PodToRecreate reason %q for a rolled-back member on the current spec, want RolloutFailed", reason)
	}
	m = build(current, map[string]string{etcdv1beta1.AnnotationRolledBackFrom: current, etcdv1beta1.AnnotationServedPod: "{}"}, nil, false)
	if reason, _ := PodToRecreate(m, m.Member("b-2"), resources.Options{}); reason == etcdv1beta1.ReasonRolloutFailed {
		t.Error("PodToRecreate rolls back a member whose record is unusable: its pod would be deleted each pass")
	}

	// restarted onto B, not served: untried, its pod kept by the kubelet counts; not recreated at half the policy
	untried := map[string]string{etcdv1beta1.AnnotationRolledOnto: "B", etcdv1beta1.AnnotationServedPod: record("b-2")}
	c.Status.Members = []etcdv1beta1.MemberStatus{{Name: "b-2", DownSince: &metav1.Time{Time: now.Add(-c.Spec.RecreateAfter() - time.Second)}}}
	m = build("B", untried, nil, true)
	if !m.DownOnUntriedSpec(m.Member("b-2")) {
		t.Error("DownOnUntriedSpec = false for a member whose pod on the untried spec is being deleted")
	}
	m = build("B", untried, nil, false)
	if RecreateDue(m, m.Member("b-2")) {
		t.Error("RecreateDue = true for a member due to be rolled back")
	}
}

// rollbacksOn turns spec.recovery.rollBackFailedRollouts on for c, and has the members 1 and 2 of e
// report the etcd version of c's spec (a rollback needs the serving members on the spec's minor).
func rollbacksOn(c *etcdv1beta1.EtcdCluster, e *model.Etcd) {
	if c.Spec.Recovery == nil {
		c.Spec.Recovery = &etcdv1beta1.RecoverySpec{}
	}
	c.Spec.Recovery.RollBackFailedRollouts = true
	e.Status = map[uint64]etcd.EndpointStatus{1: {Version: c.Spec.VersionOrDefault(), Leader: 1}, 2: {Version: c.Spec.VersionOrDefault(), Leader: 1}}
}
