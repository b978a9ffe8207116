package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestDownMemberRecreatedThenReplaced: a member whose pod stays but whose etcd stops answering (a crash
// loop, as far as the operator can tell) is named in Degraded with since when, why and when it will be
// replaced; after half of spec.recovery.replaceUnhealthyMemberAfter its pod is deleted once and
// recreated on its claim; after all of it the member is removed from etcd, its pod and claim are
// deleted, and a new learner is added under its name with a new member ID, on a new claim.
func TestDownMemberRecreatedThenReplaced(t *testing.T) {
	c, members, _, _ := runningCluster(t, testutil.EtcdCluster("heal", testutil.InNamespace("ns-heal"), testutil.WithReplicas(3)), "127.0.0.51", "127.0.0.52", "127.0.0.53")
	const policy = 20 * time.Second
	updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{Duration: policy}}
	})
	var oldID uint64
	for _, m := range memberList(t, members[0].ClientURL()) {
		if m.Name == "heal-2" {
			oldID = m.ID
		}
	}
	oldPod, err := getPod(c, "heal-2")
	if err != nil {
		t.Fatal(err)
	}
	oldClaim := &corev1.PersistentVolumeClaim{}
	testutil.Eventually(t, waitTimeout, "heal-2's claim records its member and cluster ID", func(ctx context.Context) error {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName("heal-2")}, oldClaim); err != nil {
			return err
		}
		a := oldClaim.Annotations
		if a[etcdv1beta1.AnnotationMemberID] != etcd.FormatID(oldID) || a[etcdv1beta1.AnnotationClusterID] != etcd.FormatID(uint64(members[0].Etcd.Server.Cluster().ID())) {
			return fmt.Errorf("annotations %v", a)
		}
		return nil
	})

	// The fault: etcd in heal-2 stops, and kubelet reports the pod not Ready.
	members[2].Stop()
	stopped := time.Now()
	markNotReady(t, c, "heal-2")

	testutil.Eventually(t, waitTimeout, "Degraded names heal-2, since when, and when it is replaced", func(context.Context) error {
		d := condition(getCluster(t, c), etcdv1beta1.ConditionDegraded)
		if d == nil || d.Status != metav1.ConditionTrue || !strings.Contains(d.Message, "heal-2 is down since ") || !strings.Contains(d.Message, "replaced at ") {
			return fmt.Errorf("degraded %+v", d)
		}
		return nil
	})
	var recreatedAt time.Duration
	testutil.Eventually(t, waitTimeout, "heal-2's pod recreated", func(context.Context) error {
		p, err := getPod(c, "heal-2")
		if err != nil {
			return err
		}
		if p.UID == oldPod.UID {
			return errors.New("still the pod that went down")
		}
		recreatedAt = time.Since(stopped)
		return nil
	})
	if recreatedAt < policy/2-time.Second {
		t.Errorf("pod recreated %s after the fault, before half of the policy (%s)", recreatedAt, policy/2)
	}
	// The recreated pod does not start either (there is no kubelet): it stays, once. It checks its data
	// directory against the identity its claim records before etcd starts.
	recreated, err := getPod(c, "heal-2")
	if err != nil {
		t.Fatal(err)
	}
	if ics := recreated.Spec.InitContainers; len(ics) != 1 || ics[0].Name != resources.VerifyDataContainerName ||
		!slices.Contains(ics[0].Args, "--member-id="+etcd.FormatID(oldID)) {
		t.Errorf("recreated pod's init containers %+v: want verify-data with --member-id=%s", ics, etcd.FormatID(oldID))
	}

	// The pods of the members that serve are marked so (their readiness gate), the recreated pod,
	// whose etcd does not serve, is not: it stays out of the client Service whatever its probe says.
	for _, name := range []string{"heal-0", "heal-1"} {
		waitServing(t, c, name, "etcd served the operator on its client URL", "")
	}
	if p, err := getPod(c, "heal-2"); err != nil {
		t.Error(err)
	} else if podCondition(p, resources.ServingCondition) {
		t.Errorf("recreated heal-2, which does not serve, has %s: %+v", resources.ServingCondition, p.Status.Conditions)
	}

	// A new pod that shows no problem is given model.MemberStartGrace to start, past the end of the
	// policy, and Degraded gives that time.
	startGraceEnd := recreated.CreationTimestamp.Add(model.MemberStartGrace).UTC().Format(time.RFC3339)
	testutil.Eventually(t, waitTimeout, "Degraded says heal-2 is starting, replaced at the end of its start grace", func(context.Context) error {
		d := condition(getCluster(t, c), etcdv1beta1.ConditionDegraded)
		if d == nil || !strings.Contains(d.Message, "heal-2 is starting on a new pod") || !strings.Contains(d.Message, "replaced at "+startGraceEnd+" unless it serves") {
			return fmt.Errorf("degraded %+v, want heal-2 starting, replaced at %s", d, startGraceEnd)
		}
		return nil
	})
	// The kubelet reports etcd exiting on the new pod too: no longer starting, the member is replaced at
	// the end of the policy.
	markCrashLoop(t, c, "heal-2")

	// Replaced: removed from etcd, its pod and claim deleted, a new learner under its name.
	testutil.Eventually(t, waitTimeout, "heal-2 removed from etcd", func(context.Context) error {
		for _, m := range memberList(t, members[0].ClientURL()) {
			if m.ID == oldID {
				return fmt.Errorf("member %s (ID %s) still listed", m.Name, etcd.FormatID(m.ID))
			}
		}
		return nil
	})
	if took := time.Since(stopped); took < policy-time.Second {
		t.Errorf("replaced %s after the fault, before the policy (%s)", took, policy)
	}
	if p, err := getPod(c, "heal-2"); err == nil && p.UID == recreated.UID && p.DeletionTimestamp == nil {
		// the pod is deleted when the member is removed; give the pass that does it time
		testutil.Eventually(t, waitTimeout, "the replaced member's pod deleted", func(context.Context) error {
			p, err := getPod(c, "heal-2")
			if err == nil && p.UID == recreated.UID && p.DeletionTimestamp == nil {
				return errors.New("still there")
			}
			return nil
		})
	}
	finishClaimDeletion(t, c, oldClaim.UID)
	testutil.Eventually(t, waitTimeout, "a new learner heal-2 on a new claim", func(context.Context) error {
		var learner *etcd.Member
		for _, m := range memberList(t, members[0].ClientURL()) {
			if m.IsLearner {
				learner = &m
			}
		}
		if learner == nil {
			return errors.New("no learner")
		}
		if learner.ID == oldID || learner.PeerURLs[0] != (resources.Options{}).PeerURL(c, "heal-2") {
			return fmt.Errorf("learner %+v: want a new ID with heal-2's peer URL", learner)
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName("heal-2")}, pvc); err != nil {
			return err
		}
		if pvc.UID == oldClaim.UID {
			return errors.New("the learner's claim is the replaced member's")
		}
		return nil
	})
}

// TestRolloutOntoUntriedSpecNotReplaced: with spec.recovery.rollBackFailedRollouts false, a
// rolling update restarts a member that served onto a new spec
// (its claim records that), and the member does not come back (it crash-loops, as on an etcd flag
// value it refuses or a memory limit it cannot start within). No other member serves on that spec, so
// the member is not replaced when the replacement policy ends (a new member would be made from the same
// spec): it keeps its member ID and claim, the rollout goes no further, and Degraded says what to do.
// A second change before it ever served recreates its pod with it, and it is still not replaced.
// Undoing the change recreates its pod with the spec it ran on, on its claim.
func TestRolloutOntoUntriedSpecNotReplaced(t *testing.T) {
	const policy = 20 * time.Second
	u := restartedOntoUntriedSpec(t, testutil.EtcdCluster("untried", testutil.InNamespace("ns-untried"), testutil.WithReplicas(3)),
		&etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{Duration: policy}, RollBackFailedRollouts: ptr.To(false)}, "127.0.0.101", "127.0.0.102", "127.0.0.103")
	c, members, oldHash, newHash, first, name := u.c, u.members, u.oldHash, u.newHash, u.first, u.name
	claims, ids := u.claims, u.ids
	pvc := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(name)}, pvc); err != nil {
		t.Fatal(err)
	}
	if got := pvc.Annotations[etcdv1beta1.AnnotationRolledOnto]; got != newHash {
		t.Errorf("claim of %s records %s=%q, want the new spec's hash %q", name, etcdv1beta1.AnnotationRolledOnto, got, newHash)
	}
	testutil.Eventually(t, waitTimeout, "Degraded says "+name+" is not replaced and what to do", func(context.Context) error {
		d := condition(getCluster(t, c), etcdv1beta1.ConditionDegraded)
		if d == nil || !strings.Contains(d.Message, name+" is down since") || !strings.Contains(d.Message, "a rolling update restarted it onto a spec no member has run") || strings.Contains(d.Message, "replaced at") {
			return fmt.Errorf("degraded %+v", d)
		}
		return nil
	})
	// Past the end of the policy (counted from the restart): still the same member on the same claim,
	// and no other member restarted. The pod that half of the policy recreates crash-loops too.
	kept := func(ctx context.Context) error {
		if p, err := getPod(c, name); err == nil && len(p.Status.ContainerStatuses) == 0 {
			markCrashLoop(t, c, name)
		}
		listed := map[string]uint64{}
		for _, m := range memberList(t, members[(first+1)%3].ClientURL()) {
			listed[m.Name] = m.ID
		}
		if listed[name] != ids[name] || len(listed) != 3 {
			return fmt.Errorf("members %v, want %s with ID %s among 3", listed, name, etcd.FormatID(ids[name]))
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(name)}, pvc); err != nil {
			return err
		}
		if pvc.UID != claims[name] || pvc.DeletionTimestamp != nil {
			return fmt.Errorf("the claim of %s was replaced or is being deleted", name)
		}
		return u.othersKept()
	}
	testutil.Consistently(t, policy+10*time.Second, name+" kept, the rollout held", kept)

	// A second change before the member ever served (a limit raised, but not enough) recreates its pod
	// with it at once; the member, down on that spec too, is still not replaced: the record follows it.
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("300Mi")
	})
	secondHash := resources.Options{}.SpecHash(c)
	awaitPodHash(t, c, name, secondHash, "the second change")
	testutil.Consistently(t, policy+10*time.Second, name+" kept on the second change", kept)

	// Undoing the change reaches the member at once: its pod is recreated with the spec it ran on.
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.PodTemplate = nil })
	awaitPodHash(t, c, name, oldHash, "the spec it ran on")
	if listed := memberList(t, members[(first+1)%3].ClientURL()); len(listed) != 3 || !slices.ContainsFunc(listed, func(m etcd.Member) bool { return m.ID == ids[name] }) {
		t.Errorf("members %+v after the undo, want %s with ID %s among 3", listed, name, etcd.FormatID(ids[name]))
	}
}

// TestRolloutOntoUntriedSpecRolledBack: a rolling update restarts a member that served onto a new spec
// (its claim records that, and the spec hash it served on, whose ControllerRevision the operator keeps), and the member does not come back (it
// crash-loops, as on an etcd flag value it refuses or a memory limit it cannot start within). A second
// change while it is down (a limit raised, not enough) recreates its pod with it at once; the records
// follow it. No other member serves on that spec, so the member is not replaced when the replacement
// policy ends (a new member would be made from the same spec): its pod is rolled back, recreated on
// its claim from the revision of the spec it served on, keeping its member ID, and the rollout restarts
// no other member: Progressing says RolloutFailed and what to do, with a Warning event. While that
// holds, and before it while the rollout tries the spec, another member whose pod goes (a node drained) comes back as it served too, not on the spec
// that did not run, and so does the rolled-back member when it crash-loops on its old pod, and a
// member whose claim lost the record of the spec it served on (that of its pod is recorded); a scale-up
// makes the new member's pod from the spec the rolled-back member serves on. A change of the spec starts the rollout again, and the records of the rollback go.
func TestRolloutOntoUntriedSpecRolledBack(t *testing.T) {
	const policy = 20 * time.Second
	u := restartedOntoUntriedSpec(t, testutil.EtcdCluster("untried", testutil.InNamespace("ns-rolledback"), testutil.WithReplicas(3)),
		&etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{Duration: policy}}, "127.0.0.194", "127.0.0.195", "127.0.0.196")
	c, members, names, hosts, oldHash, newHash, first, name := u.c, u.members, u.names, u.hosts, u.oldHash, u.newHash, u.first, u.name
	pods, claims, ids := u.pods, u.claims, u.ids
	records := func(want string) {
		t.Helper()
		pvc := getClaim(t, c, name)
		if got := pvc.Annotations[etcdv1beta1.AnnotationRolledOnto]; got != want {
			t.Errorf("claim of %s records %s=%q, want %q", name, etcdv1beta1.AnnotationRolledOnto, got, want)
		}
		if got := pvc.Annotations[etcdv1beta1.AnnotationServedSpec]; got != oldHash {
			t.Errorf("claim of %s records it served on spec hash %q, want %q", name, got, oldHash)
		}
		rev := &appsv1.ControllerRevision{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.RevisionName(c, oldHash)}, rev); err != nil {
			t.Errorf("the revision of the spec %s served on: %v", name, err)
		} else if !metav1.IsControlledBy(rev, c) || rev.Labels[etcdv1beta1.LabelSpecHash] != oldHash {
			t.Errorf("controllerrevision %s: owners %v, labels %v", rev.Name, rev.OwnerReferences, rev.Labels)
		}
	}
	records(newHash)

	// A second change while it is down reaches it at once; the records follow it.
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("300Mi")
	})
	secondHash := resources.Options{}.SpecHash(c)
	testutil.Eventually(t, waitTimeout, name+" recreated with the second change", func(context.Context) error {
		p, err := getPod(c, name)
		if err != nil {
			return err
		}
		if got := p.Annotations[etcdv1beta1.AnnotationSpecHash]; got != secondHash {
			return fmt.Errorf("pod %s has spec hash %q, want %q", name, got, secondHash)
		}
		return nil
	})
	markCrashLoop(t, c, name)
	records(secondHash)

	// While the rollout tries the spec on it, before any rollback, another member's pod goes (its node
	// failed): it comes back from the spec its claim records it serves on, not as a second member on a
	// spec nothing says runs (one of three serving, no quorum, until the rollback).
	lost := names[(first+2)%3]
	testutil.Eventually(t, waitTimeout, "the pod "+lost+" serves on recorded on its claim during the trial", func(context.Context) error {
		if got := getClaim(t, c, lost).Annotations[etcdv1beta1.AnnotationServedSpec]; got != oldHash {
			return fmt.Errorf("claim of %s records it served on spec hash %q, want %q", lost, got, oldHash)
		}
		return nil
	})
	if err := k8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: lost}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, lost+" recreated from the spec it served on", func(context.Context) error {
		p, err := getPod(c, lost)
		if err != nil {
			return err
		}
		if p.UID == pods[lost] {
			return fmt.Errorf("pod %s not recreated yet", lost)
		}
		if got := p.Annotations[etcdv1beta1.AnnotationSpecHash]; got != oldHash {
			t.Fatalf("pod %s recreated with spec hash %q while the rollout tries the spec on %s, want the one it served on, %q", lost, got, name, oldHash)
		}
		pods[lost] = p.UID // othersKept: recreated by this test, not restarted by the rollout
		return nil
	})
	waitEvent(t, c, "RecreatedMember", "the rolling update is trying that on "+name)
	if pvc := getClaim(t, c, name); pvc.Annotations[etcdv1beta1.AnnotationRolledBackFrom] != "" {
		t.Fatalf("%s rolled back before %s was recreated: the trial was not tested", name, lost)
	}
	runPods(t, c, map[string]string{lost: hosts[(first+2)%3]})

	testutil.Eventually(t, waitTimeout, "Degraded says when "+name+" is rolled back", func(context.Context) error {
		d := condition(getCluster(t, c), etcdv1beta1.ConditionDegraded)
		if d == nil || !strings.Contains(d.Message, name+" is down since") || !strings.Contains(d.Message, "it is rolled back at") || strings.Contains(d.Message, "replaced at") {
			return fmt.Errorf("degraded %+v", d)
		}
		return nil
	})
	others := u.othersKept

	// Once down for the policy (counted from the restart), the member is rolled back: its pod is
	// recreated as it served, on its claim, with its member ID.
	testutil.Eventually(t, policy+waitTimeout, name+" rolled back to the pod it served on", func(context.Context) error {
		p, err := getPod(c, name)
		if err != nil {
			return err
		}
		if got := p.Annotations[etcdv1beta1.AnnotationSpecHash]; got != oldHash {
			return fmt.Errorf("pod %s has spec hash %q, want %q", name, got, oldHash)
		}
		// built as it served: the same etcd container as a member that still runs the old spec
		kept, err := getPod(c, names[(first+1)%3])
		if err != nil {
			return err
		}
		got, want := p.Spec.Containers[0], kept.Spec.Containers[0]
		if got.Image != want.Image || !equality.Semantic.DeepEqual(got.Resources, want.Resources) || !equality.Semantic.DeepEqual(got.LivenessProbe, want.LivenessProbe) ||
			len(got.Command) != len(want.Command) {
			t.Errorf("pod %s rolled back has etcd container %+v, want one like %s's, still on the old spec: %+v", name, got, kept.Name, want)
		}
		return nil
	})
	pvc := getClaim(t, c, name)
	if pvc.UID != claims[name] || pvc.Annotations[etcdv1beta1.AnnotationRolledBackFrom] != secondHash || pvc.Annotations[etcdv1beta1.AnnotationRolledOnto] != "" ||
		!strings.Contains(pvc.Annotations[etcdv1beta1.AnnotationRollbackReason], "CrashLoopBackOff") {
		t.Errorf("claim of %s (UID %s, was %s) has annotations %v: want %s=%s, a reason naming the crash loop, and no %s", name, pvc.UID, claims[name],
			pvc.Annotations, etcdv1beta1.AnnotationRolledBackFrom, secondHash, etcdv1beta1.AnnotationRolledOnto)
	}
	if err := others(); err != nil {
		t.Error(err)
	}
	// the revision of the spec that did not run keeps a copy of the record, for the claim's loss
	testutil.Eventually(t, waitTimeout, "the rollback recorded on the revision of the spec that did not run", func(ctx context.Context) error {
		rev := &appsv1.ControllerRevision{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.RevisionName(c, secondHash)}, rev); err != nil {
			return err
		}
		if got, want := rev.Annotations[etcdv1beta1.AnnotationRolledBackClaim], name+"/"+string(claims[name]); got != want ||
			rev.Annotations[etcdv1beta1.AnnotationServedSpec] != oldHash || !strings.Contains(rev.Annotations[etcdv1beta1.AnnotationRollbackReason], "CrashLoopBackOff") {
			return fmt.Errorf("controllerrevision %s has annotations %v, want %s=%s, %s=%s and the reason", rev.Name, rev.Annotations,
				etcdv1beta1.AnnotationRolledBackClaim, want, etcdv1beta1.AnnotationServedSpec, oldHash)
		}
		return nil
	})
	// deleted by someone, that revision is made again with the copy (the claim may be going too)
	failedRev := &appsv1.ControllerRevision{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.RevisionName(c, secondHash)}, failedRev); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(context.Background(), failedRev); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the deleted revision made again with the copy", func(ctx context.Context) error {
		rev := &appsv1.ControllerRevision{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.RevisionName(c, secondHash)}, rev); err != nil {
			return err
		}
		if rev.UID == failedRev.UID {
			return errors.New("not deleted yet")
		}
		if got := rev.Annotations[etcdv1beta1.AnnotationRolledBackClaim]; got != name+"/"+string(claims[name]) {
			return fmt.Errorf("controllerrevision %s made again with %s=%q", rev.Name, etcdv1beta1.AnnotationRolledBackClaim, got)
		}
		return nil
	})
	waitWarning(t, c, etcdv1beta1.ReasonRolloutFailed, "Rolling back member "+name)
	// the member comes back on the pod it served on
	members[first].Restart(t)
	runPods(t, c, map[string]string{name: hosts[first]})
	testutil.Eventually(t, waitTimeout, "3 healthy members, Progressing RolloutFailed", func(context.Context) error {
		got := getCluster(t, c)
		p := condition(got, etcdv1beta1.ConditionProgressing)
		if p == nil || p.Reason != etcdv1beta1.ReasonRolloutFailed || !strings.Contains(p.Message, name+" was rolled back") || !strings.Contains(p.Message, etcdv1beta1.AnnotationRolledBackFrom) {
			return fmt.Errorf("progressing %+v", p)
		}
		healthy := 0
		for _, m := range got.Status.Members {
			if m.Healthy {
				healthy++
			}
		}
		if healthy != 3 {
			return fmt.Errorf("%d healthy members: %+v", healthy, got.Status.Members)
		}
		if got.Status.Phase != etcdv1beta1.PhaseRunning { // nothing is being upgraded
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		return nil
	})
	if listed := memberList(t, members[(first+1)%3].ClientURL()); len(listed) != 3 || !slices.ContainsFunc(listed, func(m etcd.Member) bool { return m.ID == ids[name] }) {
		t.Errorf("members %+v after the rollback, want %s with ID %s among 3", listed, name, etcd.FormatID(ids[name]))
	}
	// the rollout does not try the spec again
	testutil.Consistently(t, 5*time.Second, "no member restarted onto the spec that did not run", func(context.Context) error {
		p, err := getPod(c, name)
		if err != nil {
			return err
		}
		if got := p.Annotations[etcdv1beta1.AnnotationSpecHash]; got != oldHash {
			return fmt.Errorf("pod %s restarted again, onto spec hash %q", name, got)
		}
		return others()
	})

	// Turning rollbacks off makes no new one, and keeps this one: the rollout still restarts no member.
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Recovery.RollBackFailedRollouts = ptr.To(false) })
	testutil.Consistently(t, 5*time.Second, "the rollback held with rollbacks turned off", func(context.Context) error {
		p, err := getPod(c, name)
		if err != nil {
			return err
		}
		if got := p.Annotations[etcdv1beta1.AnnotationSpecHash]; got != oldHash {
			return fmt.Errorf("pod %s restarted onto spec hash %q after rollbacks were turned off", name, got)
		}
		if pc := condition(getCluster(t, c), etcdv1beta1.ConditionProgressing); pc == nil || pc.Reason != etcdv1beta1.ReasonRolloutFailed {
			return fmt.Errorf("progressing %+v", pc)
		}
		return others()
	})
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Recovery.RollBackFailedRollouts = nil })

	// Another member's pod goes (a node drained): it comes back as it served, from the record its claim
	// got while the rollback holds.
	other := names[(first+1)%3]
	testutil.Eventually(t, waitTimeout, "the pod "+other+" served on recorded on its claim", func(context.Context) error {
		if got := getClaim(t, c, other).Annotations[etcdv1beta1.AnnotationServedSpec]; got != oldHash {
			return fmt.Errorf("claim of %s records it served on spec hash %q, want %q", other, got, oldHash)
		}
		return nil
	})
	if err := k8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: other}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, other+" recreated as it served", func(context.Context) error {
		p, err := getPod(c, other)
		if err != nil {
			return err
		}
		if p.UID == pods[other] {
			return fmt.Errorf("pod %s not recreated yet", other)
		}
		if got := p.Annotations[etcdv1beta1.AnnotationSpecHash]; got != oldHash {
			t.Fatalf("pod %s recreated with spec hash %q, want the one it served on, %q", other, got, oldHash)
		}
		return nil
	})

	runPods(t, c, map[string]string{other: hosts[(first+1)%3]})

	// The rolled-back member crash-loops on the pod it was rolled back to (its node, say): down for half
	// the policy, its pod is recreated from the spec it served on again, never from the one that did not
	// run, and its claim gets no record of a restart onto that spec.
	rbPod, err := getPod(c, name)
	if err != nil {
		t.Fatal(err)
	}
	members[first].Stop()
	markCrashLoop(t, c, name)
	testutil.Eventually(t, policy+waitTimeout, name+" recreated from the spec it served on", func(context.Context) error {
		p, err := getPod(c, name)
		if err != nil {
			return err
		}
		if p.UID == rbPod.UID {
			return fmt.Errorf("pod %s not recreated yet", name)
		}
		if got := p.Annotations[etcdv1beta1.AnnotationSpecHash]; got != oldHash {
			t.Fatalf("pod %s recreated with spec hash %q while it is rolled back, want the one it served on, %q", name, got, oldHash)
		}
		return nil
	})
	if pvc := getClaim(t, c, name); pvc.Annotations[etcdv1beta1.AnnotationRolledOnto] != "" || pvc.Annotations[etcdv1beta1.AnnotationRolledBackFrom] != secondHash {
		t.Errorf("claim of %s has annotations %v: want no %s, and %s=%s kept", name, pvc.Annotations, etcdv1beta1.AnnotationRolledOnto, etcdv1beta1.AnnotationRolledBackFrom, secondHash)
	}
	members[first].Restart(t)
	runPods(t, c, map[string]string{name: hosts[first]})

	// A member whose claim has no record of the spec it served on (one added during the hold and down
	// before a pass recorded it) gets the spec of its pod recorded before that pod is recreated, and
	// comes back on it too.
	third := (first + 2) % 3
	thirdPod, err := getPod(c, names[third])
	if err != nil {
		t.Fatal(err)
	}
	members[third].Stop()
	markCrashLoop(t, c, names[third])
	testutil.Eventually(t, waitTimeout, names[third]+" seen down", func(context.Context) error {
		for _, m := range getCluster(t, c).Status.Members {
			if m.Name == names[third] && !m.Healthy {
				return nil
			}
		}
		return fmt.Errorf("%s not seen down yet", names[third])
	})
	testutil.Eventually(t, waitTimeout, "the record of the spec "+names[third]+" served on removed", func(ctx context.Context) error {
		pvc := getClaim(t, c, names[third])
		if _, ok := pvc.Annotations[etcdv1beta1.AnnotationServedSpec]; !ok {
			return nil
		}
		delete(pvc.Annotations, etcdv1beta1.AnnotationServedSpec)
		if err := k8s.Update(ctx, pvc); err != nil {
			return err
		}
		return errors.New("removed: looking again")
	})
	testutil.Eventually(t, policy+waitTimeout, names[third]+" recreated from the spec of its pod", func(context.Context) error {
		p, err := getPod(c, names[third])
		if err != nil {
			return err
		}
		if p.UID == thirdPod.UID {
			return fmt.Errorf("pod %s not recreated yet", names[third])
		}
		if got := p.Annotations[etcdv1beta1.AnnotationSpecHash]; got != oldHash {
			t.Fatalf("pod %s recreated with spec hash %q while %s is rolled back, want the one of its pod, %q", names[third], got, name, oldHash)
		}
		return nil
	})
	if got := getClaim(t, c, names[third]).Annotations[etcdv1beta1.AnnotationServedSpec]; got != oldHash {
		t.Errorf("claim of %s records it served on %q, want %q", names[third], got, oldHash)
	}
	members[third].Restart(t)
	runPods(t, c, map[string]string{names[third]: hosts[third]})

	// A scale-up goes on: the new member's pod is made from the spec the rolled-back member serves on,
	// which ran, not from the current spec.
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](5) })
	testutil.Eventually(t, waitTimeout, "the new member's pod made from the spec that ran", func(context.Context) error {
		p, err := getPod(c, "untried-3")
		if err != nil {
			return err
		}
		if got := p.Annotations[etcdv1beta1.AnnotationSpecHash]; got != oldHash {
			t.Fatalf("pod untried-3 made from spec hash %q while %s is rolled back, want %q, the spec it serves on", got, name, oldHash)
		}
		if pc := condition(getCluster(t, c), etcdv1beta1.ConditionProgressing); pc != nil && strings.Contains(pc.Message, "Not adding") {
			return fmt.Errorf("progressing %+v", pc)
		}
		if listed := memberList(t, members[(first+1)%3].ClientURL()); len(listed) != 4 {
			return fmt.Errorf("members %+v, want untried-3 added as a learner", listed)
		}
		return nil
	})
	// made once: not deleted and made again pass after pass
	made, err := getPod(c, "untried-3")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Consistently(t, 3*time.Second, "the new member's pod kept", func(context.Context) error {
		p, err := getPod(c, "untried-3")
		if err != nil {
			return fmt.Errorf("pod untried-3: %w", err)
		}
		if p.UID != made.UID || p.DeletionTimestamp != nil {
			return errors.New("pod untried-3 recreated or being deleted")
		}
		return nil
	})
	added := getClaim(t, c, "untried-3").UID
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](3) })
	finishClaimDeletion(t, c, added)
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.RevisionName(c, secondHash)}, &appsv1.ControllerRevision{}); err != nil {
		t.Errorf("the revision of the spec that did not run, kept while it is current: %v", err)
	}

	// A change of the spec starts the rollout again; the records of the rollback go.
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("400Mi")
	})
	thirdHash := resources.Options{}.SpecHash(c)
	testutil.Eventually(t, waitTimeout, "the rollback records gone, a member restarted onto the new change", func(ctx context.Context) error {
		for _, key := range []string{etcdv1beta1.AnnotationRolledBackFrom, etcdv1beta1.AnnotationRollbackReason} {
			if v, ok := getClaim(t, c, name).Annotations[key]; ok {
				return fmt.Errorf("claim of %s still has %s=%s", name, key, v)
			}
		}
		for _, n := range names {
			if p, err := getPod(c, n); err == nil && p.DeletionTimestamp == nil && p.Annotations[etcdv1beta1.AnnotationSpecHash] == thirdHash {
				return nil
			}
		}
		return errors.New("no member on the new change yet")
	})
	// the revision of the spec that did not run goes, once no pod or record has it
	testutil.Eventually(t, waitTimeout, "no revision of the spec that did not run", func(ctx context.Context) error {
		revs := &appsv1.ControllerRevisionList{}
		if err := k8s.List(ctx, revs, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		for _, rev := range revs.Items {
			if rev.Labels[etcdv1beta1.LabelSpecHash] == secondHash {
				return fmt.Errorf("controllerrevision %s still there", rev.Name)
			}
		}
		return nil
	})
}

// getClaim returns the claim of member name of c.
func getClaim(t *testing.T, c *etcdv1beta1.EtcdCluster, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(name)}, pvc); err != nil {
		t.Fatal(err)
	}
	return pvc
}

// TestFixedSpecReachesCrashLoopingMembersWithoutQuorum: two of three members crash-loop on their pods
// (a spec that let each of them start and took them down later), so the cluster has no quorum and etcd
// does not answer. A change of the spec (the fix) recreates their two pods with it at once, on their
// claims, with no membership change; the member whose etcd still runs keeps its pod.
func TestFixedSpecReachesCrashLoopingMembersWithoutQuorum(t *testing.T) {
	c, members, names, _ := runningCluster(t, testutil.EtcdCluster("refix", testutil.InNamespace("ns-refix"), testutil.WithReplicas(3)), "127.0.0.111", "127.0.0.112", "127.0.0.113")
	pods, claims := podAndClaimUIDs(t, c, names)
	for _, i := range []int{1, 2} {
		members[i].Stop()
		markCrashLoop(t, c, names[i])
	}
	testutil.Eventually(t, waitTimeout, "phase QuorumLost", func(context.Context) error {
		if got := getCluster(t, c); got.Status.Phase != etcdv1beta1.PhaseQuorumLost {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		return nil
	})
	// the crash-looping pods are left as they are while the spec is unchanged
	for _, n := range names[1:] {
		if p, err := getPod(c, n); err != nil || p.UID != pods[n] {
			t.Fatalf("pod %s recreated before the spec changed (%v)", n, err)
		}
	}

	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("200Mi")}}}
	})
	hash := resources.Options{}.SpecHash(c)
	testutil.Eventually(t, waitTimeout, "the crash-looping members' pods recreated with the fixed spec", func(context.Context) error {
		for _, n := range names[1:] {
			p, err := getPod(c, n)
			if err != nil {
				return err
			}
			if p.UID == pods[n] || p.Annotations[etcdv1beta1.AnnotationSpecHash] != hash {
				return fmt.Errorf("pod %s: the same pod, or spec hash %q, want %q", n, p.Annotations[etcdv1beta1.AnnotationSpecHash], hash)
			}
		}
		return nil
	})
	if p, err := getPod(c, names[0]); err != nil || p.UID != pods[names[0]] {
		t.Errorf("pod %s, whose etcd runs, was recreated (%v)", names[0], err)
	}
	for _, n := range names {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(n)}, pvc); err != nil || pvc.UID != claims[n] || pvc.DeletionTimestamp != nil {
			t.Errorf("claim of %s replaced or being deleted (%v)", n, err)
		}
	}
}

// awaitPodHash waits until the pod of member name of c was built from the spec of hash (what names it).
func awaitPodHash(t *testing.T, c *etcdv1beta1.EtcdCluster, name, hash, what string) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, name+" recreated with "+what, func(context.Context) error {
		p, err := getPod(c, name)
		if err != nil {
			return err
		}
		if got := p.Annotations[etcdv1beta1.AnnotationSpecHash]; got != hash {
			return fmt.Errorf("pod %s has spec hash %q, want %q", name, got, hash)
		}
		return nil
	})
}

// untriedRestart is what restartedOntoUntriedSpec set up.
type untriedRestart struct {
	c                *etcdv1beta1.EtcdCluster
	members          []*testenv.EtcdMember
	names, hosts     []string
	oldHash, newHash string
	// first is the index of the member the rollout restarted first, name its name
	first        int
	name         string
	pods, claims map[string]types.UID
	ids          map[string]uint64
}

// othersKept returns an error when a member other than the first one restarted was restarted too.
func (u untriedRestart) othersKept() error {
	for i, n := range u.names {
		if i == u.first {
			continue
		}
		if p, err := getPod(u.c, n); err != nil {
			return err
		} else if p.UID != u.pods[n] {
			return fmt.Errorf("%s was restarted too", n)
		}
	}
	return nil
}

// restartedOntoUntriedSpec runs cluster c on hosts with spec.recovery recovery, changes its spec (a
// memory request) so that a rolling update restarts a first member, and makes that member's etcd not
// come back on the new spec (stopped, its pod crash-looping); the UIDs, hashes and member IDs are from
// before the change.
func restartedOntoUntriedSpec(t *testing.T, c *etcdv1beta1.EtcdCluster, recovery *etcdv1beta1.RecoverySpec, hosts ...string) untriedRestart {
	t.Helper()
	c, members, names, hosts := runningCluster(t, c, hosts...)
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Recovery = recovery })
	runDisruptionController(t, c)
	oldHash := resources.Options{}.SpecHash(c)
	pods, claims := podAndClaimUIDs(t, c, names)
	ids := map[string]uint64{}
	for _, m := range memberList(t, members[0].ClientURL()) {
		ids[m.Name] = m.ID
	}

	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("200Mi")}}}
	})
	newHash := resources.Options{}.SpecHash(c)
	first := -1
	testutil.Eventually(t, waitTimeout, "the rollout restarts a first member", func(context.Context) error {
		for i, n := range names {
			if p, err := getPod(c, n); err == nil && p.UID != pods[n] {
				first = i
				return nil
			}
		}
		return errors.New("no member restarted yet")
	})
	name := names[first]
	// The fault: the restarted member's etcd does not come back on the new spec.
	members[first].Stop()
	markCrashLoop(t, c, name)
	return untriedRestart{c: c, members: members, names: names, hosts: hosts, oldHash: oldHash, newHash: newHash, first: first, name: name, pods: pods, claims: claims, ids: ids}
}

// podAndClaimUIDs returns the UIDs of the pods and of the claims of members names of c, by name.
func podAndClaimUIDs(t *testing.T, c *etcdv1beta1.EtcdCluster, names []string) (pods, claims map[string]types.UID) {
	t.Helper()
	pods, claims = map[string]types.UID{}, map[string]types.UID{}
	for _, n := range names {
		p, err := getPod(c, n)
		if err != nil {
			t.Fatal(err)
		}
		pods[n] = p.UID
		pvc := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(n)}, pvc); err != nil {
			t.Fatal(err)
		}
		claims[n] = pvc.UID
	}
	return pods, claims
}

// markNotReady sets the pod's Ready condition False, as kubelet does when its readiness probe fails.
func markNotReady(t *testing.T, c *etcdv1beta1.EtcdCluster, name string) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, "pod "+name+" not ready", func(context.Context) error {
		p, err := getPod(c, name)
		if err != nil {
			return err
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
		return k8s.Status().Update(context.Background(), p)
	})
}

// markCrashLoop sets the pod's etcd container to CrashLoopBackOff after an exit with code 1, as the
// kubelet reports an etcd that exits on start, and its Ready condition False.
func markCrashLoop(t *testing.T, c *etcdv1beta1.EtcdCluster, name string) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, "pod "+name+" crash-looping", func(context.Context) error {
		p, err := getPod(c, name)
		if err != nil {
			return err
		}
		image := ""
		for _, ctr := range p.Spec.Containers {
			if ctr.Name == resources.EtcdContainer {
				image = ctr.Image
			}
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: resources.EtcdContainer, Image: image, ImageID: "sha256:0123", RestartCount: 2,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}},
		}}
		return k8s.Status().Update(context.Background(), p)
	})
}

// finishClaimDeletion waits for the claim of that UID to be deleted and finishes its deletion as
// kube-controller-manager would (dropping kubernetes.io/pvc-protection once no pod uses it).
func finishClaimDeletion(t *testing.T, c *etcdv1beta1.EtcdCluster, uid types.UID) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, "claim "+string(uid)+" deleted", func(context.Context) error {
		list := &corev1.PersistentVolumeClaimList{}
		if err := k8s.List(context.Background(), list, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		for i := range list.Items {
			pvc := &list.Items[i]
			if pvc.UID != uid {
				continue
			}
			if pvc.DeletionTimestamp == nil {
				return fmt.Errorf("claim %s not being deleted", pvc.Name)
			}
			if len(pvc.Finalizers) > 0 {
				pvc.Finalizers = nil
				if err := k8s.Update(context.Background(), pvc); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			return fmt.Errorf("claim %s finishing its deletion", pvc.Name)
		}
		return nil
	})
}

// TestCorruptMemberReplacedAndAlarmDisarmed: etcd raises the CORRUPT alarm for one member (its data
// diverged; the cluster refuses writes). The operator removes that member at once, whatever the
// replacement policy, disarms the alarm once etcd no longer lists the member (writes are accepted
// again: Available turns True), and adds a new learner under the member's name with a new ID. The
// member leads when the alarm is raised: it is removed through another voter (the leader stops as it
// applies its own removal and answers "server stopped", and the removal went unreported: no event).
func TestCorruptMemberReplacedAndAlarmDisarmed(t *testing.T) {
	c, members, _, _ := runningCluster(t, testutil.EtcdCluster("rot", testutil.InNamespace("ns-rot"), testutil.WithReplicas(3)), "127.0.0.61", "127.0.0.62", "127.0.0.63")
	updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		// replacing "down" members is off: a CORRUPT alarm is replaced anyway
		c.Spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{}}
	})
	oldID := uint64(members[1].Etcd.Server.MemberID())
	ctx := context.Background()
	for _, m := range members {
		if lead := uint64(m.Etcd.Server.Leader()); lead == uint64(m.Etcd.Server.MemberID()) && lead != oldID {
			if err := m.Etcd.Server.MoveLeader(ctx, lead, oldID); err != nil {
				t.Fatalf("move leadership to rot-1: %v", err)
			}
		}
	}
	testutil.Eventually(t, waitTimeout, "rot-1 leads", func(context.Context) error {
		if lead := uint64(members[0].Etcd.Server.Leader()); lead != oldID {
			return fmt.Errorf("leader %x", lead)
		}
		return nil
	})
	if _, err := members[0].Etcd.Server.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: oldID, Alarm: pb.AlarmType_CORRUPT}); err != nil {
		t.Fatalf("raise the CORRUPT alarm of rot-1: %v", err)
	}
	testutil.Eventually(t, waitTimeout, "rot-1 removed, its alarm disarmed", func(ctx context.Context) error {
		for _, m := range memberList(t, members[0].ClientURL()) {
			if m.ID == oldID {
				return errors.New("rot-1 still listed")
			}
		}
		resp, err := members[0].Etcd.Server.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
		if err != nil {
			return err
		}
		if len(resp.Alarms) > 0 {
			return fmt.Errorf("alarms %v", resp.Alarms)
		}
		return nil
	})
	for reason, text := range map[string]string{"MemberRemoved": "CORRUPT alarm", "DisarmedCorrupt": etcd.FormatID(oldID)} {
		waitEvent(t, c, reason, text)
	}
	testutil.Eventually(t, waitTimeout, "Available again", func(context.Context) error {
		if a := condition(getCluster(t, c), etcdv1beta1.ConditionAvailable); a == nil || a.Status != metav1.ConditionTrue {
			return fmt.Errorf("available %+v", a)
		}
		return nil
	})
	oldPod, _ := getPod(c, "rot-1")
	testutil.Eventually(t, waitTimeout, "the replaced member's pod deleted", func(context.Context) error {
		if p, err := getPod(c, "rot-1"); err == nil && oldPod != nil && p.UID == oldPod.UID && p.DeletionTimestamp == nil {
			return errors.New("still there")
		}
		return nil
	})
	waitNewLearner(t, c, members[0], "rot-1", oldID)
}

// TestLearnerRestartedWithCurrentMemberList: while learner lst-3 has not started (a scale-up from 3 to
// 5), voter lst-2 loses its pod and claim and is removed. The learner's pod named lst-2 in its
// --initial-cluster, which etcd would refuse ("error validating peerURLs"): it is recreated with the
// member list etcd has now, on its own claim.
func TestLearnerRestartedWithCurrentMemberList(t *testing.T) {
	c, members, _, hosts := runningCluster(t, testutil.EtcdCluster("lst", testutil.InNamespace("ns-lst"), testutil.WithReplicas(3)), "127.0.0.181", "127.0.0.182", "127.0.0.183")
	setReplicas(t, c, 5)
	var learnerPod *corev1.Pod
	testutil.Eventually(t, waitTimeout, "pod lst-3 created", func(context.Context) error {
		var err error
		learnerPod, err = getPod(c, "lst-3")
		return err
	})
	if !slices.ContainsFunc(learnerPod.Spec.Containers[0].Command, func(a string) bool {
		return strings.HasPrefix(a, "--initial-cluster=") && strings.Contains(a, "lst-2=")
	}) {
		t.Fatalf("learner pod command %q: want lst-2 in --initial-cluster", learnerPod.Spec.Containers[0].Command)
	}

	members[2].Stop()
	lostID := uint64(members[2].Etcd.Server.MemberID())
	deleteMemberAndClaim(t, c, "lst-2")
	testutil.Eventually(t, waitTimeout, "lst-2 removed from etcd", func(context.Context) error {
		for _, m := range memberList(t, members[0].ClientURL()) {
			if m.ID == lostID {
				return errors.New("lst-2 still listed")
			}
		}
		return nil
	})
	opts := resources.Options{}
	want := "--initial-cluster=" + strings.Join([]string{
		"lst-0=http://" + hosts[0] + ":2380", "lst-1=http://" + hosts[1] + ":2380", "lst-3=" + opts.PeerURL(c, "lst-3")}, ",")
	testutil.Eventually(t, waitTimeout, "lst-3 recreated with the current member list", func(context.Context) error {
		p, err := getPod(c, "lst-3")
		if err != nil {
			return err
		}
		if p.UID == learnerPod.UID || !slices.Contains(p.Spec.Containers[0].Command, want) {
			return fmt.Errorf("pod %s command %q, want %q", p.UID, p.Spec.Containers[0].Command, want)
		}
		return nil
	})
	waitEvent(t, c, "RestartingLearner", "lst-3")
}

// TestDataNotOwnReplacedAtOnce: a member's pod reports that its verify-data init container found the
// data directory empty (exit code 3): that is data loss, so the member is removed at once, whatever
// spec.recovery.replaceUnhealthyMemberAfter says (here its default, 5 minutes), and the status names
// the problem.
func TestDataNotOwnReplacedAtOnce(t *testing.T) {
	c, members, _, _ := runningCluster(t, testutil.EtcdCluster("own", testutil.InNamespace("ns-own"), testutil.WithReplicas(3)), "127.0.0.184", "127.0.0.185", "127.0.0.186")
	oldID := uint64(members[1].Etcd.Server.MemberID())
	members[1].Stop()
	const why = "member 1 of cluster 2 had started on this volume, and /var/lib/etcd/data is now empty: its data is gone"
	failPod(t, c, "own-1", func(st *corev1.PodStatus) {
		st.InitContainerStatuses = []corev1.ContainerStatus{{Name: resources.VerifyDataContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: resources.ExitNotOwn, Reason: "Error", Message: why}}}}
	})
	removedAtOnce(t, members[0], "own-1", oldID, "the data check failed")
	waitWarning(t, c, "MemberRemoved", "its data directory is not its own ("+why)
}

// TestUnreadableDataReplacedAtOnce: a member's etcd crash-loops saying that its database is not a
// valid database (what etcd 3.6.16 logs on a database overwritten with random bytes, as the kubelet
// keeps it as the termination message): no restart heals that, so the member is removed at once,
// whatever spec.recovery.replaceUnhealthyMemberAfter says (here its default, 5 minutes), with a
// Warning event that names etcd's error.
func TestUnreadableDataReplacedAtOnce(t *testing.T) {
	logTail, err := os.ReadFile("../model/testdata/etcd-db-invalid.log")
	if err != nil {
		t.Fatal(err)
	}
	c, members, _, _ := runningCluster(t, testutil.EtcdCluster("unread", testutil.InNamespace("ns-unread"), testutil.WithReplicas(3)), "127.0.0.251", "127.0.0.252", "127.0.0.253")
	oldID := uint64(members[1].Etcd.Server.MemberID())
	members[1].Stop()
	failPod(t, c, "unread-1", func(st *corev1.PodStatus) {
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.EtcdContainer, RestartCount: 2,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: string(logTail)}}}}
	})
	removedAtOnce(t, members[0], "unread-1", oldID, "etcd said it cannot read its database")
	waitWarning(t, c, "MemberRemoved", "etcd cannot read its data (failed to open database: invalid database)")
}

// failPod writes the status of member name's pod as its kubelet would for a pod that is not Ready,
// with what fail sets (the state of its containers).
func failPod(t *testing.T, c *etcdv1beta1.EtcdCluster, name string, fail func(*corev1.PodStatus)) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, name+"'s pod fails", func(ctx context.Context) error {
		p, err := getPod(c, name)
		if err != nil {
			return err
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
		fail(&p.Status)
		return k8s.Status().Update(ctx, p)
	})
}

// removedAtOnce waits until etcd, asked through member m, no longer lists member name's old ID, and
// fails the test unless that took at most 30 s after what (the fault) was reported: a removal that
// waited for spec.recovery.replaceUnhealthyMemberAfter (5 minutes by default) would not.
func removedAtOnce(t *testing.T, m *testenv.EtcdMember, name string, oldID uint64, what string) {
	t.Helper()
	start := time.Now()
	testutil.Eventually(t, waitTimeout, name+" removed", func(context.Context) error {
		for _, l := range memberList(t, m.ClientURL()) {
			if l.ID == oldID {
				return errors.New(name + " still listed")
			}
		}
		return nil
	})
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("removed %s after %s, want within 30 s", took, what)
	}
}

// TestStuckTerminatingMemberReplaced: a member's node is gone: its etcd stops answering and its pod,
// deleted, stays terminating for good (no kubelet finishes the deletion). After
// spec.recovery.replaceUnhealthyMemberAfter the member is removed from etcd; its pod, now stuck well
// past its grace period, is deleted without waiting for the kubelet; a new learner takes its name.
func TestStuckTerminatingMemberReplaced(t *testing.T) {
	c, members, _, _ := runningCluster(t, testutil.EtcdCluster("stuck", testutil.InNamespace("ns-stuck"), testutil.WithReplicas(3)), "127.0.0.187", "127.0.0.188", "127.0.0.189")
	updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{Duration: 20 * time.Second}}
	})
	ctx := context.Background()
	oldID := uint64(members[2].Etcd.Server.MemberID())
	pod, err := getPod(c, "stuck-2")
	if err != nil {
		t.Fatal(err)
	}
	// bound to a node, the pod's deletion waits for that node's kubelet, which is gone
	if err := k8s.SubResource("binding").Create(ctx, pod, &corev1.Binding{Target: corev1.ObjectReference{Kind: "Node", Name: "gone"}}); err != nil {
		t.Fatalf("bind pod stuck-2: %v", err)
	}
	members[2].Stop()
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(1)); err != nil {
		t.Fatal(err)
	}
	if p, err := getPod(c, "stuck-2"); err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("pod stuck-2 after a graceful delete on a gone node: %v, %v; want it terminating", p, err)
	}
	testutil.Eventually(t, 2*waitTimeout, "stuck-2 removed from etcd", func(context.Context) error {
		for _, m := range memberList(t, members[0].ClientURL()) {
			if m.ID == oldID {
				return errors.New("stuck-2 still listed")
			}
		}
		return nil
	})
	testutil.Eventually(t, model.StuckTerminating+waitTimeout, "the stuck pod deleted", func(context.Context) error {
		if p, err := getPod(c, "stuck-2"); err == nil && p.UID == pod.UID {
			return fmt.Errorf("pod %s still there, terminating since %s", p.Name, p.DeletionTimestamp)
		}
		return nil
	})
	waitEvent(t, c, "DeletedMemberResources", "stuck terminating")
	waitNewLearner(t, c, members[0], "stuck-2", oldID)
}

// waitNewLearner finishes the deletion of the claim of member name of cluster c, replaced (no kubelet
// or garbage collector here), and waits until etcd, as member from lists it, has a new learner of that
// name, under another ID than oldID.
func waitNewLearner(t *testing.T, c *etcdv1beta1.EtcdCluster, from *testenv.EtcdMember, name string, oldID uint64) {
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(name)}, claim); err == nil {
		finishClaimDeletion(t, c, claim.UID)
	}
	testutil.Eventually(t, waitTimeout, "a new learner "+name, func(context.Context) error {
		for _, m := range memberList(t, from.ClientURL()) {
			if m.IsLearner && m.ID != oldID && m.PeerURLs[0] == (resources.Options{}).PeerURL(c, name) {
				return nil
			}
		}
		return errors.New("no new learner " + name)
	})
}

// TestServingGateSetWhenUnreachable: the operator sets a member pod's readiness gate once the member
// has served it on its client URL; a pod made again whose etcd the operator cannot reach gets it once
// the kubelet reports its etcd container ready and running for longer than model.JoinGrace (etcd has
// published itself by then), so that it joins the client Service although the operator is cut off.
func TestServingGateSetWhenUnreachable(t *testing.T) {
	c, members, _, _ := runningCluster(t, testutil.EtcdCluster("servgate", testutil.InNamespace("ns-servgate"), testutil.WithReplicas(1)), "127.0.0.48")
	waitServing(t, c, "servgate-0", "etcd served the operator on its client URL", "")

	// etcd stops and its pod is deleted: the operator makes the pod again, and reaches no etcd in it
	old, err := getPod(c, "servgate-0")
	if err != nil {
		t.Fatal(err)
	}
	members[0].Stop()
	if err := k8s.Delete(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	var again *corev1.Pod
	testutil.Eventually(t, waitTimeout, "servgate-0's pod made again", func(context.Context) error {
		p, err := getPod(c, "servgate-0")
		if err != nil {
			return err
		}
		if p.UID == old.UID {
			return errors.New("still the old pod")
		}
		again = p
		return nil
	})
	if podCondition(again, resources.ServingCondition) {
		t.Fatalf("the pod made again has %s before its etcd ran", resources.ServingCondition)
	}
	// the kubelet reports its etcd ready (its probe passed) and running for 20 s
	testutil.Eventually(t, waitTimeout, "servgate-0's pod reported running", func(ctx context.Context) error {
		p, err := getPod(c, "servgate-0")
		if err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = "127.0.0.48"
		p.Status.PodIPs = []corev1.PodIP{{IP: "127.0.0.48"}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.EtcdContainer, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-20 * time.Second))}}}}
		return k8s.Status().Update(ctx, p)
	})
	waitServing(t, c, "servgate-0", "etcd has passed its readiness probe, and run for longer than", again.UID)
}

// podCondition reports whether pod has condition t with status True.
func podCondition(pod *corev1.Pod, t corev1.PodConditionType) bool {
	cond := model.PodCondition(pod, t)
	return cond != nil && cond.Status == corev1.ConditionTrue
}

// waitServing waits until the pod name of c (of UID uid, unless "") has the readiness gate's condition
// resources.ServingCondition True, with a message that contains text.
func waitServing(t *testing.T, c *etcdv1beta1.EtcdCluster, name, text string, uid types.UID) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, name+"'s pod has "+string(resources.ServingCondition), func(context.Context) error {
		p, err := getPod(c, name)
		if err != nil {
			return err
		}
		if uid != "" && p.UID != uid {
			return fmt.Errorf("pod %s is not the one awaited", p.UID)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == resources.ServingCondition && cond.Status == corev1.ConditionTrue && strings.Contains(cond.Message, text) {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", p.Status.Conditions)
	})
}
