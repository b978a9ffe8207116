package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
)

// drainForRemoval takes the pods of the members that removals (a scale-down's, membership.Removals)
// remove out of the client Service before etcd removes them: it sets their readiness gate
// resources.ServingCondition False (reason resources.ReasonRemoving) and returns a step that waits
// until the kubelet reports them not Ready and drainSettle has passed, at most drainWait. Removed
// first, a member stops serving while its pod is still Ready, and for up to 1.5 s the client Service
// sends new connections to an etcd that has stopped: clients see "raft: stopped", EOF and timeouts.
// Drained first, new connections go to the members that stay; a connection a client already holds to
// the removed member still breaks when its etcd stops. Only members that serve through a Ready pod with
// the gate are drained: a member that is down is not in the Service, and a replacement's member is not
// healthy. A drain whose patch fails is not waited for. nil when nothing is left to wait for.
func (r *EtcdClusterReconciler) drainForRemoval(ctx context.Context, s *scope, removals []membership.Action) *verdict.Step {
	var waiting []string
	why := ""
	for _, a := range removals {
		mem := s.m.Member(a.Member)
		if a.Replacing || mem == nil || !mem.HasPod() || !resources.HasServingGate(mem.Pod) || !mem.Serving() {
			continue
		}
		cond := model.PodCondition(mem.Pod, resources.ServingCondition)
		switch {
		case cond == nil:
			continue // never marked serving: not in the client Service
		case cond.Status == corev1.ConditionTrue:
			if !mem.PodReady() {
				continue
			}
			if err := r.setServing(ctx, s, mem, corev1.PodCondition{Type: resources.ServingCondition, Status: corev1.ConditionFalse,
				LastTransitionTime: metav1.Now(), Reason: resources.ReasonRemoving,
				Message: "the member is about to be removed (" + a.Reason + "): out of the client Service first"}); err != nil {
				continue // removed without a drain rather than never (setServing reported it)
			}
		case cond.Reason != resources.ReasonRemoving || s.m.Now.Sub(cond.LastTransitionTime.Time) >= drainWait:
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
	step := verdict.Acting(etcdv1beta1.ReasonRemovingMember, fmt.Sprintf("Taking %s out of the client Service before removing %s from etcd (%s)",
		strings.Join(waiting, ", "), map[bool]string{true: "it", false: "them"}[len(waiting) == 1], why))
	step.After = requeueDrain
	return step
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
