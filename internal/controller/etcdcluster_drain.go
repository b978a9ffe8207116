package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

const (
	// drainWait bounds how long a scale-down waits for the pods of the members it removes to leave the
	// client Service (their Ready condition False): past it, they are removed all the same. It is
	// counted from the condition's lastTransitionTime, which the API server keeps to the second: the
	// wait is 2 to 3 s.
	drainWait = 3 * time.Second
	// drainSettle is how long a drained pod must have been seen not Ready before its member is removed:
	// the EndpointSlice drops it at once, and kube-proxy then reprograms the node within its
	// minSyncPeriod (1 s by default); until then new connections to the Service may still reach it.
	drainSettle = time.Second
	// requeueDrain is how soon a pass looks again while it waits for a drain: the pod's Ready change
	// starts a pass too.
	requeueDrain = 200 * time.Millisecond
	// holdWait bounds how long a drain waits for the PodDisruptionBudget to hold evictions (the
	// disruption controller of kube-controller-manager computes its status in milliseconds): past it,
	// the pods are drained all the same.
	holdWait = 2 * time.Second
)

// drainForRemoval takes the pods of the members that removals (a scale-down's, membership.Removals)
// remove out of the client Service before etcd removes them: it sets their readiness gate
// resources.ServingCondition False (reason resources.ReasonRemoving) and returns a step that waits
// until the kubelet reports them not Ready and drainSettle has passed, at most drainWait. Removed
// first, a member stops serving while its pod is still Ready, and for up to 1.5 s the client Service
// sends new connections to an etcd that has stopped: clients see "raft: stopped", EOF and timeouts.
// Drained first, new connections go to the members that stay; a connection a client already holds to
// the removed member still breaks when its etcd stops. Only members that serve through a Ready pod with
// the gate are drained (drainable): a member that is down is not in the Service, and a replacement's
// member is not healthy. A drain whose patch fails is not waited for. nil when nothing is left to wait
// for.
//
// No pod is drained before the PodDisruptionBudget holds evictions (evictionsHeld, which
// reconcilePDB set up earlier in the pass): a drained pod is not Ready, and the budget otherwise lets a
// pod that is not Ready be evicted, which in 3 -> 1 could take both members being removed, and quorum,
// before etcd removes them.
func (r *EtcdClusterReconciler) drainForRemoval(ctx context.Context, s *scope, removals []membership.Action) *verdict.Step {
	var waiting []string
	why, holding := "", false
	var held *bool // evictionsHeld, once a pod is to be drained
	for _, a := range removals {
		mem := s.m.Member(a.Member)
		if a.Replacing || !drainable(mem) {
			continue
		}
		cond := model.PodCondition(mem.Pod, resources.ServingCondition)
		switch {
		case cond.Status == corev1.ConditionTrue:
			if held == nil {
				held = ptr.To(r.evictionsHeld(ctx, s))
			}
			if !*held {
				holding = true
				break
			}
			if err := r.setServing(ctx, s, mem, corev1.PodCondition{Type: resources.ServingCondition, Status: corev1.ConditionFalse,
				LastTransitionTime: metav1.Now(), Reason: resources.ReasonRemoving,
				Message: "the member is about to be removed (" + a.Reason + "): out of the client Service first"}); err != nil {
				continue // removed without a drain rather than never (setServing reported it)
			}
		case s.m.Now.Sub(cond.LastTransitionTime.Time) >= drainWait: // drained (drainable), but no longer waited for
			continue
		case !mem.PodReady() && s.m.Now.Sub(r.drainedUnready.since(string(mem.Pod.UID)+"@"+cond.LastTransitionTime.UTC().Format(time.RFC3339), s.m.Now)) >= drainSettle:
			continue
		}
		waiting = append(waiting, a.Member)
		if why == "" {
			why = a.Reason
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	slices.Sort(waiting)
	them := map[bool]string{true: "it", false: "them"}[len(waiting) == 1]
	msg := fmt.Sprintf("Taking %s out of the client Service before removing %s from etcd (%s)", strings.Join(waiting, ", "), them, why)
	if holding {
		msg = fmt.Sprintf("Holding evictions (PodDisruptionBudget %s) before taking %s out of the client Service and removing %s from etcd (%s)",
			s.pdb.Name, strings.Join(waiting, ", "), them, why)
	}
	step := verdict.Acting(etcdv1beta1.ReasonRemovingMember, msg)
	step.After = requeueDrain
	return step
}

// drainable reports whether mem's pod is one drainForRemoval takes out of the client Service before its
// member is removed, or has taken out: its member serves, and the pod has the readiness gate, marked
// True on a pod that is Ready, or False for the removal (reason resources.ReasonRemoving). A pod never
// marked serving was never in the Service.
func drainable(mem *model.Member) bool {
	if mem == nil || !mem.HasPod() || !resources.HasServingGate(mem.Pod) || !mem.Serving() {
		return false
	}
	cond := model.PodCondition(mem.Pod, resources.ServingCondition)
	switch {
	case cond == nil:
		return false
	case cond.Status == corev1.ConditionTrue:
		return mem.PodReady()
	default:
		return cond.Status == corev1.ConditionFalse && cond.Reason == resources.ReasonRemoving
	}
}

// holdingEvictions reports whether the PodDisruptionBudget holds evictions (resources.HoldEvictions):
// while the planner's next removals (membership.Removals of membership.Next; a scale-down's) include a
// member whose pod is drained for it or about to be (drainable). Once etcd no longer lists it, its pod
// may go.
func holdingEvictions(m *model.Cluster) bool {
	st := m.Membership(verdict.Replacements(m))
	for _, a := range membership.Removals(st, membership.Next(st)) {
		if !a.Replacing && drainable(m.Member(a.Member)) {
			return true
		}
	}
	return false
}

// evictionsHeld reports whether drainForRemoval may take pods out of the client Service: once the
// PodDisruptionBudget holds evictions and the disruption controller has computed its status so
// (resources.EvictionsHeld); when there is no budget of the cluster's to hold them; or holdWait after a
// pass first saw the budget, at its generation, not holding them (no disruption controller runs), with a
// log line.
func (r *EtcdClusterReconciler) evictionsHeld(ctx context.Context, s *scope) bool {
	if s.pdb == nil || resources.EvictionsHeld(s.pdb) {
		return true
	}
	since := r.evictionHold.since(fmt.Sprintf("%s@%d", s.pdb.UID, s.pdb.Generation), s.m.Now)
	if s.m.Now.Sub(since) < holdWait {
		return false
	}
	log.FromContext(ctx).Info("The PodDisruptionBudget does not hold evictions yet: draining all the same", "podDisruptionBudget", s.pdb.Name,
		"waited", holdWait.String(), "status", s.pdb.Status)
	return true
}

// plannedRemovals names the members the planner removes next (membership.Removals of membership.Next),
// whose pods drainForRemoval takes out of the client Service first.
func plannedRemovals(m *model.Cluster) map[string]bool {
	st := m.Membership(verdict.Replacements(m))
	out := map[string]bool{}
	for _, a := range membership.Removals(st, membership.Next(st)) {
		out[a.Member] = true
	}
	return out
}

// keptDrained reports whether mem's pod, drained for its member's removal (its serving condition False,
// reason resources.ReasonRemoving), stays out of the client Service: unless its member is still listed,
// serves, and is no longer one the planner removes next (planned; the scale-down was undone), when it
// is marked serving again at once. A removed member's pod never is.
func keptDrained(mem *model.Member, planned map[string]bool) bool {
	cond := model.PodCondition(mem.Pod, resources.ServingCondition)
	if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != resources.ReasonRemoving {
		return false
	}
	return !mem.Listed() || !mem.Serving() || planned[mem.Name]
}
