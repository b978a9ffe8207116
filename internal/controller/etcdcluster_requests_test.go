package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// request sets annotation key of cluster c to value, by a merge patch, as `kubectl etcd` does.
func request(t *testing.T, c *etcdv1beta1.EtcdCluster, key, value string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value)
	if err := k8s.Patch(context.Background(), c.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("annotate %s=%s: %v", key, value, err)
	}
}

// waitRequestDone waits until the operator removed annotation key from c.
func waitRequestDone(t *testing.T, c *etcdv1beta1.EtcdCluster, key string) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, key+" removed", func(context.Context) error {
		if v, ok := getCluster(t, c).Annotations[key]; ok {
			return fmt.Errorf("still %s=%s", key, v)
		}
		return nil
	})
}

// etcdLeader returns the name of the member the running members agree leads, "" when they do not.
func etcdLeader(members []*testenv.EtcdMember) string {
	lead := ""
	for _, m := range members {
		if m.Etcd.Server.Lead() == uint64(m.Etcd.Server.MemberID()) {
			lead = m.Name
		}
	}
	return lead
}

// eventsSince returns the notes of c's events of reason first written at or after since, oldest first.
func eventsSince(t *testing.T, c *etcdv1beta1.EtcdCluster, reason string, since time.Time) []string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(c.Namespace)); err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].EventTime.Before(&list.Items[j].EventTime) })
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == c.Name && e.Reason == reason && !e.EventTime.Time.Before(since) {
			out = append(out, e.Note)
		}
	}
	return out
}

// TestRequestsByAnnotation: on a real 3-member etcd cluster, etcd.etcdkit.dev/move-leader moves
// leadership to the member named; etcd.etcdkit.dev/defragment defragments every member once, the
// leader last after leadership moved away from it; each annotation is removed once done, with an
// event. Requests that can never be carried out (an unknown member, a learner) are removed with a
// RequestRefused event, and change nothing.
func TestRequestsByAnnotation(t *testing.T) {
	c, members, names, _ := runningCluster(t, testutil.EtcdCluster("req", testutil.InNamespace("ns-req"), testutil.WithReplicas(3)),
		"127.0.0.221", "127.0.0.222", "127.0.0.223")
	ctx := context.Background()
	first := etcdLeader(members)
	target := names[0]
	if target == first {
		target = names[1]
	}

	request(t, c, etcdv1beta1.AnnotationMoveLeader, target)
	waitRequestDone(t, c, etcdv1beta1.AnnotationMoveLeader)
	if got := etcdLeader(members); got != target {
		t.Errorf("leader %q after move-leader=%s", got, target)
	}
	waitEvent(t, c, "MovedLeader", fmt.Sprintf("Moved leadership from %s to %s", first, target))
	testutil.Eventually(t, waitTimeout, "status.leader "+target, func(context.Context) error {
		if l := getCluster(t, c).Status.Leader; l != target {
			return fmt.Errorf("status.leader %q", l)
		}
		return nil
	})

	asked := time.Now().Add(-time.Second)
	request(t, c, etcdv1beta1.AnnotationDefragment, "2026-12-03T10:00:00Z")
	waitRequestDone(t, c, etcdv1beta1.AnnotationDefragment)
	waitEvent(t, c, "Defragmented", "Defragmented every voting member as etcd.etcdkit.dev/defragment=2026-12-03T10:00:00Z asked")
	var order []string
	for _, note := range eventsSince(t, c, "Defragmented", asked) {
		if f := strings.Fields(note); f[1] != "every" {
			order = append(order, f[1])
		}
	}
	if len(order) != 3 || order[2] != target {
		t.Errorf("defragmented %v, want each member once and the leader %s last", order, target)
	}
	if err := findEvent(ctx, c, "", "MovedLeader", "from "+target); err != nil {
		t.Errorf("leadership was not moved before the leader's defragmentation: %v", err)
	}
	if st := getCluster(t, c).Status.Maintenance; st == nil || len(st.PendingDefragmentation) > 0 || st.RequestedDefragmentation != "" ||
		st.LastDefragmentation == nil || st.LastDefragmentation.Member != target {
		t.Errorf("status.maintenance %+v, want nothing pending, no request, the last defragmentation %s's", st, target)
	}

	// refused: nothing changes
	leader, ids := etcdLeader(members), memberIDs(t, members[0])
	for _, tc := range []struct{ key, value, why string }{
		{etcdv1beta1.AnnotationMoveLeader, "nosuch", "the cluster has no member nosuch (its members: req-0, req-1, req-2)"},
		{etcdv1beta1.AnnotationReplaceMember, "req-7", "the cluster has no member req-7"},
	} {
		request(t, c, tc.key, tc.value)
		waitRequestDone(t, c, tc.key)
		waitEvent(t, c, etcdv1beta1.ReasonRequestRefused, tc.key+"="+tc.value+": "+tc.why)
	}
	if got := etcdLeader(members); got != leader {
		t.Errorf("leader %s after refused requests, was %s", got, leader)
	}
	if got := memberIDs(t, members[0]); got != ids {
		t.Errorf("members %s after refused requests, were %s", got, ids)
	}

	// a learner (the scale-up's first; without a kubelet its pod never runs) can neither lead nor be
	// replaced
	setReplicas(t, c, 5)
	testutil.Eventually(t, waitTimeout, "learner req-3 added", func(context.Context) error {
		for _, m := range memberList(t, members[0].ClientURL()) {
			if m.IsLearner && strings.Contains(m.PeerURLs[0], "req-3") {
				return nil
			}
		}
		return errors.New("no learner req-3")
	})
	for _, key := range []string{etcdv1beta1.AnnotationMoveLeader, etcdv1beta1.AnnotationReplaceMember} {
		request(t, c, key, "req-3")
		waitRequestDone(t, c, key)
		waitEvent(t, c, etcdv1beta1.ReasonRequestRefused, key+"=req-3: req-3 is a learner")
	}
	if got := etcdLeader(members); got != leader {
		t.Errorf("leader %s after refused requests, was %s", got, leader)
	}
}

// memberIDs returns etcd's member list as one string of sorted "name=ID" pairs.
func memberIDs(t *testing.T, m *testenv.EtcdMember) string {
	t.Helper()
	var out []string
	for _, em := range memberList(t, m.ClientURL()) {
		out = append(out, em.Name+"="+etcd.FormatID(em.ID))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestReplaceMemberRequest: etcd.etcdkit.dev/replace-member waits while the cluster is paused; once
// resumed, the member named, which leads, first hands leadership to a follower; then its claim and pod
// are deleted, the annotation removed with a ReplacingMember event, and, once its etcd stopped (what
// kubelet does when the pod goes), it is removed from etcd and added back under its name as a new
// learner with a new member ID on a new claim. (Without a kubelet the new learner never runs here: the
// end-to-end test TestPluginDayTwo sees the cluster whole again.)
func TestReplaceMemberRequest(t *testing.T) {
	c, members, names, _ := runningCluster(t, testutil.EtcdCluster("rpl", testutil.InNamespace("ns-rpl"), testutil.WithReplicas(3)),
		"127.0.0.225", "127.0.0.226", "127.0.0.227")
	ctx := context.Background()
	victim := etcdLeader(members)
	var idx int
	for i, n := range names {
		if n == victim {
			idx = i
		}
	}
	var oldID uint64
	for _, m := range memberList(t, members[(idx+1)%3].ClientURL()) {
		if m.Name == victim {
			oldID = m.ID
		}
	}
	oldClaim := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(victim)}, oldClaim); err != nil {
		t.Fatal(err)
	}

	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Paused = true })
	testutil.Eventually(t, waitTimeout, "paused", func(context.Context) error {
		if p := getCluster(t, c).Status.Phase; p != etcdv1beta1.PhasePaused {
			return fmt.Errorf("phase %s", p)
		}
		return nil
	})
	request(t, c, etcdv1beta1.AnnotationReplaceMember, victim)
	testutil.Eventually(t, waitTimeout, "Progressing says the request is held", func(context.Context) error {
		held := "requests held until resumed: " + etcdv1beta1.AnnotationReplaceMember + "=" + victim
		if p := condition(getCluster(t, c), etcdv1beta1.ConditionProgressing); p == nil || !strings.Contains(p.Message, held) {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	testutil.Consistently(t, 3*time.Second, "the request held while paused", func(context.Context) error {
		if getCluster(t, c).Annotations[etcdv1beta1.AnnotationReplaceMember] != victim {
			return errors.New("the annotation was removed while paused")
		}
		if _, err := getPod(c, victim); err != nil {
			return fmt.Errorf("pod %s: %w", victim, err)
		}
		return nil
	})
	updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Paused = false })

	waitRequestDone(t, c, etcdv1beta1.AnnotationReplaceMember)
	waitEvent(t, c, "MovedLeader", "Moved leadership from "+victim)
	waitEvent(t, c, "ReplacingMember", fmt.Sprintf("Replacing member %s (ID %s)", victim, etcd.FormatID(oldID)))
	if l := etcdLeader(members); l == victim || l == "" {
		t.Errorf("leader %q: want a follower of %s", l, victim)
	}
	members[idx].Stop()
	finishClaimDeletion(t, c, oldClaim.UID)
	waitReplacedOnNewClaim(t, c, members[(idx+1)%3].ClientURL(), victim, oldID, oldClaim.UID)
}

// TestClaimDeletedUnderRunningMemberReplaced: a member whose claim is deleted while its pod runs on it
// (kubernetes.io/pvc-protection holds the claim until the pod is gone) is replaced without a person
// while the other members serve: it leads, so leadership first moves to a follower; then its pod is
// deleted with a Warning event that names the claim, and, once its etcd stopped, it is removed from
// etcd and added back under its name as a new learner with a new member ID on a new claim. While
// the cluster is paused, nothing is done, and Progressing says what comes once resumed. The claim of
// that learner deleted in turn gets it removed and its pod deleted at once, and a new learner joins.
func TestClaimDeletedUnderRunningMemberReplaced(t *testing.T) {
	c, members, names, _ := runningCluster(t, testutil.EtcdCluster("doomed", testutil.InNamespace("ns-doomed"), testutil.WithReplicas(3)),
		"127.0.0.34", "127.0.0.35", "127.0.0.36")
	ctx := context.Background()
	victim := etcdLeader(members)
	idx := slices.Index(names, victim)
	var oldID uint64
	for _, m := range memberList(t, members[(idx+1)%3].ClientURL()) {
		if m.Name == victim {
			oldID = m.ID
		}
	}
	oldPod, err := getPod(c, victim)
	if err != nil {
		t.Fatal(err)
	}
	oldClaim := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(victim)}, oldClaim); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(oldClaim.Finalizers, "kubernetes.io/pvc-protection") {
		t.Fatalf("claim %s has finalizers %v: without pvc-protection its deletion would not wait for the pod", oldClaim.Name, oldClaim.Finalizers)
	}
	// paused, the operator only says what it would do
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Paused = true })
	testutil.Eventually(t, waitTimeout, "Progressing says paused", func(context.Context) error {
		if p := condition(getCluster(t, c), etcdv1beta1.ConditionProgressing); p == nil || p.Reason != etcdv1beta1.ReasonPaused {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	if err := k8s.Delete(ctx, oldClaim); err != nil {
		t.Fatal(err)
	}
	next := fmt.Sprintf("next once resumed: replace %s, whose claim %s is being deleted", victim, oldClaim.Name)
	testutil.Eventually(t, waitTimeout, "Progressing says "+next, func(context.Context) error {
		if p := condition(getCluster(t, c), etcdv1beta1.ConditionProgressing); p == nil || !strings.Contains(p.Message, next) {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	if p, err := getPod(c, victim); err != nil || p.UID != oldPod.UID || p.DeletionTimestamp != nil {
		t.Fatalf("the pod of %s went while paused (%v)", victim, err)
	}
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Paused = false })

	waitEvent(t, c, "MovedLeader", "Moved leadership from "+victim)
	waitEvent(t, c, etcdv1beta1.ReasonReplacingMember, fmt.Sprintf("Replacing member %s (ID %s): its claim %s was deleted at", victim, etcd.FormatID(oldID), oldClaim.Name))
	if l := etcdLeader(members); l == victim || l == "" {
		t.Errorf("leader %q: want a follower of %s", l, victim)
	}
	testutil.Eventually(t, waitTimeout, "the pod of "+victim+" deleted", func(context.Context) error {
		if p, err := getPod(c, victim); err == nil && p.UID == oldPod.UID && p.DeletionTimestamp == nil {
			return errors.New("still running")
		}
		return nil
	})
	members[idx].Stop()
	finishClaimDeletion(t, c, oldClaim.UID)
	survivor := members[(idx+1)%3].ClientURL()
	waitReplacedOnNewClaim(t, c, survivor, victim, oldID, oldClaim.UID)

	// the new member's claim deleted while it is still a learner (its etcd never starts here): it is
	// removed from etcd and its pod deleted at once, whatever else is under way, and a new learner
	// joins with a new ID on a new claim (restarted under its ID on empty data, the leader could
	// promote it on what the old data had acknowledged)
	var learnerID uint64
	for _, m := range memberList(t, survivor) {
		if m.IsLearner {
			learnerID = m.ID
		}
	}
	var learnerPod *corev1.Pod
	testutil.Eventually(t, waitTimeout, "the pod of learner "+victim, func(context.Context) error {
		p, err := getPod(c, victim)
		learnerPod = p
		return err
	})
	learnerClaim := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(victim)}, learnerClaim); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, learnerClaim); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, c, etcdv1beta1.ReasonReplacingMember, fmt.Sprintf("Replacing learner %s (ID %s): its claim %s was deleted at", victim, etcd.FormatID(learnerID), learnerClaim.Name))
	for _, m := range memberList(t, survivor) {
		if m.ID == learnerID {
			t.Errorf("learner %s (ID %s) still listed once its pod is deleted", victim, etcd.FormatID(learnerID))
		}
	}
	testutil.Eventually(t, waitTimeout, "the pod of learner "+victim+" deleted", func(context.Context) error {
		if p, err := getPod(c, victim); err == nil && p.UID == learnerPod.UID && p.DeletionTimestamp == nil {
			return errors.New("still there")
		}
		return nil
	})
	finishClaimDeletion(t, c, learnerClaim.UID)
	waitReplacedOnNewClaim(t, c, survivor, victim, learnerID, learnerClaim.UID)
}

// TestClaimDeletedUnderOnlyMemberKept: the claim of the only member of a cluster deleted under its
// running pod does not get the member replaced: its pod, which holds the only copy of the data, stays,
// and Degraded says the data goes when the pod stops and what to do first; a rollout does not restart
// it either.
func TestClaimDeletedUnderOnlyMemberKept(t *testing.T) {
	c, _, _, _ := runningCluster(t, testutil.EtcdCluster("lone", testutil.InNamespace("ns-lone"), testutil.WithReplicas(1)), "127.0.0.44")
	ctx := context.Background()
	pod, err := getPod(c, "lone-0")
	if err != nil {
		t.Fatal(err)
	}
	claim := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName("lone-0")}, claim); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, claim); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "Degraded says the only member's claim is being deleted", func(context.Context) error {
		d := condition(getCluster(t, c), etcdv1beta1.ConditionDegraded)
		if d == nil || d.Status != "True" || !strings.Contains(d.Message, "lone-0 is the only member, so it is not replaced") {
			return fmt.Errorf("degraded %+v", d)
		}
		return nil
	})
	// nor is it restarted by a rollout: the restart would delete the data too
	updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Labels: map[string]string{"rolled": "yes"}}
	})
	testutil.Eventually(t, waitTimeout, "the rollout paused on the only member's deleted claim", func(context.Context) error {
		p := condition(getCluster(t, c), etcdv1beta1.ConditionProgressing)
		if p == nil || p.Reason != etcdv1beta1.ReasonRolloutPaused || !strings.Contains(p.Message, "Not restarting lone-0: it is the only member and its claim data-lone-0 is being deleted") {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	testutil.Consistently(t, 3*time.Second, "the only member's pod kept", func(context.Context) error {
		p, err := getPod(c, "lone-0")
		if err != nil {
			return err
		}
		if p.UID != pod.UID || p.DeletionTimestamp != nil {
			return errors.New("pod lone-0 deleted or replaced")
		}
		return nil
	})
	finishClaimDeletion(t, c, claim.UID) // the cluster's deletion at the end waits for no finalizer
}

// TestReplaceRequestRefusedForOneMember: the member of a one-member cluster is never replaced (its
// data would be lost): the request is removed with a RequestRefused event, and the pod stays.
func TestReplaceRequestRefusedForOneMember(t *testing.T) {
	c, _, _, _ := runningCluster(t, testutil.EtcdCluster("one", testutil.InNamespace("ns-one"), testutil.WithReplicas(1)), "127.0.0.224")
	pod, err := getPod(c, "one-0")
	if err != nil {
		t.Fatal(err)
	}
	request(t, c, etcdv1beta1.AnnotationReplaceMember, "one-0")
	waitRequestDone(t, c, etcdv1beta1.AnnotationReplaceMember)
	waitEvent(t, c, etcdv1beta1.ReasonRequestRefused, "etcd.etcdkit.dev/replace-member=one-0: the cluster has one member")
	if p, err := getPod(c, "one-0"); err != nil || p.UID != pod.UID {
		t.Errorf("pod one-0 after a refused replacement: %v (uid %v, was %s)", err, p.UID, pod.UID)
	}
}

// waitReplacedOnNewClaim waits until etcd, asked through survivor, lists member victim no longer under oldID
// but as a new learner with victim's peer URL, on a claim other than the replaced member's (oldClaim).
func waitReplacedOnNewClaim(t *testing.T, c *etcdv1beta1.EtcdCluster, survivor, victim string, oldID uint64, oldClaim types.UID) {
	t.Helper()
	testutil.Eventually(t, 2*waitTimeout, "a new learner "+victim+" with a new ID on a new claim", func(ctx context.Context) error {
		var learner *etcd.Member
		for _, m := range memberList(t, survivor) {
			if m.ID == oldID {
				return fmt.Errorf("%s (ID %s) still listed", victim, etcd.FormatID(oldID))
			}
			if m.IsLearner {
				learner = &m
			}
		}
		if learner == nil || learner.PeerURLs[0] != (resources.Options{}).PeerURL(c, victim) {
			return fmt.Errorf("learner %+v: want one with %s's peer URL", learner, victim)
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(victim)}, pvc); err != nil {
			return err
		}
		if pvc.UID == oldClaim {
			return errors.New("the learner's claim is the replaced member's")
		}
		return nil
	})
}
