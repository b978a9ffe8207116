package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// recreateMembers recreates, in a cluster that has formed, the pod of every registered member whose pod
// is gone but whose claim is kept, with the flags the claim recorded: the member restarts on its own
// data with its own ID. This needs no quorum. A failed pod (evicted, or its node gone) is deleted
// first.
func (r *EtcdClusterReconciler) recreateMembers(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	if !s.m.Formed() {
		return nil, nil
	}
	var recreated, waiting []string
	for _, m := range s.m.Registered() {
		name, pod := m.Name, m.Pod
		if m.HasPod() && pod.Status.Phase == corev1.PodFailed {
			// An evicted or failed pod never runs again (restartPolicy Always restarts containers in place,
			// not failed pods): delete it so that it is recreated on its claim.
			if err := r.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("delete failed pod %s: %w", name, err)
			}
			r.event(c, corev1.EventTypeWarning, "DeletedFailedPod", "Delete", "Deleted failed pod %s (%s) to recreate it on its data", name, pod.Status.Reason)
			waiting = append(waiting, name)
			continue
		}
		if pod != nil {
			continue
		}
		if !m.HasClaim() {
			continue // the data is gone: the planner replaces the member
		}
		if st, err := r.createPod(ctx, s, m.StartedAs()); err != nil || st != nil {
			return st, err
		}
		r.event(c, corev1.EventTypeNormal, "RecreatedMember", "Create", "Recreated pod %s on its data volume %s", name, m.Claim.Name)
		recreated = append(recreated, name)
	}
	switch {
	case len(recreated) > 0:
		return verdict.Acting(etcdv1alpha1.ReasonRecreatingMember,
			fmt.Sprintf("Recreated member pods %s on their data; waiting for them to rejoin", strings.Join(recreated, ", "))), nil
	case len(waiting) > 0:
		return verdict.Acting(etcdv1alpha1.ReasonRecreatingMember,
			fmt.Sprintf("Waiting for failed member pods %s to go before recreating them", strings.Join(waiting, ", "))), nil
	}
	return nil, nil
}
