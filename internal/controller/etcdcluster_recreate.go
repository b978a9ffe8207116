package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// recreateMembers recreates, in a cluster that has formed, the pod of every registered member whose pod
// is gone but whose claim is kept, with the flags the claim recorded: the member restarts on its own
// data with its own ID. This needs no quorum. A failed pod, and once the pod of a member that has been
// down for half of spec.recovery.replaceUnhealthyMemberAfter, is deleted first (verdict.PodToRecreate);
// a member down on a spec no member has run keeps that record onto the current spec (recordRolledOnto).
func (r *EtcdClusterReconciler) recreateMembers(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	if !s.m.Formed() {
		return nil, nil
	}
	var recreated, rolled, waiting []string
	hash := r.Options.SpecHash(c)
	for _, m := range s.m.Registered() {
		name, pod := m.Name, m.Pod
		if reason, why := verdict.PodToRecreate(s.m, m, r.Options); reason != "" {
			if err := r.recordRolledOnto(ctx, s.m, m, hash); err != nil {
				return nil, err
			}
			// only the pod this pass looked at goes: a newer one is left to show how it does
			err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return nil, fmt.Errorf("delete pod %s (%s): %w", name, why, err)
			}
			r.eventAbout(c, memberRef(c, name), corev1.EventTypeWarning, reason, "Delete", "Deleted pod %s (%s) to recreate it with the current spec on its data", name, why)
			waiting = append(waiting, name)
			continue
		}
		if pod != nil {
			continue
		}
		if !m.HasClaim() {
			continue // the data is gone: the planner replaces the member
		}
		create := func() (*verdict.Step, error) { return r.createPod(ctx, s, m.StartedAs()) }
		if m.Learner() {
			create = func() (*verdict.Step, error) { return r.createJoiningMember(ctx, s, name, s.m.Etcd.Members) }
		}
		if st, err := create(); err != nil || st != nil {
			return st, err
		}
		r.eventAbout(c, memberRef(c, name), corev1.EventTypeNormal, "RecreatedMember", "Create", "Recreated pod %s on its data volume %s", name, m.Claim.Name)
		if m.Claim.Annotations[etcdv1beta1.AnnotationRolledOnto] == hash {
			rolled = append(rolled, name) // restarted by the rollout, onto this spec
		} else {
			recreated = append(recreated, name)
		}
	}
	return recreatedStep(recreated, rolled, waiting), nil
}

// recreatedStep is recreateMembers' step: the members whose pods it recreated (a repair), those it
// recreated for the rolling update (their claims record the current spec), and those whose pods it
// waits to go, by name; nil when it did nothing.
func recreatedStep(recreated, rolled, waiting []string) *verdict.Step {
	switch {
	case len(recreated) > 0:
		pods, their, them := podsOf(recreated)
		return verdict.Acting(etcdv1beta1.ReasonRecreatingMember,
			fmt.Sprintf("Recreated %s on %s data; waiting for %s to rejoin", pods, their, them))
	case len(rolled) > 0:
		pods, their, them := podsOf(rolled)
		return verdict.Acting(etcdv1beta1.ReasonRollingUpdate,
			fmt.Sprintf("Rolling update: recreated %s on %s data with the current spec; waiting for %s to serve", pods, their, them))
	case len(waiting) > 0:
		return verdict.Acting(etcdv1beta1.ReasonRecreatingMember,
			fmt.Sprintf("Waiting for the failed or down member pods %s to go before recreating them", strings.Join(waiting, ", ")))
	}
	return nil
}

// podsOf names the pods of the members names for a message, with the words that refer back to them:
// "the pod of d-1", "its", "it"; "the pods of d-1, d-2", "their", "them".
func podsOf(names []string) (pods, their, them string) {
	if len(names) == 1 {
		return "the pod of " + names[0], "its", "it"
	}
	return "the pods of " + strings.Join(names, ", "), "their", "them"
}
