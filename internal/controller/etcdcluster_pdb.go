package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/kube"
	"github.com/etcdkit/etcd-operator/internal/ownedcache"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete

// reconcilePDB keeps the cluster's PodDisruptionBudget at minAvailable = quorum of the desired members.
// A hold of every eviction that drainForRemoval began (resources.HoldEvictions) goes on while holdKept,
// for at most holdMax; the budget as the pass left it is s.pdb. A budget of that name that the cluster
// does not own is left alone and reported; it stops nothing else.
func (r *EtcdClusterReconciler) reconcilePDB(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	want := resources.BuildPDB(c, int32(s.m.Voters()))
	hold, expired, wasHeld := false, false, false
	cur := &policyv1.PodDisruptionBudget{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(want), cur, ownedcache.OwnedOnly); err == nil && metav1.IsControlledBy(cur, c) {
		var since time.Time
		if since, wasHeld = resources.HeldSince(cur); wasHeld {
			if hold, expired = holdKept(s.m, since); hold {
				resources.HoldEvictions(want, int32(len(s.pods.Items)), since)
			}
		}
	}
	got := &policyv1.PodDisruptionBudget{}
	out, err := kube.EnsureOwned(ctx, r.Client, c, want, got,
		func(got, want *policyv1.PodDisruptionBudget) bool {
			return equality.Semantic.DeepEqual(got.Spec, want.Spec) &&
				got.Annotations[etcdv1beta1.AnnotationEvictionsHeldSince] == want.Annotations[etcdv1beta1.AnnotationEvictionsHeldSince]
		},
		func(got, want *policyv1.PodDisruptionBudget) {
			got.Spec = want.Spec
			if since, ok := want.Annotations[etcdv1beta1.AnnotationEvictionsHeldSince]; ok {
				got.Annotations = resources.Merged(got.Annotations, map[string]string{etcdv1beta1.AnnotationEvictionsHeldSince: since})
			} else {
				delete(got.Annotations, etcdv1beta1.AnnotationEvictionsHeldSince)
			}
		})
	switch {
	case err != nil:
	case out == kube.Created:
		s.pdb = want
	case out != kube.Foreign:
		s.pdb = got
	}
	switch out {
	case kube.Created:
		r.event(c, corev1.EventTypeNormal, "CreatedPodDisruptionBudget", "Create", "Created PodDisruptionBudget %s (minAvailable %s)", want.Name, want.Spec.MinAvailable.String())
	case kube.Updated:
		switch {
		case expired:
			r.event(c, corev1.EventTypeWarning, etcdv1beta1.ReasonEvictionHoldExpired, "Update", "Stopped holding evictions after %s: set PodDisruptionBudget %s back to minAvailable %s, "+
				"unhealthyPodEvictionPolicy AlwaysAllow, though the scale-down has not removed every member it took out of the client Service (see Progressing); "+
				"their pods, not Ready, can be evicted again", holdMax, want.Name, want.Spec.MinAvailable.String())
		case hold:
			r.event(c, corev1.EventTypeNormal, etcdv1beta1.ReasonHoldingEvictions, "Update", "Set PodDisruptionBudget %s to minAvailable %s, one more than the pods, "+
				"so that no eviction takes a member while a scale-down takes members out of the client Service", want.Name, want.Spec.MinAvailable.String())
		case wasHeld:
			r.event(c, corev1.EventTypeNormal, "UpdatedPodDisruptionBudget", "Update", "Stopped holding evictions: set PodDisruptionBudget %s back to minAvailable %s, unhealthyPodEvictionPolicy AlwaysAllow",
				want.Name, want.Spec.MinAvailable.String())
		default:
			r.event(c, corev1.EventTypeNormal, "UpdatedPodDisruptionBudget", "Update", "Set PodDisruptionBudget %s to minAvailable %s", want.Name, want.Spec.MinAvailable.String())
		}
	case kube.Foreign:
		s.report.Unmanaged = &verdict.Progress{Reason: etcdv1beta1.ReasonForeignObject, Message: fmt.Sprintf(
			"PodDisruptionBudget %s exists and is not owned by this EtcdCluster: delete it so that the operator can keep evictions from breaking quorum", want.Name)}
	}
	return nil, err
}

// refreshHold restamps the hold of evictions of a paused cluster's PodDisruptionBudget
// (etcdv1beta1.AnnotationEvictionsHeldSince) once it is older than a quarter of holdMax, and reports
// whether the budget holds evictions: a cluster paused in the middle of a scale-down's drain keeps its
// hold, since the drained members still vote, and holdMax counts from when it was resumed, not from
// before the pause. The paused passes come every holdMax/4 while it holds.
func (r *EtcdClusterReconciler) refreshHold(ctx context.Context, s *scope) (bool, error) {
	pdb := &policyv1.PodDisruptionBudget{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: s.cluster.Name}, pdb, ownedcache.OwnedOnly)
	if err != nil || !metav1.IsControlledBy(pdb, s.cluster) {
		return false, client.IgnoreNotFound(err)
	}
	since, held := resources.HeldSince(pdb)
	if !held || s.m.Now.Sub(since) < holdMax/4 {
		return held, nil
	}
	patch := client.MergeFrom(pdb.DeepCopy())
	pdb.Annotations = resources.Merged(pdb.Annotations, map[string]string{etcdv1beta1.AnnotationEvictionsHeldSince: s.m.Now.UTC().Format(time.RFC3339)})
	if err := r.Patch(ctx, pdb, patch); err != nil {
		return true, fmt.Errorf("keep the hold of evictions of PodDisruptionBudget %s while paused: %w", pdb.Name, err)
	}
	return true, nil
}
