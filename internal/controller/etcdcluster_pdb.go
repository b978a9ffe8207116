package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete

// reconcilePDB keeps the cluster's PodDisruptionBudget at minAvailable = quorum of the desired members.
// A budget of that name that the cluster does not own is left alone and reported; it stops nothing
// else.
func (r *EtcdClusterReconciler) reconcilePDB(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	want := resources.BuildPDB(c, int32(s.m.Voters()))
	got := &policyv1.PodDisruptionBudget{}
	err := r.Get(ctx, client.ObjectKeyFromObject(want), got)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create poddisruptionbudget %s: %w", want.Name, err)
		}
		r.event(c, corev1.EventTypeNormal, "CreatedPodDisruptionBudget", "Create", "Created PodDisruptionBudget %s (minAvailable %s)", want.Name, want.Spec.MinAvailable.String())
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get poddisruptionbudget %s: %w", want.Name, err)
	case !metav1.IsControlledBy(got, c):
		s.report.ForeignPDB = &verdict.Progress{Reason: etcdv1alpha1.ReasonForeignObject, Message: fmt.Sprintf(
			"PodDisruptionBudget %s exists and is not owned by this EtcdCluster: delete it so that the operator can keep evictions from breaking quorum", want.Name)}
		return nil, nil
	case equality.Semantic.DeepEqual(got.Spec, want.Spec):
		return nil, nil
	}
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec = want.Spec
	if err := r.Patch(ctx, got, patch); err != nil {
		return nil, fmt.Errorf("update poddisruptionbudget %s: %w", want.Name, err)
	}
	r.event(c, corev1.EventTypeNormal, "UpdatedPodDisruptionBudget", "Update", "Set PodDisruptionBudget %s to minAvailable %s", want.Name, want.Spec.MinAvailable.String())
	return nil, nil
}
