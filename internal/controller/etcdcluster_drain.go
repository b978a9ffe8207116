package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	// the members are removed without a drain, as a pod out of the Service but open to evictions could
	// take quorum with it.
	holdWait = 2 * time.Second
	// holdMax bounds a hold of evictions: a scale-down that has not removed the members it drained by
	// then (etcd keeps refusing, the operator is paused mid-drain and resumed) lets evictions go again,
	// with a Warning event, rather than block node drains.
	holdMax = time.Minute
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
// No pod is drained before the PodDisruptionBudget holds evictions (holdForDrain): a drained pod is
// not Ready, and the budget otherwise lets a pod that is not Ready be evicted, which in 3 -> 1 could
// take both members being removed, and quorum, before etcd removes them.
func (r *EtcdClusterReconciler) drainForRemoval(ctx context.Context, s *scope, removals []membership.Action) *verdict.Step {
	var waiting []string
	why, holding := "", false
	hold := holdUnknown // holdForDrain's answer, once a pod is to be drained
	for _, a := range removals {
		mem := s.m.Member(a.Member)
		if a.Replacing || !drainable(mem) {
			continue
		}
		cond := model.PodCondition(mem.Pod, resources.ServingCondition)
		switch {
		case cond.Status == corev1.ConditionTrue:
			if hold == holdUnknown {
				hold = r.holdForDrain(ctx, s)
			}
			if hold == holdSkip {
				continue // removed without a drain (holdForDrain reported it)
			}
			if hold == holdPending {
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
		return drainedForRemoval(mem)
	}
}

// drainedForRemoval reports whether mem's pod was taken out of the client Service for its member's
// removal: its readiness gate False with reason resources.ReasonRemoving.
func drainedForRemoval(mem *model.Member) bool {
	if mem.Pod == nil {
		return false
	}
	cond := model.PodCondition(mem.Pod, resources.ServingCondition)
	return cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == resources.ReasonRemoving
}

// holdKept reports whether a hold of evictions that began at since goes on: while a voter's pod is
// drained for its removal (drainedForRemoval; model.Member.Voter, which keeps the status's word when
// etcd does not answer), or a voter that serves has a pod that is not Ready (one taken back into the
// Service when the scale-down was undone, until the kubelet reports it Ready), or a voter the planner
// removes next (membership.Removals of membership.Next; a scale-down's) is still to be drained
// (drainable), for at most holdMax; expired when holdMax has passed. A learner does not vote: its pod
// may go.
func holdKept(m *model.Cluster, since time.Time) (keep, expired bool) {
	holding := false
	for _, mem := range m.Members {
		// drained, or taken back into the Service (a scale-down undone) and not Ready again yet: a
		// pod that is not Ready may otherwise be evicted whatever the budget says
		if mem.Voter() && (drainedForRemoval(mem) || mem.Serving() && mem.HasPod() && !mem.PodReady()) {
			holding = true
		}
	}
	if !holding {
		for name := range plannedRemovals(m) {
			if mem := m.Member(name); drainable(mem) && mem.Voter() {
				holding = true
			}
		}
	}
	switch {
	case !holding:
		return false, false
	case m.Now.Sub(since) >= holdMax:
		return false, true
	}
	return true, false
}

// holdState is what holdForDrain found of the PodDisruptionBudget's hold of evictions.
type holdState int

const (
	holdUnknown holdState = iota // not asked yet
	holdReady                    // evictions are held: drain
	holdPending                  // the hold is set, or being set, and not in effect yet: wait
	holdSkip                     // no hold took effect within holdWait: remove without a drain
)

// holdForDrain makes the cluster's PodDisruptionBudget hold evictions (resources.HoldEvictions) before a
// pod is drained, and says whether it does (resources.EvictionsHeld, read from the API server, not the
// cache): holdReady once the disruption controller has computed its status from the held spec;
// holdPending while it has not, for up to holdWait after the hold began; then holdSkip, with a Warning
// event: under the held spec with the status of the spec before, an eviction of a pod that is not Ready
// would still be let through, while a Ready pod's is refused until the status catches up. A cluster
// without a budget of its own (a foreign one is reported) drains at once. An error reading or patching
// the budget is logged, and waited on (holdPending).
func (r *EtcdClusterReconciler) holdForDrain(ctx context.Context, s *scope) holdState {
	if s.pdb == nil {
		return holdReady
	}
	logger := log.FromContext(ctx)
	cur := &policyv1.PodDisruptionBudget{}
	if err := r.uncached().Get(ctx, client.ObjectKeyFromObject(s.pdb), cur); err != nil {
		logger.Error(err, "Reading the PodDisruptionBudget before a drain", "podDisruptionBudget", s.pdb.Name)
		return holdPending
	}
	since, held := resources.HeldSince(cur)
	switch {
	case !held:
		patch := client.MergeFrom(cur.DeepCopy())
		resources.HoldEvictions(cur, int32(len(s.pods.Items)), s.m.Now)
		if err := r.Patch(ctx, cur, patch); err != nil {
			logger.Error(err, "Holding evictions before a drain", "podDisruptionBudget", cur.Name)
			return holdPending
		}
		r.event(s.cluster, corev1.EventTypeNormal, etcdv1beta1.ReasonHoldingEvictions, "Update", "Set PodDisruptionBudget %s to minAvailable %s, one more than the pods, "+
			"so that no eviction takes a member while a scale-down takes members out of the client Service", cur.Name, cur.Spec.MinAvailable.String())
		return holdPending
	case resources.EvictionsHeld(cur):
		return holdReady
	case s.m.Now.Sub(since) < holdWait:
		return holdPending
	}
	r.event(s.cluster, corev1.EventTypeWarning, etcdv1beta1.ReasonDrainSkipped, "Update", "Removing members without taking them out of the client Service first: "+
		"PodDisruptionBudget %s was set to hold evictions, and its status does not show it %s later (observedGeneration %d of %d, %d healthy of %d desired); is kube-controller-manager running?",
		cur.Name, holdWait, cur.Status.ObservedGeneration, cur.Generation, cur.Status.CurrentHealthy, cur.Status.DesiredHealthy)
	return holdSkip
}

// plannedRemovals names the members the planner removes next (membership.Removals of membership.Next)
// but for replacements: those of a scale-down, whose pods drainForRemoval takes out of the client
// Service first.
func plannedRemovals(m *model.Cluster) map[string]bool {
	st := m.Membership(verdict.Replacements(m))
	out := map[string]bool{}
	for _, a := range membership.Removals(st, membership.Next(st)) {
		if !a.Replacing {
			out[a.Member] = true
		}
	}
	return out
}

// keptDrained reports whether mem's pod, drained for its member's removal (its serving condition False,
// reason resources.ReasonRemoving), stays out of the client Service: unless its member is still listed,
// serves, and is no longer one the planner removes next (planned; the scale-down was undone), when it
// is marked serving again at once. A removed member's pod never is.
func keptDrained(mem *model.Member, planned map[string]bool) bool {
	if !drainedForRemoval(mem) {
		return false
	}
	return !mem.Listed() || !mem.Serving() || planned[mem.Name]
}
