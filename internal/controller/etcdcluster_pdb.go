package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/kube"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete

// reconcilePDB keeps the cluster's PodDisruptionBudget at minAvailable = quorum of the desired members,
// or holds every eviction (resources.HoldEvictions) while a scale-down takes members out of the client
// Service (holdingEvictions); the budget as the pass left it is s.pdb. A budget of that name that the
// cluster does not own is left alone and reported; it stops nothing else.
func (r *EtcdClusterReconciler) reconcilePDB(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	want := resources.BuildPDB(c, int32(s.m.Voters()))
	hold := holdingEvictions(s.m)
	if hold {
		resources.HoldEvictions(want, int32(len(s.pods.Items)))
	}
	got := &policyv1.PodDisruptionBudget{}
	out, err := kube.EnsureOwned(ctx, r.Client, c, want, got,
		func(got, want *policyv1.PodDisruptionBudget) bool {
			return equality.Semantic.DeepEqual(got.Spec, want.Spec)
		},
		func(got, want *policyv1.PodDisruptionBudget) { got.Spec = want.Spec })
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
		if hold {
			r.event(c, corev1.EventTypeNormal, "HoldingEvictions", "Update", "Set PodDisruptionBudget %s to minAvailable %s, one more than the pods, "+
				"so that no eviction takes a member while a scale-down takes members out of the client Service", want.Name, want.Spec.MinAvailable.String())
		} else {
			r.event(c, corev1.EventTypeNormal, "UpdatedPodDisruptionBudget", "Update", "Set PodDisruptionBudget %s to minAvailable %s", want.Name, want.Spec.MinAvailable.String())
		}
	case kube.Foreign:
		s.report.Unmanaged = &verdict.Progress{Reason: etcdv1beta1.ReasonForeignObject, Message: fmt.Sprintf(
			"PodDisruptionBudget %s exists and is not owned by this EtcdCluster: delete it so that the operator can keep evictions from breaking quorum", want.Name)}
	}
	return nil, err
}
