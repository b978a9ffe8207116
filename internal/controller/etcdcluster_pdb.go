package controller

import (
	"context"
	"fmt"

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
	hold, expired := false, false
	cur := &policyv1.PodDisruptionBudget{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(want), cur, ownedcache.OwnedOnly); err == nil && metav1.IsControlledBy(cur, c) {
		if since, held := resources.HeldSince(cur); held {
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
			r.event(c, corev1.EventTypeWarning, "EvictionHoldExpired", "Update", "Stopped holding evictions: set PodDisruptionBudget %s to minAvailable %s after %s, "+
				"though the scale-down has not removed every member it took out of the client Service; their pods, not Ready, can be evicted again", want.Name, want.Spec.MinAvailable.String(), holdMax)
		case hold:
			r.event(c, corev1.EventTypeNormal, "HoldingEvictions", "Update", "Set PodDisruptionBudget %s to minAvailable %s, one more than the pods, while the scale-down goes on", want.Name, want.Spec.MinAvailable.String())
		default:
			r.event(c, corev1.EventTypeNormal, "UpdatedPodDisruptionBudget", "Update", "Set PodDisruptionBudget %s to minAvailable %s", want.Name, want.Spec.MinAvailable.String())
		}
	case kube.Foreign:
		s.report.Unmanaged = &verdict.Progress{Reason: etcdv1beta1.ReasonForeignObject, Message: fmt.Sprintf(
			"PodDisruptionBudget %s exists and is not owned by this EtcdCluster: delete it so that the operator can keep evictions from breaking quorum", want.Name)}
	}
	return nil, err
}
