package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// memberList reads the member list through a member of the embedded cluster.
func memberList(t *testing.T, endpoint string) []etcd.Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cli, err := etcd.New(ctx, etcd.Config{Endpoints: []string{endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	_, ms, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func setReplicas(t *testing.T, c *etcdv1beta1.EtcdCluster, n int32) {
	t.Helper()
	updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To(n) })
}

// updateSpec changes the cluster's spec with mutate on its latest version, again on a conflict with
// the operator's own writes (finalizer, status), and returns the updated cluster.
func updateSpec(t *testing.T, c *etcdv1beta1.EtcdCluster, mutate func(*etcdv1beta1.EtcdCluster)) *etcdv1beta1.EtcdCluster {
	t.Helper()
	var got *etcdv1beta1.EtcdCluster
	testutil.Eventually(t, waitTimeout, "update the spec", func(context.Context) error {
		got = getCluster(t, c)
		mutate(got)
		return k8s.Update(context.Background(), got)
	})
	return got
}

// TestScaleUpAddsOneLearner: growing a formed cluster adds one learner in etcd, under the lowest free
// name, and creates its claim and pod to join the running cluster (state existing, every current
// member in --initial-cluster); no second member is added while it has not started.
func TestScaleUpAddsOneLearner(t *testing.T) {
	c := createCluster(t, "grow", 3)
	names := []string{"grow-0", "grow-1", "grow-2"}
	hosts := []string{"127.0.0.31", "127.0.0.32", "127.0.0.33"}
	members := testenv.StartEtcd(t, names, hosts)
	runPods(t, c, map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]})
	testutil.Eventually(t, waitTimeout, "Running", func(context.Context) error {
		if got := getCluster(t, c); got.Status.Phase != etcdv1beta1.PhaseRunning {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		return nil
	})
	// etcd refuses membership changes until members have been connected for 5 s; the operator retries.
	setReplicas(t, c, 5)
	opts := resources.Options{}
	var pod *corev1.Pod
	testutil.Eventually(t, waitTimeout, "pod grow-3 created", func(context.Context) error {
		var err error
		pod, err = getPod(c, "grow-3")
		return err
	})
	ms := memberList(t, members[0].ClientURL())
	var learners []etcd.Member
	for _, m := range ms {
		if m.IsLearner {
			learners = append(learners, m)
		}
	}
	if len(ms) != 4 || len(learners) != 1 || learners[0].PeerURLs[0] != opts.PeerURL(c, "grow-3") {
		t.Fatalf("member list %+v: want the 3 members and one learner with grow-3's peer URL", ms)
	}
	cmd := pod.Spec.Containers[0].Command
	for _, want := range []string{"--initial-cluster-state=existing", "--name=grow-3"} {
		if !slices.Contains(cmd, want) {
			t.Errorf("pod grow-3 command lacks %q: %q", want, cmd)
		}
	}
	wantInitial := fmt.Sprintf("--initial-cluster=grow-0=http://%s:2380,grow-1=http://%s:2380,grow-2=http://%s:2380,grow-3=%s",
		hosts[0], hosts[1], hosts[2], opts.PeerURL(c, "grow-3"))
	if !slices.Contains(cmd, wantInitial) {
		t.Errorf("pod grow-3 command lacks %q: %q", wantInitial, cmd)
	}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: "data-grow-3"}, &corev1.PersistentVolumeClaim{}); err != nil {
		t.Errorf("claim of grow-3: %v", err)
	}
	// The learner cannot start here (its peer URL names a pod DNS name): the operator waits, with one
	// learner, and says so.
	testutil.Eventually(t, waitTimeout, "Scaling, waiting for the learner", func(context.Context) error {
		got := getCluster(t, c)
		p := condition(got, etcdv1beta1.ConditionProgressing)
		if got.Status.Phase != etcdv1beta1.PhaseScaling || p == nil || p.Reason != etcdv1beta1.ReasonWaiting {
			return fmt.Errorf("phase %s progressing %+v", got.Status.Phase, p)
		}
		return nil
	})
	// one learner added, counted on this cluster's series
	if n := promtestutil.ToFloat64(metrics.MembershipOperations.WithLabelValues(c.Namespace, c.Name, "add_learner", "success")); n != 1 {
		t.Errorf("etcd_operator_membership_operations_total{namespace=%q,cluster=%q,operation=add_learner,result=success} = %v, want 1", c.Namespace, c.Name, n)
	}
	if _, err := getPod(c, "grow-4"); !apierrors.IsNotFound(err) {
		t.Errorf("a second member was added while a learner is in flight (get grow-4: %v)", err)
	}
	if n := len(memberList(t, members[0].ClientURL())); n != 4 {
		t.Errorf("%d members, want 4: one learner at a time", n)
	}
}

// TestScaleDownRemovesFollowers: shrinking 3 -> 1 removes the two followers from etcd first, then
// deletes their pods and claims; the leader stays.
func TestScaleDownRemovesFollowers(t *testing.T) {
	c := createCluster(t, "shrink", 3)
	names := []string{"shrink-0", "shrink-1", "shrink-2"}
	hosts := []string{"127.0.0.41", "127.0.0.42", "127.0.0.43"}
	members := testenv.StartEtcd(t, names, hosts)
	runPods(t, c, map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]})
	var leader string
	testutil.Eventually(t, waitTimeout, "Running", func(context.Context) error {
		got := getCluster(t, c)
		if got.Status.Phase != etcdv1beta1.PhaseRunning {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		leader = got.Status.Leader
		return nil
	})
	setReplicas(t, c, 1)
	var leaderEndpoint string
	for i, n := range names {
		if n == leader {
			leaderEndpoint = members[i].ClientURL()
		}
	}
	testutil.Eventually(t, 60*time.Second, "one member left in etcd", func(context.Context) error {
		if got := getCluster(t, c); len(got.Status.Members) != 1 {
			return fmt.Errorf("members %+v", got.Status.Members)
		}
		return nil
	})
	ms := memberList(t, leaderEndpoint)
	if len(ms) != 1 || ms[0].Name != leader {
		t.Errorf("member list %+v, want only the leader %s", ms, leader)
	}
	// The removed members' pods and claims are deleted; with no kubelet and no kube-controller-manager
	// here, finish their deletion as those would.
	for _, n := range names {
		if n == leader {
			continue
		}
		testutil.Eventually(t, waitTimeout, "pod and claim of "+n+" deleted", func(context.Context) error {
			p, err := getPod(c, n)
			if err == nil && p.DeletionTimestamp == nil {
				return fmt.Errorf("pod %s not being deleted", n)
			}
			if err == nil {
				if err := k8s.Delete(context.Background(), p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			pvc := &corev1.PersistentVolumeClaim{}
			err = k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: "data-" + n}, pvc)
			if err == nil && pvc.DeletionTimestamp == nil {
				return fmt.Errorf("claim of %s still there", n)
			}
			if err == nil && len(pvc.Finalizers) > 0 {
				// kube-controller-manager would drop kubernetes.io/pvc-protection once no pod uses it
				pvc.Finalizers = nil
				if err := k8s.Update(context.Background(), pvc); err != nil {
					return err
				}
				return fmt.Errorf("claim of %s finishing its deletion", n)
			}
			return nil
		})
	}
	testutil.Eventually(t, waitTimeout, "Running with one member", func(context.Context) error {
		got := getCluster(t, c)
		if got.Status.Phase != etcdv1beta1.PhaseRunning || got.Status.ReadyReplicas != 1 {
			return fmt.Errorf("phase %s, %d ready, conditions %+v", got.Status.Phase, got.Status.ReadyReplicas, got.Status.Conditions)
		}
		return nil
	})
	// Both removals show as events of their own, each naming its member, of type Normal (a scale-down
	// deletes no data a member needs): the event recorder folds events that differ only in their note
	// into one series that keeps the first note.
	var removed []string
	for _, n := range names {
		if n != leader {
			removed = append(removed, n)
		}
	}
	testutil.Eventually(t, waitTimeout, "one MemberRemoved event per removed member", func(context.Context) error {
		return eventsNamingEach(c, "MemberRemoved", removed)
	})
}

// eventsNamingEach returns nil when the cluster's events of reason are one per name of names, each
// of type Normal, with its name in its note and its member's pod as the related object.
func eventsNamingEach(c *etcdv1beta1.EtcdCluster, reason string, names []string) error {
	evs := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), evs, client.InNamespace(c.Namespace)); err != nil {
		return err
	}
	var got []string
	for _, e := range evs.Items {
		if e.Regarding.Name != c.Name || e.Reason != reason {
			continue
		}
		related := "<none>"
		if e.Related != nil {
			related = e.Related.Kind + "/" + e.Related.Name
		}
		got = append(got, fmt.Sprintf("%s: %s (related %s, series %v)", e.Type, e.Note, related, e.Series != nil))
	}
	for _, n := range names {
		found := 0
		for _, e := range evs.Items {
			if e.Regarding.Name == c.Name && e.Reason == reason && e.Type == corev1.EventTypeNormal && e.Related != nil && e.Related.Kind == "Pod" &&
				e.Related.Name == n && strings.Contains(e.Note, n+" ") {
				found++
			}
		}
		if found != 1 {
			return fmt.Errorf("%d %s events about %s, want 1; the cluster's %s events: %q", found, reason, n, reason, got)
		}
	}
	return nil
}

// TestRetryLater: a learner not caught up and etcd's strict reconfiguration check are tried again
// within verdict.RequeueRetry; no leader at the usual requeue of the step; another error is an error.
func TestRetryLater(t *testing.T) {
	c := testutil.EtcdCluster("retry")
	for _, tc := range []struct {
		err   error
		after time.Duration
		fails bool
	}{
		{fmt.Errorf("promote learner 1: %w", etcd.ErrLearnerNotReady), verdict.RequeueRetry, false},
		{fmt.Errorf("remove member 2: %w: %w", etcd.ErrUnhealthyCluster, errors.New("re-configuration failed due to not enough started members")), verdict.RequeueRetry, false},
		{fmt.Errorf("promote: %w", etcd.ErrNoLeader), 0, false},
		{errors.New("permission denied"), 0, true},
	} {
		st, err := retryLater(c, "promote", tc.err, "promote learner retry-1")
		switch {
		case tc.fails && err == nil:
			t.Errorf("%v: step %+v, want an error", tc.err, st)
		case !tc.fails && (err != nil || st == nil || st.Reason != etcdv1beta1.ReasonWaiting || st.After != tc.after):
			t.Errorf("%v: step %+v, error %v; want a Waiting step within %s", tc.err, st, err, tc.after)
		}
	}
}

// TestScaleDownDrainsBeforeRemoval: a scale-down first takes the pods of the members it removes out of
// the client Service (their readiness gate set False, reason Removing), and removes the members from
// etcd only after that: drainSettle after the kubelet reports the pods not Ready, or after drainWait
// when it does not. The leader's pod keeps its gate. Before any pod is drained, the
// PodDisruptionBudget holds evictions (minAvailable one more than the pods, IfHealthyBudget), and the
// drain waits until the disruption controller (the test plays it) has computed its status: an eviction
// of a drained pod is then refused, Ready or not. The budget lets evictions go again once the members
// are removed.
func TestScaleDownDrainsBeforeRemoval(t *testing.T) {
	c, members, names, _ := runningCluster(t, testutil.EtcdCluster("drain", testutil.InNamespace("ns-drain"), testutil.WithReplicas(5)),
		"127.0.0.54", "127.0.0.55", "127.0.0.56", "127.0.0.57", "127.0.0.58")
	for _, n := range names {
		waitServing(t, c, n, "etcd served the operator on its client URL", "")
	}
	leaderEndpoint, leader := leaderOf(t, c, members, names)
	// 5 -> 3 with no kubelet to report the drained pods not Ready: the removals wait out drainWait.
	// 3 -> 1 with each pod reported not Ready as soon as it is drained, as the kubelet would.
	for _, step := range []struct {
		replicas int32
		kubelet  bool
	}{{3, false}, {1, true}} {
		listed := map[string]bool{}
		for _, m := range memberList(t, leaderEndpoint) {
			listed[m.Name] = true
		}
		setReplicas(t, c, step.replicas)
		start := time.Now()
		drainedAt, removedAt := map[string]time.Time{}, map[string]time.Time{}
		evicted := map[string]error{} // a dry-run eviction of each drained pod once reported not Ready
		var heldAt, observedAt time.Time
		// every poll: when the budget is first seen holding evictions, and its status computed so (as the
		// disruption controller would), when each pod is first seen drained, and its member first seen
		// gone from etcd
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("scaled down to %d", step.replicas), func(ctx context.Context) error {
			pdb := &policyv1.PodDisruptionBudget{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), pdb); err != nil {
				return err
			}
			if _, held := resources.HeldSince(pdb); held && heldAt.IsZero() {
				heldAt = time.Now()
			}
			if _, held := resources.HeldSince(pdb); held && pdb.Status.ObservedGeneration < pdb.Generation {
				pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DesiredHealthy: int32(pdb.Spec.MinAvailable.IntValue()),
					CurrentHealthy: int32(len(listed)), ExpectedPods: int32(len(listed))}
				if err := k8s.Status().Update(ctx, pdb); err == nil && observedAt.IsZero() {
					observedAt = time.Now()
				}
			}
			now := map[string]bool{}
			for _, m := range memberList(t, leaderEndpoint) {
				now[m.Name] = true
			}
			for n := range listed {
				if _, seen := removedAt[n]; !seen && !now[n] {
					removedAt[n] = time.Now()
				}
				p, err := getPod(c, n)
				if err != nil {
					continue
				}
				if _, seen := drainedAt[n]; seen {
					if _, tried := evicted[n]; !tried && now[n] && step.kubelet && !podCondition(p, corev1.PodReady) {
						evicted[n] = k8s.SubResource("eviction").Create(ctx, p, &policyv1.Eviction{
							DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}, Preconditions: &metav1.Preconditions{UID: &p.UID}}})
					}
					continue
				}
				if cond := model.PodCondition(p, resources.ServingCondition); cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == resources.ReasonRemoving {
					drainedAt[n] = time.Now()
					if observedAt.IsZero() {
						t.Errorf("%s drained before the PodDisruptionBudget's hold of evictions took effect", n)
					}
					if step.kubelet {
						p.Status.Conditions = slices.DeleteFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
						p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()})
						if err := k8s.Status().Update(ctx, p); err != nil {
							delete(drainedAt, n) // again on the next poll
						}
					}
				}
			}
			if len(now) > int(step.replicas) {
				return fmt.Errorf("%d members; drained %v", len(now), slices.Collect(maps.Keys(drainedAt)))
			}
			return nil
		})
		for n, at := range removedAt {
			d, ok := drainedAt[n]
			switch {
			case n == leader:
				t.Errorf("the leader %s removed", n)
			case !ok || d.After(at):
				t.Errorf("%d -> %d: %s removed after %v, its pod drained after %v (seen %v): want the drain first", len(listed), step.replicas, n,
					at.Sub(start).Round(10*time.Millisecond), d.Sub(start).Round(10*time.Millisecond), ok)
			case !step.kubelet && at.Sub(d) < drainWait-2*time.Second: // lastTransitionTime is kept to the second
				t.Errorf("%s, whose pod stayed Ready, removed %v after its drain was seen, want about %v", n, at.Sub(d), drainWait)
			case step.kubelet && at.Sub(d) < drainSettle-100*time.Millisecond:
				t.Errorf("%s removed %v after its pod was reported not Ready, want %v for kube-proxy to follow", n, at.Sub(d), drainSettle)
			case !observedAt.IsZero() && d.Sub(observedAt) > holdWait/2:
				t.Errorf("%s drained %v after the budget's status was computed, want right after it", n, d.Sub(observedAt))
			default:
				t.Logf("%d -> %d: %s drained after %v (hold set after %v, in effect after %v), removed after %v", len(listed), step.replicas, n,
					d.Sub(start).Round(10*time.Millisecond), heldAt.Sub(start).Round(10*time.Millisecond), observedAt.Sub(start).Round(10*time.Millisecond),
					at.Sub(start).Round(10*time.Millisecond))
			}
			if err, tried := evicted[n]; step.kubelet && (!tried || !apierrors.IsTooManyRequests(err)) {
				t.Errorf("a dry-run eviction of %s's drained pod, not Ready, while etcd listed it: tried %v, %v; want it refused (429)", n, tried, err)
			}
		}
		if len(removedAt) != len(listed)-int(step.replicas) {
			t.Errorf("%d -> %d: removed %v", len(listed), step.replicas, removedAt)
		}
		awaitPDBReleased(t, c, step.replicas)
	}
	if p, err := getPod(c, leader); err != nil || !podCondition(p, resources.ServingCondition) {
		t.Errorf("the leader's pod: %v, want %s still True", err, resources.ServingCondition)
	}
}

// TestDrainSkippedWithoutDisruptionController: when no disruption controller computes the
// PodDisruptionBudget's status (as in this test), its hold of evictions never takes effect, and a
// scale-down removes its members holdWait later without draining them: a pod out of the Service but
// open to evictions would be worse than a connection handed to a member that stops. A Warning event
// says so, and the budget lets evictions go again once the members are removed.
func TestDrainSkippedWithoutDisruptionController(t *testing.T) {
	c, members, names, _ := runningCluster(t, testutil.EtcdCluster("skip", testutil.InNamespace("ns-drain-skip"), testutil.WithReplicas(3)),
		"127.0.0.64", "127.0.0.65", "127.0.0.66")
	for _, n := range names {
		waitServing(t, c, n, "etcd served the operator on its client URL", "")
	}
	leaderEndpoint, _ := leaderOf(t, c, members, names)
	setReplicas(t, c, 1)
	var heldAt, removedAt time.Time
	testutil.Eventually(t, 30*time.Second, "scaled down to 1", func(ctx context.Context) error {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), pdb); err != nil {
			return err
		}
		if _, held := resources.HeldSince(pdb); held && heldAt.IsZero() {
			heldAt = time.Now()
		}
		for _, n := range names {
			if p, err := getPod(c, n); err == nil {
				if cond := model.PodCondition(p, resources.ServingCondition); cond != nil && cond.Reason == resources.ReasonRemoving {
					t.Errorf("%s drained with no hold of evictions in effect", n)
				}
			}
		}
		if len(memberList(t, leaderEndpoint)) > 1 {
			return errors.New("more than 1 member")
		}
		removedAt = time.Now()
		return nil
	})
	switch {
	case heldAt.IsZero():
		t.Error("the PodDisruptionBudget was never seen holding evictions")
	case removedAt.Sub(heldAt) < holdWait-500*time.Millisecond: // heldAt is late by up to a poll
		t.Errorf("removed %v after the hold was set, want %v for it to take effect first", removedAt.Sub(heldAt), holdWait)
	}
	waitEvent(t, c, "DrainSkipped", "its status does not show it 2s later")
	awaitPDBReleased(t, c, 1)
}

// leaderOf returns the client URL and name of c's leader among members (named names).
func leaderOf(t *testing.T, c *etcdv1beta1.EtcdCluster, members []*testenv.EtcdMember, names []string) (string, string) {
	t.Helper()
	leader := getCluster(t, c).Status.Leader
	for i, n := range names {
		if n == leader {
			return members[i].ClientURL(), leader
		}
	}
	t.Fatalf("no leader among %v: %q", names, leader)
	return "", ""
}

// awaitPDBReleased waits until c's PodDisruptionBudget is as it is outside a scale-down for replicas
// members: minAvailable their quorum, unhealthyPodEvictionPolicy AlwaysAllow, no hold recorded.
func awaitPDBReleased(t *testing.T, c *etcdv1beta1.EtcdCluster, replicas int32) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, "the PodDisruptionBudget as before the scale-down", func(ctx context.Context) error {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), pdb); err != nil {
			return err
		}
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow || pdb.Spec.MinAvailable.IntValue() != int(resources.Quorum(replicas)) ||
			pdb.Annotations[etcdv1beta1.AnnotationEvictionsHeldSince] != "" {
			return fmt.Errorf("minAvailable %s, unhealthyPodEvictionPolicy %v, annotations %v", pdb.Spec.MinAvailable.String(), p, pdb.Annotations)
		}
		return nil
	})
}

// TestHoldKept: a hold of evictions goes on while a voter's pod is drained for its removal, even in a
// pass where etcd did not answer (the status's word counts), and while a voter taken back into the
// Service (the scale-down undone) has a pod that is not Ready yet; it ends once etcd no longer lists
// the drained member, for a learner, and after holdMax.
func TestHoldKept(t *testing.T) {
	now := time.Now()
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-2"},
		Spec: corev1.PodSpec{ReadinessGates: []corev1.PodReadinessGate{{ConditionType: resources.ServingCondition}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: resources.ServingCondition, Status: corev1.ConditionFalse, Reason: resources.ReasonRemoving, LastTransitionTime: metav1.Now()}}}}
	cluster := func(answered, listed, learner bool) *model.Cluster {
		c := testutil.EtcdCluster("demo", testutil.WithReplicas(1))
		c.Status.Members = []etcdv1beta1.MemberStatus{{Name: "demo-2", ID: etcd.FormatID(3), Role: etcdv1beta1.RoleVoter}}
		in := model.Input{Cluster: c, Pods: []corev1.Pod{*pod.DeepCopy()}, Now: now}
		if answered {
			in.Etcd = &model.Etcd{Health: map[uint64]error{}}
			if listed {
				in.Etcd.Members = []etcd.Member{{ID: 3, Name: "demo-2", IsLearner: learner}}
				in.Etcd.Health[3] = nil
			}
		}
		return model.Build(in)
	}
	// the scale-down undone: marked serving again, its pod not Ready yet, then Ready
	taken := func(ready corev1.ConditionStatus) *model.Cluster {
		m := cluster(true, true, false)
		m.Members[0].Pod.Status.Conditions = []corev1.PodCondition{{Type: resources.ServingCondition, Status: corev1.ConditionTrue, Reason: "Serving"},
			{Type: corev1.PodReady, Status: ready}}
		return m
	}
	undone, ready := taken(corev1.ConditionFalse), taken(corev1.ConditionTrue)
	for _, tc := range []struct {
		name          string
		m             *model.Cluster
		since         time.Time
		keep, expired bool
	}{
		{"a drained voter etcd lists", cluster(true, true, false), now, true, false},
		{"a voter taken back into the Service, its pod not Ready yet", undone, now, true, false},
		{"a voter taken back into the Service, its pod Ready", ready, now, false, false},
		{"a drained voter, etcd not answering", cluster(false, false, false), now, true, false},
		{"a drained member etcd no longer lists", cluster(true, false, false), now, false, false},
		{"a drained learner", cluster(true, true, true), now, false, false},
		{"a drained voter, held for holdMax", cluster(true, true, false), now.Add(-holdMax), false, true},
	} {
		keep, expired := holdKept(tc.m, tc.since)
		if keep != tc.keep || expired != tc.expired {
			t.Errorf("%s: kept %v, expired %v; want %v, %v", tc.name, keep, expired, tc.keep, tc.expired)
		}
	}
}

// TestKeptDrained: a pod drained for its member's removal stays out of the client Service while the
// planner still removes that member, and for good once etcd no longer lists it or it stops serving; it
// is marked serving again at once when the member serves and the removal is no longer planned (the
// scale-down was undone).
func TestKeptDrained(t *testing.T) {
	member := func(status corev1.ConditionStatus, reason string, listed, serving bool) *model.Member {
		m := &model.Member{Name: "demo-2", Pod: &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: resources.ServingCondition, Status: status, Reason: reason, LastTransitionTime: metav1.Now()}}}}}
		if listed {
			m.Etcd = &etcd.Member{ID: 3, Name: "demo-2"}
			if !serving {
				m.Health = errors.New("context deadline exceeded")
			}
		}
		return m
	}
	planned := map[string]bool{"demo-2": true}
	for _, tc := range []struct {
		name    string
		mem     *model.Member
		planned map[string]bool
		want    bool
	}{
		{"drained, its removal planned", member(corev1.ConditionFalse, resources.ReasonRemoving, true, true), planned, true},
		{"drained, its removal no longer planned", member(corev1.ConditionFalse, resources.ReasonRemoving, true, true), nil, false},
		{"drained and removed (etcd lists it no more)", member(corev1.ConditionFalse, resources.ReasonRemoving, false, false), nil, true},
		{"drained, and not serving", member(corev1.ConditionFalse, resources.ReasonRemoving, true, false), nil, true},
		{"serving", member(corev1.ConditionTrue, "Serving", true, true), planned, false},
		{"False for another reason", member(corev1.ConditionFalse, "Other", true, true), planned, false},
		{"no condition", &model.Member{Name: "demo-2", Pod: &corev1.Pod{}}, planned, false},
	} {
		if got := keptDrained(tc.mem, tc.planned); got != tc.want {
			t.Errorf("%s: kept drained %v, want %v", tc.name, got, tc.want)
		}
	}
}
