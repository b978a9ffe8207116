package controller

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/rollout"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// pausedMessage starts the Progressing message of a paused cluster.
const pausedMessage = "spec.paused is true: the operator observes the cluster and changes none of its members; set it to false to resume"

// holdPaused ends the pass of a paused cluster (spec.paused) before any phase that changes its members,
// after the observation, spec validation and scheduled backups: it still compares the members' hashes
// (checkConsistency), and the step says what the operator would do next once resumed and which
// requests by annotation it holds. The pass is repeated at the health check interval, so the status
// stays current. It records the pause and the resumption as events.
func (r *EtcdClusterReconciler) holdPaused(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	p := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionProgressing)
	wasPaused := p != nil && p.Reason == etcdv1beta1.ReasonPaused
	if !c.Spec.Paused {
		if wasPaused {
			r.event(c, corev1.EventTypeNormal, "Resumed", "Resume", "spec.paused is false: the operator changes the cluster's members again")
		}
		return nil, nil
	}
	if !wasPaused {
		r.event(c, corev1.EventTypeNormal, etcdv1beta1.ReasonPaused, "Pause", "%s", pausedMessage)
	}
	if _, err := r.checkConsistency(ctx, s); err != nil {
		return nil, err
	}
	holding, err := r.refreshHold(ctx, s)
	if err != nil {
		return nil, err
	}
	msg := pausedMessage
	if next := r.nextOnResume(s); next != "" {
		msg += "; next once resumed: " + next
	}
	if held := c.Requests(); len(held) > 0 {
		msg += "; requests held until resumed: " + strings.Join(held, ", ")
	}
	every := cmp.Or(r.HealthCheckInterval, DefaultHealthCheckInterval)
	if holding {
		every = min(every, holdMax/4)
	}
	return verdict.Blocked(etcdv1beta1.ReasonPaused, msg).Within(every), nil
}

// nextOnResume says what the operator would do first if the cluster were not paused: recreate missing
// member pods, replace a member whose claim is being deleted under its running pod
// (reconcileClaimDeleted), roll back a member down on a spec that did not run (verdict.RollbackDue),
// or the first step of the membership planner or the rollout; "" when none
// would act (or etcd did not answer, so none can plan).
func (r *EtcdClusterReconciler) nextOnResume(s *scope) string {
	if !s.m.Answered() {
		return ""
	}
	var missing []string
	for _, m := range s.m.Registered() {
		if m.Pod == nil && m.HasClaim() {
			missing = append(missing, m.Name)
		}
	}
	if len(missing) > 0 && s.m.Formed() {
		return "recreate the pods of " + strings.Join(missing, ", ") + " on their data"
	}
	for _, m := range s.m.Listed() {
		if claimRepairDue(s, m) {
			return fmt.Sprintf("replace %s, whose claim %s is being deleted (its data goes when its pod stops)", m.Name, m.Claim.Name)
		}
	}
	for _, m := range s.m.Registered() {
		if why := verdict.RollbackDue(s.m, m); why != "" {
			return fmt.Sprintf("roll back %s to the spec it last served on (%s)", m.Name, why)
		}
	}
	if a := membership.Next(s.m.Membership(verdict.Replacements(s.m))); a.Kind != membership.None && a.Kind != membership.Wait {
		return fmt.Sprintf("%s %s (%s)", a.Kind, a.Member, a.Reason)
	}
	if a := rollout.Next(s.m.Rollout(s.m.SpecHash)); a.Kind != rollout.None && a.Kind != rollout.Wait && a.Kind != rollout.AwaitMember {
		return fmt.Sprintf("%s %s (%s)", a.Kind, a.Member, a.Reason)
	}
	return ""
}
