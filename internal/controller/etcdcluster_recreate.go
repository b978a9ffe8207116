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
	var recreated, waiting []string
	for _, m := range s.m.Registered() {
		name, pod := m.Name, m.Pod
		if reason, why := verdict.PodToRecreate(s.m, m, r.Options); reason != "" {
			if err := r.recordRolledOnto(ctx, s.m, m, r.Options.SpecHash(c)); err != nil {
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
		recreated = append(recreated, name)
	}
	switch {
	case len(recreated) > 0:
		return verdict.Acting(etcdv1beta1.ReasonRecreatingMember,
			fmt.Sprintf("Recreated member pods %s on their data; waiting for them to rejoin", strings.Join(recreated, ", "))), nil
	case len(waiting) > 0:
		return verdict.Acting(etcdv1beta1.ReasonRecreatingMember,
			fmt.Sprintf("Waiting for the failed or down member pods %s to go before recreating them", strings.Join(waiting, ", "))), nil
	}
	return nil, nil
}
