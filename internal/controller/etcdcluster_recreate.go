package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
)

// restoreMemberPods recreates the pod of every registered member whose pod is gone but whose claim is
// kept, with the flags the claim recorded: the member restarts on its own data with its own ID. This
// needs no quorum. A failed pod (evicted, or its node gone) is deleted first. It reports whether it
// acted.
func (r *EtcdClusterReconciler) restoreMemberPods(ctx context.Context, s *scope) (bool, error) {
	c := s.cluster
	var recreated, waiting []string
	for _, m := range s.m.Registered() {
		name, pod := m.Name, m.Pod
		if m.HasPod() && pod.Status.Phase == corev1.PodFailed {
			// An evicted or failed pod never runs again (restartPolicy Always restarts containers in place,
			// not failed pods): delete it so that it is recreated on its claim.
			if err := r.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("delete failed pod %s: %w", name, err)
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
		if err := r.createPod(ctx, s, m.StartedAs()); err != nil || s.blocked != nil {
			return s.blocked != nil, err
		}
		r.event(c, corev1.EventTypeNormal, "RecreatedMember", "Create", "Recreated pod %s on its data volume %s", name, m.Claim.Name)
		recreated = append(recreated, name)
	}
	switch {
	case len(recreated) > 0:
		s.progress = &progress{etcdv1alpha1.ReasonRecreatingMember,
			fmt.Sprintf("Recreated member pods %s on their data; waiting for them to rejoin", strings.Join(recreated, ", "))}
	case len(waiting) > 0:
		s.progress = &progress{etcdv1alpha1.ReasonRecreatingMember,
			fmt.Sprintf("Waiting for failed member pods %s to go before recreating them", strings.Join(waiting, ", "))}
	}
	return s.progress != nil, nil
}
