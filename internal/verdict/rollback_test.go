package verdict

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestRollbackDue: a member that a rolling update restarted, while it served, onto spec B, which no
// other member serves on, and that has been down on B for an hour, crash-looping, is due to be rolled
// back to spec A, which its claim records it served on and a ControllerRevision keeps (PodToRecreate
// says RolloutFailed), and Degraded says when. It is not when replacing is off (a person decides), when
// rollbacks are off, when the spec asks for another etcd minor, when its claim records no spec it served
// on, when the cluster keeps no revision of it, when the TLS settings changed since (the revision no
// longer builds pods of A), when another member serves on B (B ran: the member is repaired as any
// other), or before the end of the policy (Degraded gives the time instead).
func TestRollbackDue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *etcdv1beta1.EtcdCluster, hashes *[3]string, claim map[string]string, revs *[]appsv1.ControllerRevision, downSince *metav1.Time)
		due    bool
	}{
		{"down on B past the policy", nil, true},
		{"replacing off", func(c *etcdv1beta1.EtcdCluster, _ *[3]string, _ map[string]string, _ *[]appsv1.ControllerRevision, _ *metav1.Time) {
			c.Spec.Recovery.ReplaceUnhealthyMemberAfter = &metav1.Duration{}
		}, false},
		{"rollbacks off", func(c *etcdv1beta1.EtcdCluster, _ *[3]string, _ map[string]string, _ *[]appsv1.ControllerRevision, _ *metav1.Time) {
			c.Spec.Recovery.RollBackFailedRollouts = ptr.To(false)
		}, false},
		{"the spec asks for another etcd minor than the members run", func(c *etcdv1beta1.EtcdCluster, _ *[3]string, _ map[string]string, _ *[]appsv1.ControllerRevision, _ *metav1.Time) {
			c.Spec.Version = "3.5.26"
		}, false},
		{"no record of the spec it served on", func(_ *etcdv1beta1.EtcdCluster, _ *[3]string, claim map[string]string, _ *[]appsv1.ControllerRevision, _ *metav1.Time) {
			delete(claim, etcdv1beta1.AnnotationServedSpec)
		}, false},
		{"no revision of that spec", func(_ *etcdv1beta1.EtcdCluster, _ *[3]string, _ map[string]string, revs *[]appsv1.ControllerRevision, _ *metav1.Time) {
			*revs = nil
		}, false},
		{"the TLS settings changed since", func(c *etcdv1beta1.EtcdCluster, _ *[3]string, _ map[string]string, _ *[]appsv1.ControllerRevision, _ *metav1.Time) {
			c.Spec.TLS = &etcdv1beta1.TLSSpec{Secrets: &etcdv1beta1.TLSSecrets{Server: "own-server"}}
		}, false},
		{"another member serves on B", func(_ *etcdv1beta1.EtcdCluster, hashes *[3]string, _ map[string]string, _ *[]appsv1.ControllerRevision, _ *metav1.Time) {
			hashes[1] = hashes[2]
		}, false},
		{"down for a minute", func(_ *etcdv1beta1.EtcdCluster, _ *[3]string, _ map[string]string, _ *[]appsv1.ControllerRevision, downSince *metav1.Time) {
			*downSince = metav1.NewTime(downSince.Add(59 * time.Minute))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now, long, c, e := thirdDownForAnHour("r")
			c.Namespace = "ns"
			rollbacksOn(c, e)
			revs, a, b := changedSpec(c)
			hashes := [3]string{a, a, b}
			downSince := long
			claimAnn := map[string]string{etcdv1beta1.AnnotationRolledOnto: b, etcdv1beta1.AnnotationServedSpec: a}
			if tc.change != nil {
				tc.change(c, &hashes, claimAnn, &revs, &downSince)
			}
			c.Status.Members[0].DownSince = &downSince
			claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("r-2"), Namespace: "ns", Annotations: claimAnn}}
			pods := podsOnHashes(c, "r", hashes, long, false)
			m := model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: pods, Claims: []corev1.PersistentVolumeClaim{claim}, Revisions: revs})
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
			if ReplaceDue(m, mem) != "" && hashes[1] != hashes[2] {
				t.Errorf("ReplaceDue = %q for a member down on a spec no member has served on", ReplaceDue(m, mem))
			}
			c.Status.Members = memberStatuses(m)
			degraded := strings.Join(downSummary(&c.Spec, c.Status.Members, true, memberNotes(m, m.SpecHash)), "; ")
			wantAt := tc.name == "down for a minute" // the policy (5m) from when it went down
			at := downSince.Add(c.Spec.ReplaceAfter()).UTC().Format(time.RFC3339)
			if got := strings.Contains(degraded, "it is rolled back at "+at); got != (wantAt || tc.due) {
				t.Errorf("Degraded = %q: says it is rolled back at %s: %v, want %v", degraded, at, got, wantAt || tc.due)
			}
		})
	}
}

// TestRollbackAcrossMinor: a change of the etcd minor version (3.6 to 3.7, say a version with a typo)
// whose member's etcd never ran on its pod (it waits for an image that does not exist) is rolled back
// like any other: no etcd of the new minor touched its data. One whose etcd ran (a crash loop), or ran
// on an earlier pod of the change (its claim says so), is not; a run seen is recorded on the claim
// (UntriedSpecRanToRecord), whoever deletes the pod afterwards.
func TestRollbackAcrossMinor(t *testing.T) {
	for _, tc := range []struct {
		status string
		due    bool
		ran    bool // the claim records that etcd ran on an earlier pod of the change
	}{{"ImagePullBackOff", true, false}, {"CrashLoopBackOff", false, false}, {"ImagePullBackOff", false, true}} {
		now, long, c, e := thirdDownForAnHour("x")
		c.Namespace = "ns"
		rollbacksOn(c, e)
		revs, a, _ := changedSpec(c)
		c.Spec.Version, c.Spec.Image = "3.7.99", ""
		b := resources.Options{}.SpecHash(c)
		claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("x-2"), Namespace: "ns",
			Annotations: map[string]string{etcdv1beta1.AnnotationRolledOnto: b, etcdv1beta1.AnnotationServedSpec: a}}}
		if tc.ran {
			claim.Annotations[etcdv1beta1.AnnotationUntriedSpecRan] = "true"
		}
		pods := podsOnHashes(c, "x", [3]string{a, a, b}, long, false)
		pods[2].Status = waitingPodStatus(tc.status)
		m := model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: pods, Claims: []corev1.PersistentVolumeClaim{claim}, Revisions: revs})
		why := RollbackDue(m, m.Member("x-2"))
		if (why != "") != tc.due {
			t.Errorf("%s on etcd 3.7 (ran on an earlier pod: %v), the members on 3.6: RollbackDue = %q, want due %v", tc.status, tc.ran, why, tc.due)
		}
		if spec := SpecToRestore(m, m.Member("x-2")); tc.due && spec != nil {
			t.Errorf("SpecToRestore before the rollback is recorded = %v, want nil", spec)
		}
		// recorded once seen: etcd ran on the pod of the change (a crash loop), not yet recorded
		if got, want := UntriedSpecRanToRecord(m, m.Member("x-2")), tc.status == "CrashLoopBackOff" && !tc.ran; got != want {
			t.Errorf("%s (recorded: %v): UntriedSpecRanToRecord = %v, want %v", tc.status, tc.ran, got, want)
		}
		if UntriedSpecRanToRecord(m, m.Member("x-0")) {
			t.Error("UntriedSpecRanToRecord = true for a member that serves")
		}
	}
}

// changedSpec returns the ControllerRevision of c's spec (A), A's hash, and the hash of B, the spec c
// is changed to: an image that does not exist.
func changedSpec(c *etcdv1beta1.EtcdCluster) (revs []appsv1.ControllerRevision, a, b string) {
	a = resources.Options{}.SpecHash(c)
	rev := resources.Options{}.Revision(c)
	rev.OwnerReferences[0].UID = c.UID
	c.Spec.Image = "docker.io/local/etcd:no-such-tag"
	return []appsv1.ControllerRevision{*rev}, a, resources.Options{}.SpecHash(c)
}

// podsOnHashes returns the pods of members <name>-0..2 of c, created at created, with the spec hashes
// given; the third crash-loops, and is being deleted when terminating.
func podsOnHashes(c *etcdv1beta1.EtcdCluster, name string, hashes [3]string, created metav1.Time, terminating bool) []corev1.Pod {
	var pods []corev1.Pod
	for i, h := range hashes {
		plain := resources.SpecTLS(c)
		p := *resources.Options{}.BuildPod(c, resources.Member{Name: fmt.Sprintf("%s-%d", name, i), InitialClusterState: resources.StateNew, TLS: &plain})
		p.CreationTimestamp, p.Annotations[etcdv1beta1.AnnotationSpecHash] = created, h
		if i == 2 {
			p.Status = waitingPodStatus("CrashLoopBackOff")
			if terminating {
				p.DeletionTimestamp = &created
			}
		}
		pods = append(pods, p)
	}
	return pods
}

// TestClaimRecordsToDrop: the records of a rollout's restart go once the member serves on the spec it
// was restarted onto, or on a third spec (neither that one nor the one it served on before); the record of a rollback goes once the spec changed (not when the revision of the
// spec it went back to is gone, nor when rollbacks are turned off: the rollout would try the spec that
// did not run again), with the record of the spec it served on unless a rollout restarted it since; the record of the spec another member served on stays
// while a rollback holds and goes after. RevisionsToDelete keeps the revisions of the current spec, of
// the members' pods and of their claims' records, and once rollbacks are off only those of the claims'
// records.
func TestClaimRecordsToDrop(t *testing.T) {
	now, _, c, e := thirdDownForAnHour("d")
	c.Namespace = "ns"
	e.Health[3] = nil
	c.Status.Members = nil
	rollbacksOn(c, e)
	revs, a, b := changedSpec(c)
	const (
		onto, served, from, why = etcdv1beta1.AnnotationRolledOnto, etcdv1beta1.AnnotationServedSpec, etcdv1beta1.AnnotationRolledBackFrom, etcdv1beta1.AnnotationRollbackReason
		ran                     = etcdv1beta1.AnnotationUntriedSpecRan
	)
	const cc = "c0ffee0000"
	for _, tc := range []struct {
		name     string
		podHash  string
		records  map[string]string
		other    map[string]string // d-1's claim
		current  string
		wantDrop []string
	}{
		{"serves on the spec it was restarted onto", b, map[string]string{onto: b, served: a}, nil, b, []string{onto, served}},
		{"serves on the spec it was restarted onto, having crashed on it first", b, map[string]string{onto: b, served: a, ran: "true"}, nil, b, []string{onto, served, ran}},
		{"restart not done yet", a, map[string]string{onto: b, served: a}, nil, b, nil},
		// the spec changed again while it was down, and the records did not follow it onto the newer
		// spec (no quorum): it served since, and a change back to b must not find them current
		{"serves on a third spec", cc, map[string]string{onto: b, served: a, ran: "true"}, nil, cc, []string{onto, served, ran}},
		{"serves on a third spec, the spec changed back to the one it was restarted onto", cc, map[string]string{onto: b, served: a}, nil, b, []string{onto, served}},
		{"serves on a third spec, no record of the spec it served on before (rollbacks off)", cc, map[string]string{onto: b}, nil, cc, nil},
		{"rolled back from the current spec", a, map[string]string{from: b, served: a}, nil, b, nil},
		{"rolled back from the current spec, no revision of the spec it served on (deleted): the hold stays", a, map[string]string{from: b, why: "x", served: cc}, nil, b, nil},
		{"rolled back, spec reverted", a, map[string]string{from: b, why: "x", served: a}, nil, a, []string{from, why, served}},
		{"rolled back, then restarted onto a new change", a, map[string]string{from: b, onto: cc, served: a}, nil, cc, []string{from, why}},
		{"another member rolled back from the current spec", a, map[string]string{served: a}, map[string]string{from: b, served: a}, b, nil},
		{"no rollback holds", a, map[string]string{served: a}, map[string]string{from: b, served: a}, cc, []string{served}},
		{"record of the rollback removed by hand", a, map[string]string{why: "x", served: a}, nil, b, []string{why, served}},
	} {
		pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d-2", Namespace: "ns", Annotations: map[string]string{etcdv1beta1.AnnotationSpecHash: tc.podHash}}}
		claims := []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("d-2"), Namespace: "ns", Annotations: tc.records}}}
		if tc.other != nil {
			claims = append(claims, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("d-1"), Namespace: "ns", Annotations: tc.other}})
		}
		m := model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: []corev1.Pod{pod}, Claims: claims, Revisions: revs})
		got := ClaimRecordsToDrop(m, m.Member("d-2"), tc.current)
		if strings.Join(got, ",") != strings.Join(tc.wantDrop, ",") {
			t.Errorf("%s: ClaimRecordsToDrop = %v, want %v", tc.name, got, tc.wantDrop)
		}
	}

	// revisions: A is kept while a pod or a claim has it, B (current) always
	stale := resources.Options{}.Revision(c)
	stale.Name, stale.Labels[etcdv1beta1.LabelSpecHash] = "d-"+cc, cc
	stale.OwnerReferences[0].UID = c.UID
	all := append([]appsv1.ControllerRevision{*stale}, revs...)
	cur := resources.Options{}.Revision(c)
	cur.OwnerReferences[0].UID = c.UID
	all = append(all, *cur)
	onA := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d-2", Namespace: "ns", Annotations: map[string]string{etcdv1beta1.AnnotationSpecHash: a}}}
	m := model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: []corev1.Pod{onA}, Revisions: all})
	if got := RevisionsToDelete(m); strings.Join(got, ",") != cc {
		t.Errorf("RevisionsToDelete = %v, want only %s (A is a pod's, B the current spec's)", got, cc)
	}
	claimA := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("d-2"), Namespace: "ns", Annotations: map[string]string{served: a}}}
	m = model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Claims: []corev1.PersistentVolumeClaim{claimA}, Revisions: all})
	if got := RevisionsToDelete(m); strings.Join(got, ",") != cc {
		t.Errorf("RevisionsToDelete = %v, want only %s (A is a claim's record)", got, cc)
	}
	m = model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Revisions: all})
	if got := RevisionsToDelete(m); len(got) != 2 || slices.Contains(got, b) {
		t.Errorf("RevisionsToDelete = %v, want A's and %s, not the current spec's %s", got, cc, b)
	}

	// rollbacks turned off: no new rollback, and the one in place holds until the spec changes
	c.Spec.Recovery.RollBackFailedRollouts = ptr.To(false)
	claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("d-2"), Namespace: "ns",
		Annotations: map[string]string{from: b, why: "x", served: a}}}
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d-2", Namespace: "ns", Annotations: map[string]string{etcdv1beta1.AnnotationSpecHash: a}}}
	m = model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: []corev1.Pod{pod}, Claims: []corev1.PersistentVolumeClaim{claim}, Revisions: all})
	if got := ClaimRecordsToDrop(m, m.Member("d-2"), b); len(got) != 0 {
		t.Errorf("rollbacks off: ClaimRecordsToDrop = %v, want none while the rollback holds", got)
	}
	if m.RolledBack(b) == nil {
		t.Error("rollbacks off: RolledBack does not hold: the rollout would restart a member onto the spec that did not run")
	}
	if got := RevisionsToDelete(m); strings.Join(got, ",") != cc {
		t.Errorf("rollbacks off: RevisionsToDelete = %v, want only %s: A's a claim records, and the current spec's keeps the record of the rollback from it", got, cc)
	}
}

// TestRolledBackMember: while a member's pod is rolled back from the current spec, a member down for
// the policy is replaced, the rolled-back one too (the revision keeps the rollback once its claim
// goes), new members being made from the spec the rolled-back member serves on (SpecToAdd), unless no
// revision keeps that spec (Degraded then says why it is not); another member whose claim records the
// spec it served on is recreated from it (SpecToRestore: a pod of that spec), and not once no rollback holds. A rolled-back member
// found on a pod of the current spec (its deletion failed) is rolled back again, but only when the spec
// it served on can be rebuilt (no deletion each pass otherwise). A pod the kubelet keeps while it is
// deleted still counts for DownOnUntriedSpec, and RecreateDue does not recreate a member due to be
// rolled back.
func TestRolledBackMember(t *testing.T) {
	now, long, c, e := thirdDownForAnHour("b")
	c.Namespace = "ns"
	rollbacksOn(c, e)
	revs, a, current := changedSpec(c)
	build := func(hash2 string, claim2, claim1 map[string]string, terminating bool) *model.Cluster {
		claims := []corev1.PersistentVolumeClaim{
			{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("b-2"), Namespace: "ns", Annotations: claim2}},
			{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("b-1"), Namespace: "ns", Annotations: claim1}},
		}
		return model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: podsOnHashes(c, "b", [3]string{a, a, hash2}, long, terminating), Claims: claims, Revisions: revs})
	}
	rolledBack := map[string]string{etcdv1beta1.AnnotationRolledBackFrom: current, etcdv1beta1.AnnotationServedSpec: a}
	served1 := map[string]string{etcdv1beta1.AnnotationServedSpec: a}

	// the rolled-back member down for the policy on the pod it was rolled back to is replaced like any
	// other, from the spec it served on (the revision keeps the rollback once its claim goes)
	m := build(a, rolledBack, served1, false)
	if why := ReplaceDue(m, m.Member("b-2")); !strings.Contains(why, "longer than spec.recovery.replaceUnhealthyMemberAfter") {
		t.Errorf("ReplaceDue = %q for the rolled-back member down for the policy, want it replaced", why)
	}
	if spec, hash := SpecToAdd(m); spec == nil || hash != a {
		t.Errorf("SpecToAdd = %v, %q while b-2 is rolled back, want the spec it serves on, %s", spec, hash, a)
	}
	c.Status.Members = memberStatuses(m)
	if d := strings.Join(downSummary(&c.Spec, c.Status.Members, true, memberNotes(m, current)), "; "); !strings.Contains(d, "replaced at") {
		t.Errorf("Degraded = %q: want it to say when the member is replaced", d)
	}
	if spec := SpecToRestore(m, m.Member("b-1")); spec == nil || (resources.Options{}).SpecHash(spec) != a {
		t.Errorf("SpecToRestore(b-1) = %v while b-2 is rolled back, want the spec of hash %s", spec, a)
	}
	if m := build(a, map[string]string{etcdv1beta1.AnnotationRolledBackFrom: "other"}, served1, false); SpecToRestore(m, m.Member("b-1")) != nil {
		t.Error("SpecToRestore(b-1) gives a spec while no rollback holds")
	}

	// another member down for the policy on a pod of the current spec, without a record (it was
	// recreated on it): replaced, its replacement made from the spec b-1 serves on (SpecToAdd)
	m = build(current, map[string]string{}, rolledBack, false)
	if why := ReplaceDue(m, m.Member("b-2")); !strings.Contains(why, "longer than spec.recovery.replaceUnhealthyMemberAfter") {
		t.Errorf("ReplaceDue = %q for a member down for the policy while another is rolled back, want it replaced from the spec that ran", why)
	}
	if spec, hash := SpecToAdd(m); spec == nil || hash != a || (resources.Options{}).SpecHash(spec) != a {
		t.Errorf("SpecToAdd = %v, %q while b-1 is rolled back to the spec of hash %s", spec, hash, a)
	}
	c.Status.Members = memberStatuses(m)
	if d := strings.Join(downSummary(&c.Spec, c.Status.Members, true, memberNotes(m, current)), "; "); !strings.Contains(d, "b-2 is down since") || strings.Contains(d, "not replaced") {
		t.Errorf("Degraded = %q: want b-2 down, to be replaced", d)
	}
	// ... but not when the spec b-1 serves on cannot be built again (its revision deleted): a new member
	// would be made from the spec that did not run
	kept := revs
	revs = nil
	m = build(current, map[string]string{}, rolledBack, false)
	revs = kept
	if why := ReplaceDue(m, m.Member("b-2")); why != "" {
		t.Errorf("ReplaceDue = %q for a member down while another is rolled back and no revision keeps the spec it serves on", why)
	}
	if spec, hash := SpecToAdd(m); spec != nil || hash != "" {
		t.Errorf("SpecToAdd = %v, %q with no revision of the spec the rolled-back member serves on, want none", spec, hash)
	}
	c.Status.Members = memberStatuses(m)
	if d := strings.Join(downSummary(&c.Spec, c.Status.Members, true, memberNotes(m, current)), "; "); !strings.Contains(d, "b-2 is down since") || !strings.Contains(d, "not replaced while b-1 is rolled back from the current spec") {
		t.Errorf("Degraded = %q: want it to say b-2 is not replaced while b-1 is rolled back", d)
	}
	// a member with no record of the spec it served on (added during the hold, down before a pass
	// recorded it), its pod recreated meanwhile: its claim gets the spec of the pod it goes from first
	for _, tc := range []struct {
		name           string
		hash2          string
		claim2, claim1 map[string]string
		keep           bool
	}{
		{"no record, on the spec that ran, during the hold", a, map[string]string{}, rolledBack, true},
		{"its served spec recorded", a, served1, rolledBack, false},
		{"on the current spec", current, map[string]string{}, rolledBack, false},
		{"no hold", a, map[string]string{}, served1, false},
	} {
		if m := build(tc.hash2, tc.claim2, tc.claim1, false); PodSpecToKeep(m, m.Member("b-2")) != tc.keep {
			t.Errorf("%s: PodSpecToKeep = %v, want %v", tc.name, !tc.keep, tc.keep)
		}
	}
	revs = nil
	if m := build(a, map[string]string{}, rolledBack, false); PodSpecToKeep(m, m.Member("b-2")) {
		t.Error("PodSpecToKeep = true with no revision of the pod's spec")
	}
	revs = kept

	// no rollback: new members are made from the current spec
	m = build(current, map[string]string{}, served1, false)
	if spec, hash := SpecToAdd(m); spec != c || hash != current {
		t.Errorf("SpecToAdd = %v, %q with no rollback, want the cluster and the current hash %s", spec, hash, current)
	}

	// found on the current spec again
	m = build(current, rolledBack, nil, false)
	if reason, _ := PodToRecreate(m, m.Member("b-2"), resources.Options{}); reason != etcdv1beta1.ReasonRolloutFailed {
		t.Errorf("PodToRecreate reason %q for a rolled-back member on the current spec, want RolloutFailed", reason)
	}
	m = build(current, map[string]string{etcdv1beta1.AnnotationRolledBackFrom: current, etcdv1beta1.AnnotationServedSpec: "c0ffee0000"}, nil, false)
	if reason, _ := PodToRecreate(m, m.Member("b-2"), resources.Options{}); reason == etcdv1beta1.ReasonRolloutFailed {
		t.Error("PodToRecreate rolls back a member whose served spec has no revision: its pod would be deleted each pass")
	}

	// restarted onto B, not served: untried, its pod kept by the kubelet counts; not recreated at half the policy
	untried := map[string]string{etcdv1beta1.AnnotationRolledOnto: current, etcdv1beta1.AnnotationServedSpec: a}
	c.Status.Members = []etcdv1beta1.MemberStatus{{Name: "b-2", DownSince: &metav1.Time{Time: now.Add(-c.Spec.RecreateAfter() - time.Second)}}}
	m = build(current, untried, nil, true)
	if !m.DownOnUntriedSpec(m.Member("b-2")) {
		t.Error("DownOnUntriedSpec = false for a member whose pod on the untried spec is being deleted")
	}
	m = build(current, untried, nil, false)
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
	c.Spec.Recovery.RollBackFailedRollouts = ptr.To(true)
	e.Status = map[uint64]etcd.EndpointStatus{1: {Version: c.Spec.VersionOrDefault(), Leader: 1}, 2: {Version: c.Spec.VersionOrDefault(), Leader: 1}}
}

// TestAwaitingPodOutdated: the pod of a member to be added, made before its add from a spec since
// changed (a node selector no node matches, fixed), is to be made again from the current spec; not
// when it was made from the current spec. While a member is rolled back from the current spec, new
// members are made from the spec it serves on: a pod of that spec is kept, one of the current spec is
// made again; when no revision keeps that spec, no member is added, and the pod is left.
func TestAwaitingPodOutdated(t *testing.T) {
	now, long, c, e := thirdDownForAnHour("w")
	c.Namespace = "ns"
	e.Health[3] = nil
	c.Status.Members = nil
	revs, a, b := changedSpec(c) // the spec is now b
	awaiting := func(hash string) corev1.Pod {
		p := *resources.Options{OperatorImage: "docker.io/local/etcd-operator:dev"}.BuildPod(c, resources.Member{Name: "w-3", InitialClusterState: resources.StateExisting, AwaitAdd: true})
		p.CreationTimestamp, p.Annotations[etcdv1beta1.AnnotationSpecHash] = long, hash
		p.Status.Phase = corev1.PodPending
		return p
	}
	for _, tc := range []struct {
		name     string
		podHash  string
		claim1   map[string]string
		outdated bool
	}{
		{"made from the spec before the fix", a, nil, true},
		{"made from the current spec", b, nil, false},
		{"made from the spec a member rolled back from the current one serves on", a, map[string]string{etcdv1beta1.AnnotationRolledBackFrom: b, etcdv1beta1.AnnotationServedSpec: a}, false},
		{"made from the current spec while a member is rolled back from it", b, map[string]string{etcdv1beta1.AnnotationRolledBackFrom: b, etcdv1beta1.AnnotationServedSpec: a}, true},
		// no revision keeps what the rolled-back member serves on: no member is added, the pod is left
		{"made from an older spec while no member can be added", a, map[string]string{etcdv1beta1.AnnotationRolledBackFrom: b, etcdv1beta1.AnnotationServedSpec: "c0ffee0000"}, false},
		{"made from the current spec while no member can be added", b, map[string]string{etcdv1beta1.AnnotationRolledBackFrom: b, etcdv1beta1.AnnotationServedSpec: "c0ffee0000"}, false},
	} {
		claims := []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("w-1"), Namespace: "ns", Annotations: tc.claim1}}}
		m := model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: []corev1.Pod{awaiting(tc.podHash)}, Claims: claims, Revisions: revs})
		if mem := m.Member("w-3"); mem == nil || !mem.AwaitsAdd() {
			t.Fatalf("%s: w-3 does not await its add: the case tests nothing", tc.name)
		}
		if got := AwaitingPodOutdated(m, m.Member("w-3")); got != tc.outdated {
			t.Errorf("%s: AwaitingPodOutdated = %v, want %v", tc.name, got, tc.outdated)
		}
	}
}

// TestRollbackClaimLost: the rolled-back member's claim is the record of a rollback; the revision of
// the spec that did not run keeps a copy (member, claim UID, the spec it serves on, why). When that
// claim is lost (gone, being deleted, or replaced by one of another UID), the rollback still holds:
// the rollout stays stopped, new members are made from the spec that ran, and the lost member is not
// held from its replacement; its replacement's claim gets the record once it serves on that spec. A
// claim of the recorded UID without the record is the user lifting it: no rollback, and the copy goes.
func TestRollbackClaimLost(t *testing.T) {
	now, long, c, e := thirdDownForAnHour("l")
	c.Namespace = "ns"
	rollbacksOn(c, e)
	revs, a, current := changedSpec(c)
	failed := *resources.Options{}.Revision(c)
	failed.OwnerReferences[0].UID = c.UID
	why := "etcd container ErrImagePull"
	mark := map[string]string{etcdv1beta1.AnnotationRolledBackClaim: "l-2/uid-old", etcdv1beta1.AnnotationServedSpec: a, etcdv1beta1.AnnotationRollbackReason: why}
	rolledBack := map[string]string{etcdv1beta1.AnnotationRolledBackFrom: current, etcdv1beta1.AnnotationServedSpec: a, etcdv1beta1.AnnotationRollbackReason: why}
	served := map[string]string{etcdv1beta1.AnnotationServedSpec: a}
	// build: the revisions (the failed spec's with revMark), the claim of l-1 (served) and, unless
	// claim2 is nil, l-2's claim of uid2 with claim2's annotations; l-2's pod on hash2 unless it is ""
	build := func(revMark map[string]string, uid2 string, claim2 map[string]string, terminating bool, hash2 string, serving bool) *model.Cluster {
		rev := *failed.DeepCopy()
		rev.Annotations = resources.Merged(rev.Annotations, revMark)
		claims := []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("l-1"), Namespace: "ns", UID: "uid-1", Annotations: served}}}
		if claim2 != nil {
			pvc := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("l-2"), Namespace: "ns", UID: types.UID(uid2), Annotations: claim2}}
			if terminating {
				pvc.DeletionTimestamp = &long
			}
			claims = append(claims, pvc)
		}
		pods := podsOnHashes(c, "l", [3]string{a, a, hash2}, long, false)
		if hash2 == "" {
			pods = pods[:2]
		} else if serving {
			pods[2].Status = corev1.PodStatus{Phase: corev1.PodRunning}
		}
		ee := *e
		ee.Health = map[uint64]error{1: nil, 2: nil, 3: e.Health[3]}
		if serving {
			ee.Health[3] = nil
			ee.Status = map[uint64]etcd.EndpointStatus{1: e.Status[1], 2: e.Status[2], 3: {Version: c.Spec.VersionOrDefault(), Leader: 1}}
		}
		return model.Build(model.Input{Cluster: c, Etcd: &ee, Now: now, Pods: pods, Claims: claims, Revisions: append(slices.Clone(revs), rev)})
	}

	// the claim records it, the revision does not yet: the revision is to get the copy
	m := build(nil, "uid-old", rolledBack, false, a, false)
	if rb := m.Rollback(current); rb == nil || rb.Recorded == nil || rb.Member != "l-2" || rb.ServedSpec != a || rb.Reason != why {
		t.Errorf("Rollback = %+v with l-2's claim recording it, want l-2, recorded, served on %s, %q", rb, a, why)
	}
	if got := m.RollbackMarkToWrite(current); got[etcdv1beta1.AnnotationRolledBackClaim] != "l-2/uid-old" || got[etcdv1beta1.AnnotationServedSpec] != a || got[etcdv1beta1.AnnotationRollbackReason] != why {
		t.Errorf("RollbackMarkToWrite = %v, want the member, claim UID, served spec and reason", got)
	}
	if m := build(mark, "uid-old", rolledBack, false, a, false); m.RollbackMarkToWrite(current) != nil || m.LiftedRollbackMark(current) {
		t.Error("the revision's copy is to be written again or removed while it matches the claim's record")
	}

	// a claim being deleted still has the record: it holds, and the revision gets its copy (one
	// deleted with the claim is made again with it)
	m = build(nil, "uid-old", rolledBack, true, a, false)
	if rb := m.Rollback(current); rb == nil || rb.Recorded == nil || rb.ServedSpec != a {
		t.Errorf("Rollback = %+v with l-2's claim being deleted, want the rollback it records", rb)
	}
	if got := m.RollbackMarkToWrite(current); got[etcdv1beta1.AnnotationRolledBackClaim] != "l-2/uid-old" {
		t.Errorf("RollbackMarkToWrite = %v with l-2's claim being deleted, want its record copied", got)
	}

	// the claim lost: gone with its pod, being deleted without its record, or replaced
	for _, tc := range []struct {
		name string
		m    *model.Cluster
	}{
		{"claim and pod gone", build(mark, "", nil, false, "", false)},
		{"claim being deleted, its record gone", build(mark, "uid-old", map[string]string{}, true, a, false)},
		{"a claim of another UID, its member not serving yet", build(mark, "uid-new", map[string]string{}, false, a, false)},
	} {
		m := tc.m
		rb := m.Rollback(current)
		if rb == nil || rb.Recorded != nil || rb.Member != "l-2" || rb.ServedSpec != a {
			t.Errorf("%s: Rollback = %+v, want l-2's rollback kept by the revision, served on %s", tc.name, rb, a)
			continue
		}
		if spec, hash := SpecToAdd(m); spec == nil || hash != a {
			t.Errorf("%s: SpecToAdd = %v, %q, want the spec that ran (%s)", tc.name, spec, hash, a)
		}
		if st := RolloutFailed(m, rb); !strings.Contains(st.Message, "its claim, which recorded that, was lost") || !strings.Contains(st.Message, resources.RevisionName(c, current)) {
			t.Errorf("%s: RolloutFailed = %q, want it to say the claim was lost and name the revision", tc.name, st.Message)
		}
		if rollbackHolds(m, m.Member("l-1")) != nil {
			t.Errorf("%s: rollbackHolds(l-1) holds a replacement while the spec that ran can be built", tc.name)
		}
		if spec := SpecToRestore(m, m.Member("l-1")); spec == nil || (resources.Options{}).SpecHash(spec) != a {
			t.Errorf("%s: SpecToRestore(l-1) = %v, want the spec of hash %s while the rollback holds", tc.name, spec, a)
		}
		if mem := m.Member("l-2"); mem == nil {
			t.Errorf("%s: no member l-2 (etcd lists it)", tc.name)
		} else if got := RollbackToRecord(m, mem); got != nil {
			t.Errorf("%s: RollbackToRecord(l-2) = %v for a member that does not serve", tc.name, got)
		}
		c.Spec.Recovery.RollBackFailedRollouts = ptr.To(false)
		if slices.Contains(RevisionsToDelete(m), current) {
			t.Errorf("%s: RevisionsToDelete deletes the revision that keeps the rollback, with rollbacks turned off", tc.name)
		}
		c.Spec.Recovery.RollBackFailedRollouts = ptr.To(true)
	}

	// no claim or pod left that has the spec that ran: its revision is kept all the same, with rollbacks
	// off too (new members are made from it)
	rev := *failed.DeepCopy()
	rev.Annotations = resources.Merged(rev.Annotations, mark)
	c.Spec.Recovery.RollBackFailedRollouts = ptr.To(false)
	if got := RevisionsToDelete(model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Revisions: append(slices.Clone(revs), rev)})); len(got) != 0 {
		t.Errorf("RevisionsToDelete = %v with only the revisions' record of the rollback left, want none", got)
	}
	c.Spec.Recovery.RollBackFailedRollouts = ptr.To(true)

	// the replacement serves on the spec that ran: its claim gets the record; not on another spec
	m = build(mark, "uid-new", map[string]string{}, false, a, true)
	if got := RollbackToRecord(m, m.Member("l-2")); got[etcdv1beta1.AnnotationRolledBackFrom] != current || got[etcdv1beta1.AnnotationServedSpec] != a || got[etcdv1beta1.AnnotationRollbackReason] != why {
		t.Errorf("RollbackToRecord(l-2) = %v for the replacement serving on %s, want the rollback from %s", got, a, current)
	}
	if m := build(mark, "uid-new", map[string]string{}, false, current, true); RollbackToRecord(m, m.Member("l-2")) != nil {
		t.Error("RollbackToRecord gives a record to a member serving on the current spec")
	}
	// recorded on the new claim: the revision's copy follows it
	m = build(mark, "uid-new", rolledBack, false, a, true)
	if got := m.RollbackMarkToWrite(current); got[etcdv1beta1.AnnotationRolledBackClaim] != "l-2/uid-new" {
		t.Errorf("RollbackMarkToWrite = %v once the replacement's claim records the rollback, want l-2/uid-new", got)
	}

	// the spec runs after all (a cluster restored from a backup onto it: new claims, every member on
	// it): the revision's record no longer holds, and goes
	m = build(mark, "uid-new", map[string]string{}, false, current, true)
	if rb := m.Rollback(current); rb != nil {
		t.Errorf("Rollback = %+v with a member serving on the spec rolled back from, want none", rb)
	}
	if !m.LiftedRollbackMark(current) {
		t.Error("LiftedRollbackMark = false with a member serving on the spec rolled back from")
	}

	// lifted: the claim of that UID is there without the record
	m = build(mark, "uid-old", map[string]string{}, false, a, false)
	if rb := m.Rollback(current); rb != nil {
		t.Errorf("Rollback = %+v after the record was removed from the claim, want none", rb)
	}
	if !m.LiftedRollbackMark(current) {
		t.Error("LiftedRollbackMark = false after the record was removed from the claim")
	}
	if spec, hash := SpecToAdd(m); spec != c || hash != current {
		t.Errorf("SpecToAdd = %v, %q once lifted, want the current spec", spec, hash)
	}
}

// TestTrial: a rolling update restarted t-2, while it served on spec A, onto spec B (its claim records
// both), and no member serves on B yet: the rollout is trying B on t-2. Meanwhile every other member
// serving on a pod of an older spec gets that spec recorded on its claim (ServedSpecToRecord), kept
// while the trial lasts (ClaimRecordsToDrop); t-1's pod is lost (deleted, its node gone; its claim
// kept): it comes back on its data from the spec its claim records, as it served, not as a second
// member on a spec nothing says runs; without a record (it served on B) it comes back on B. New
// members are made from A, and a member down on a pod of A is not moved onto B by the repair
// (OutdatedPodDown). None of that once a member serves on B (the trial is over), once the rollout is
// rolled back (the rollback's rules hold), when the claim records no spec t-2 served on (rollbacks
// off), when no revision keeps A, or when t-2 has no pod of B (every pod lost at once); nor for t-2
// itself, nor for a learner (a new member's pod).
func TestTrial(t *testing.T) {
	now, long, c, e := thirdDownForAnHour("t")
	c.Namespace = "ns"
	rollbacksOn(c, e)
	revs, a, b := changedSpec(c)
	trial := map[string]string{etcdv1beta1.AnnotationRolledOnto: b, etcdv1beta1.AnnotationServedSpec: a}
	servedA := map[string]string{etcdv1beta1.AnnotationServedSpec: a}
	// build: t-0 serves on hash0, t-1 (whose claim has claim1) has no pod, or one of A, crash-looping,
	// with down1; t-2 is down on a pod of B, its claim with claim2
	build := func(hash0 string, claim1, claim2 map[string]string, revs []appsv1.ControllerRevision, down1 bool) *model.Cluster {
		claims := []corev1.PersistentVolumeClaim{
			{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("t-0"), Namespace: "ns"}},
			{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("t-1"), Namespace: "ns", Annotations: claim1}},
			{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("t-2"), Namespace: "ns", Annotations: claim2}},
		}
		pods := podsOnHashes(c, "t", [3]string{hash0, a, b}, long, false)
		pods[0].Status = corev1.PodStatus{Phase: corev1.PodRunning}
		if down1 {
			pods[1].Status = waitingPodStatus("CrashLoopBackOff")
		} else {
			pods = slices.Delete(pods, 1, 2)
		}
		ee := *e
		ee.Health = map[uint64]error{1: nil, 2: errors.New("connection refused"), 3: e.Health[3]}
		return model.Build(model.Input{Cluster: c, Etcd: &ee, Now: now, Pods: pods, Claims: claims, Revisions: revs})
	}

	m := build(a, servedA, trial, revs, false)
	if got := m.Trial(b); got == nil || got.Name != "t-2" {
		t.Fatalf("Trial = %v, want t-2", got)
	}
	if !ServedSpecToRecord(m, m.Member("t-0")) {
		t.Error("ServedSpecToRecord(t-0, serving on A) = false during the trial: its pod, if lost, would come back on B")
	}
	if got := ClaimRecordsToDrop(m, m.Member("t-1"), b); slices.Contains(got, etcdv1beta1.AnnotationServedSpec) {
		t.Errorf("ClaimRecordsToDrop(t-1) = %v during the trial: the record it comes back from goes", got)
	}
	spec := SpecToRestore(m, m.Member("t-1"))
	if spec == nil || (resources.Options{}).SpecHash(spec) != a {
		t.Errorf("SpecToRestore(t-1) during the trial = %v, want the spec its claim records (%s)", spec, a)
	}
	if spec, hash := SpecToAdd(m); spec == nil || hash != a || (resources.Options{}).SpecHash(spec) != a {
		t.Errorf("SpecToAdd during the trial = %v, %q, want the spec t-2 served on (%s)", spec, hash, a)
	}
	if SpecToRestore(m, m.Member("t-2")) != nil {
		t.Error("SpecToRestore(t-2) != nil: the member the rollout restarted onto B is not moved off it before its rollback")
	}
	// t-1 served on B (it was restarted onto it and served; t-2 was restarted after): no record, back on B
	if onB := build(a, nil, trial, revs, false); SpecToRestore(onB, onB.Member("t-1")) != nil {
		t.Error("SpecToRestore(t-1, no record of an older spec) != nil during the trial: a member that ran B would go back to A")
	}
	if down := build(a, servedA, trial, revs, true); OutdatedPodDown(down, down.Member("t-1"), resources.Options{}) {
		t.Error("OutdatedPodDown(t-1, down on a pod of A) during the trial: the repair would move it onto B, or make it again from A in a loop")
	} else if notTried := build(a, nil, nil, revs, true); !OutdatedPodDown(notTried, notTried.Member("t-1"), resources.Options{}) {
		t.Error("OutdatedPodDown(t-1, down on a pod of A) = false without a trial: the case tests nothing")
	}
	learner := build(a, servedA, trial, revs, false)
	learner.Etcd.Members[1].IsLearner = true
	if SpecToRestore(learner, learner.Member("t-1")) != nil {
		t.Error("SpecToRestore of a learner != nil: its pod is a new member's (SpecToAdd)")
	}

	for _, tc := range []struct {
		name string
		m    *model.Cluster
	}{
		{"t-0 serves on B: the trial is over", build(b, servedA, trial, revs, false)},
		{"rollbacks off: no record of the spec t-2 served on", build(a, servedA, map[string]string{etcdv1beta1.AnnotationRolledOnto: b}, revs, false)},
		{"no revision keeps A", build(a, servedA, trial, nil, false)},
		// every pod lost at once: a record not removed yet must not send members that ran on B back to A
		{"t-2's pod gone too", func() *model.Cluster {
			m := build(a, servedA, trial, revs, false)
			m.Member("t-2").Pod = nil
			return m
		}()},
	} {
		if spec := SpecToRestore(tc.m, tc.m.Member("t-1")); spec != nil {
			t.Errorf("%s: SpecToRestore(t-1) = %v, want nil (the current spec)", tc.name, spec)
		}
		if _, hash := SpecToAdd(tc.m); hash != b {
			t.Errorf("%s: SpecToAdd hash %q, want the current spec's (%s)", tc.name, hash, b)
		}
	}
	// the trial over: the records of the spec the others served on go
	if over := build(b, servedA, trial, revs, false); !slices.Contains(ClaimRecordsToDrop(over, over.Member("t-1"), b), etcdv1beta1.AnnotationServedSpec) {
		t.Error("ClaimRecordsToDrop(t-1) keeps the record of the spec it served on once the trial is over")
	}
	// rolled back: the rollback holds instead, and t-1 comes back as its claim records it served
	rb := build(a, servedA, map[string]string{etcdv1beta1.AnnotationRolledBackFrom: b, etcdv1beta1.AnnotationServedSpec: a}, revs, false)
	if rb.Trial(b) != nil || rb.Rollback(b) == nil {
		t.Errorf("rolled back: Trial = %v, Rollback = %v, want no trial and the rollback", rb.Trial(b), rb.Rollback(b))
	}
}

// TestRolloutFailedAlone: RolloutFailed tells how to try the spec again; once the cluster was scaled
// down to one member, it also says that trying again makes the cluster unavailable until the member
// serves on that spec, and not before.
func TestRolloutFailedAlone(t *testing.T) {
	c := testutil.EtcdCluster("o", testutil.WithReplicas(3))
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("o-0")}}
	rb := &model.Rollback{Member: "o-0", Reason: "etcd container ErrImagePull", Recorded: &model.Member{Name: "o-0", Claim: claim}}
	for _, replicas := range []int32{3, 1} {
		c.Spec.Replicas = ptr.To(replicas)
		m := model.Build(model.Input{Cluster: c, Etcd: &model.Etcd{}})
		for _, r := range []*model.Rollback{rb, {Member: "o-0", Reason: rb.Reason}} {
			msg := RolloutFailed(m, r).Message
			if !strings.Contains(msg, "to try this same spec again") {
				t.Fatalf("RolloutFailed = %q: says nothing of trying again", msg)
			}
			if got := strings.Contains(msg, "with one member, the cluster is unavailable until it serves on it"); got != (replicas == 1) {
				t.Errorf("replicas %d, claim recorded %v: RolloutFailed = %q: warns of one member: %v", replicas, r.Recorded != nil, msg, got)
			}
		}
	}
}

// TestTrialAcrossMinor: the spec went from Z (etcd 3.5) to A (3.6), which t-1 and t-2 run, and changed
// again to B (3.6) before the rollout restarted t-0, which served on Z: the rollout tries B on t-0, its
// claim recording Z. New members are not made from Z (the serving members run 3.6), t-1, whose claim
// records nothing (nothing served on an older spec was recorded), does not come back on Z, and t-0 is
// rolled back to Z only if its etcd never ran on B (an etcd 3.6 may have written to its data).
func TestTrialAcrossMinor(t *testing.T) {
	now, long, c, e := thirdDownForAnHour("m")
	c.Namespace = "ns"
	rollbacksOn(c, e)
	o := resources.Options{}
	c.Spec.Version = "3.5.21"
	z := o.SpecHash(c)
	revZ := *o.Revision(c)
	revZ.OwnerReferences[0].UID = c.UID
	c.Spec.Version = "3.6.5"
	a := o.SpecHash(c)
	c.Spec.Image = "docker.io/local/etcd:no-such-tag"
	b := o.SpecHash(c)
	for id, st := range e.Status {
		st.Version = "3.6.5"
		e.Status[id] = st
	}
	build := func(status string, ran bool, lost bool) *model.Cluster {
		pods := podsOnHashes(c, "m", [3]string{a, a, b}, long, false)
		pods[0].Status, pods[1].Status, pods[2].Status = corev1.PodStatus{Phase: corev1.PodRunning}, corev1.PodStatus{Phase: corev1.PodRunning}, waitingPodStatus(status)
		if lost {
			pods = slices.Delete(pods, 1, 2)
		}
		records := map[string]string{etcdv1beta1.AnnotationRolledOnto: b, etcdv1beta1.AnnotationServedSpec: z}
		if ran {
			records[etcdv1beta1.AnnotationUntriedSpecRan] = "true"
		}
		claims := []corev1.PersistentVolumeClaim{
			{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("m-1"), Namespace: "ns"}},
			{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("m-2"), Namespace: "ns", Annotations: records}},
		}
		return model.Build(model.Input{Cluster: c, Etcd: e, Now: now, Pods: pods, Claims: claims, Revisions: []appsv1.ControllerRevision{revZ}})
	}
	m := build("ImagePullBackOff", false, true)
	if tr := m.Trial(b); tr == nil || tr.Name != "m-2" {
		t.Fatalf("Trial = %v, want m-2: the case tests nothing", tr)
	}
	if _, hash := SpecToAdd(m); hash != b {
		t.Errorf("SpecToAdd hash %q, want the current spec's %s: Z (%s) runs etcd 3.5, the serving members 3.6", hash, b, z)
	}
	if spec := SpecToRestore(m, m.Member("m-1")); spec != nil {
		t.Errorf("SpecToRestore(m-1, no record) = spec of etcd %s, want nil: it ran A (etcd 3.6)", spec.Spec.Version)
	}
	if why := RollbackDue(m, m.Member("m-2")); why == "" {
		t.Error("RollbackDue(m-2) = \"\" though its etcd never ran on B: its data is of Z, and the rollback to Z is safe")
	}
	for _, tc := range []struct {
		status string
		ran    bool
	}{{"CrashLoopBackOff", false}, {"ImagePullBackOff", true}} {
		m := build(tc.status, tc.ran, false)
		if why := RollbackDue(m, m.Member("m-2")); why != "" {
			t.Errorf("%s (ran on an earlier pod: %v): RollbackDue = %q, want none: an etcd 3.6 may have written to its data, and Z runs etcd 3.5", tc.status, tc.ran, why)
		}
	}
}
