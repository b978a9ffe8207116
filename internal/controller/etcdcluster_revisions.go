package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create;patch;delete

// revisionListTimeout bounds a list of a cluster's ControllerRevisions.
const revisionListTimeout = 5 * time.Second

// listRevisions returns the ControllerRevisions carrying the labels of the cluster s looks at. It errors
// when they cannot be listed within revisionListTimeout: the pass does not go on without them, since a
// rollback whose claim was lost is recorded on a revision only (model.Cluster.Rollback), and a pass
// that does not see it would make new members from, and restart members onto, the spec that did not
// run.
func (r *EtcdClusterReconciler) listRevisions(ctx context.Context, s *scope) ([]appsv1.ControllerRevision, error) {
	revs := &appsv1.ControllerRevisionList{}
	// the cache's first list waits for its informer to sync, which it never does without the RBAC
	listCtx, cancel := context.WithTimeout(ctx, revisionListTimeout)
	defer cancel()
	if err := r.List(listCtx, revs, client.InNamespace(s.cluster.Namespace), client.MatchingLabels(resources.SelectorLabels(s.cluster))); err != nil {
		return nil, fmt.Errorf("list controllerrevisions (the operator needs get, list and watch on controllerrevisions in group apps): %w", err)
	}
	return revs.Items, nil
}

// syncRevisions keeps, with spec.recovery.rollBackFailedRollouts, a ControllerRevision of the current
// spec (resources.Options.Revision), so that once the spec changes a member the rollout restarts onto
// a spec that cannot run can be rolled back to it (verdict.RollbackDue), and deletes the cluster's
// revisions that nothing may be rolled back to any more (verdict.RevisionsToDelete): all of them when
// rollbacks are off. A refusal is logged and the pass goes on: without a revision, a member down on
// a new spec waits for a fix, as with rollbacks off.
func (r *EtcdClusterReconciler) syncRevisions(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	// a rollback from the current spec keeps its revision with rollbacks turned off too: the revision
	// keeps the copy of its record (model.Cluster.Rollback)
	if (c.Spec.RollsBackFailedRollouts() || s.m.Rollback(s.m.SpecHash) != nil) && s.m.Revisions[s.m.SpecHash] == nil {
		if err := r.Create(ctx, r.Options.Revision(c)); err != nil && !apierrors.IsAlreadyExists(err) {
			log.FromContext(ctx).Error(err, "create the controllerrevision of the current spec; a member down on the next spec cannot be rolled back to it", "controllerrevision", resources.RevisionName(c, s.m.SpecHash))
		}
	}
	r.syncRollbackMark(ctx, s)
	for _, hash := range verdict.RevisionsToDelete(s.m) {
		rev := s.m.Revisions[hash]
		if err := r.Delete(ctx, rev, client.Preconditions{UID: &rev.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			log.FromContext(ctx).Error(err, "delete a controllerrevision nothing is rolled back to", "controllerrevision", rev.Name)
		}
	}
	return nil, nil
}

// syncRollbackMark keeps on the ControllerRevision of the current spec the record of a rollback from it
// that a member's claim records (model.Cluster.RollbackMarkToWrite: the member, its claim's UID, the
// spec it serves on, why), so that the rollback still holds if that claim is lost; and removes that
// record once the claim is there without the rollback's (model.Cluster.LiftedRollbackMark: the user
// removed it to have the rollout try the spec again). A refusal is logged and the pass goes on: the
// claim's record holds the rollback meanwhile.
func (r *EtcdClusterReconciler) syncRollbackMark(ctx context.Context, s *scope) {
	rev := s.m.Revisions[s.m.SpecHash]
	write := s.m.RollbackMarkToWrite(s.m.SpecHash)
	lifted := s.m.LiftedRollbackMark(s.m.SpecHash)
	if rev == nil || (write == nil && !lifted) {
		return
	}
	var drop []string
	if lifted {
		drop = []string{etcdv1beta1.AnnotationRolledBackClaim, etcdv1beta1.AnnotationServedSpec, etcdv1beta1.AnnotationRollbackReason}
	}
	if err := r.patchAnnotations(ctx, rev.DeepCopy(), write, drop...); err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "update the copy of a rollback's record on the controllerrevision of the current spec", "controllerrevision", rev.Name)
	}
}
