package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// bootstrap creates the claims and pods of every initial member at once, all with
// --initial-cluster-state=new and the full --initial-cluster: they start in parallel and form the
// cluster as soon as they can reach each other.
func (r *EtcdClusterReconciler) bootstrap(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	names := desiredMembers(c)
	initial := r.Options.InitialCluster(c, names)
	if len(s.m.ForeignClaims) > 0 {
		s.blocked = &progress{etcdv1alpha1.ReasonInvalidSpec, fmt.Sprintf(
			"Claims %s hold the data of an earlier cluster named %s (kept by storage.retainPolicy Retain); a new cluster does not start on them: delete them, or give this cluster another name",
			strings.Join(s.m.ForeignClaims, ", "), c.Name)}
		r.event(c, corev1.EventTypeWarning, "ForeignClaims", "Bootstrap", "%s", s.blocked.message)
		return ctrl.Result{}, nil
	}
	plan, err := r.restorePlan(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if (recovering(c) || c.Spec.Bootstrap != nil && c.Spec.Bootstrap.Restore != nil) && plan == nil {
		return ctrl.Result{}, nil // s says what the restore waits for
	}
	var created []string
	for _, name := range names {
		have := s.m.Member(name)
		if have != nil && have.Pod != nil {
			continue
		}
		m := resources.Member{Name: name, InitialClusterState: resources.StateNew, InitialCluster: initial}
		if have != nil && have.Claim != nil {
			m = have.StartedAs()
		} else if want := r.Options.BuildPVC(c, m); want != nil {
			if err := r.Create(ctx, want); apierrors.IsAlreadyExists(err) {
				// not seen by this pass (still going away, or not ours): never start a member on a claim
				// this pass did not see as ours; the next pass looks again
				continue
			} else if err != nil {
				return ctrl.Result{}, fmt.Errorf("create persistentvolumeclaim %s: %w", want.Name, err)
			}
		}
		if err := r.createPod(ctx, s, m); err != nil || s.blocked != nil {
			return ctrl.Result{}, err
		}
		created = append(created, name)
	}
	if len(created) > 0 {
		r.event(c, corev1.EventTypeNormal, "CreatedMembers", "Create", "Created members %s to bootstrap a %d-member cluster", strings.Join(created, ", "), len(names))
		if plan != nil {
			r.event(c, corev1.EventTypeNormal, "RestoringFromBackup", "Restore", "Members %s restore snapshot %s before they start", strings.Join(created, ", "), plan.Key)
		}
	}
	s.progress = &progress{etcdv1alpha1.ReasonBootstrapping,
		fmt.Sprintf("Waiting for the %d initial members to start and form a cluster", len(names))}
	if plan != nil {
		s.progress.message = fmt.Sprintf("Waiting for the %d initial members to restore snapshot %s, start and form a new cluster", len(names), plan.Key)
		if failed := restoreFailures(s); len(failed) > 0 {
			s.progress.message += fmt.Sprintf("; the restore fails (fix what it says, it is retried): %s", strings.Join(failed, "; "))
		}
	}
	return ctrl.Result{}, nil
}

// neverStarted reports whether etcd lists member name as never started (it has no name yet): an
// initial member of a restored cluster whose restore did not finish still needs the snapshot, and the
// cluster token the others were restored with.
func neverStarted(s *scope, name string) bool {
	m := s.m.Member(name)
	return m != nil && m.Listed() && !m.Started()
}
