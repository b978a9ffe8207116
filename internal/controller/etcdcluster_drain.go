package controller

import (
	"context"
	"fmt"
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
	// drainHold is how long a drained pod is kept out of the client Service while its member is still
	// listed: a drain whose removal did not follow (the scale-down was undone) ends after it, and the
	// member's pod is marked serving again.
	drainHold = 15 * time.Second
	// requeueDrain is how soon a pass looks again while it waits for a drain: the pod's Ready change
	// starts a pass too.
	requeueDrain = 200 * time.Millisecond
)

// drainForRemoval takes the pods of the members that removals (a scale-down's, membership.Removals)
// remove out of the client Service before etcd removes them: it sets their readiness gate
// resources.ServingCondition False (reason resources.ReasonRemoving) and returns a step that waits
// until the kubelet reports them not Ready and drainSettle has passed, at most drainWait. Removed first, a member stops serving
// while its pod is still Ready, and for up to 1.5 s the client Service sends new connections to an etcd
// that has stopped: clients see "raft: stopped", EOF and timeouts. Drained first, new connections go
// to the members that stay; a connection a client already holds to the removed member still breaks
// when its etcd stops. Only members that serve through a Ready pod with the gate are drained: a
// member that is down is not in the Service, and a replacement's member is not healthy. nil when
// nothing is left to wait for.
func (r *EtcdClusterReconciler) drainForRemoval(ctx context.Context, s *scope, removals []membership.Action) *verdict.Step {
	var waiting []string
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
			r.setServing(ctx, s, mem, corev1.PodCondition{Type: resources.ServingCondition, Status: corev1.ConditionFalse,
				LastTransitionTime: metav1.Now(), Reason: resources.ReasonRemoving,
				Message: "the member is about to be removed (" + a.Reason + "): out of the client Service first"})
			waiting = append(waiting, a.Member)
		case cond.Reason != resources.ReasonRemoving || s.m.Now.Sub(cond.LastTransitionTime.Time) >= drainWait:
			continue
		case mem.PodReady() || s.m.Now.Sub(r.drainedUnready.since(string(mem.Pod.UID), s.m.Now)) < drainSettle:
			waiting = append(waiting, a.Member)
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	step := verdict.Acting(etcdv1beta1.ReasonRemovingMember, fmt.Sprintf("Taking %s out of the client Service before removing %s from etcd (%s)",
		strings.Join(waiting, ", "), map[bool]string{true: "it", false: "them"}[len(waiting) == 1], removals[0].Reason))
	step.After = requeueDrain
	return step
}

// drained reports whether mem's pod was drained for its removal less than drainHold ago: its serving
// condition is not set True again meanwhile.
func drained(mem *model.Member, now time.Time) bool {
	cond := model.PodCondition(mem.Pod, resources.ServingCondition)
	return cond != nil && cond.Status == corev1.ConditionFalse && cond.Reason == resources.ReasonRemoving &&
		now.Sub(cond.LastTransitionTime.Time) < drainHold
}
