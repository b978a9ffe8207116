package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// StorageClasses are read uncached (cmd/etcd-operator: ownedcache.Uncached), by name.
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get

// reconcileVolumes expands the members' claims to spec.storage.size where their StorageClass allows
// volume expansion, and records in the VolumesResized condition which claims are growing or cannot
// grow.
func (r *EtcdClusterReconciler) reconcileVolumes(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	if c.Spec.Storage.EmptyDir != nil || c.Spec.Storage.Size == nil {
		return nil, nil
	}
	want := *c.Spec.Storage.Size
	expandable, err := r.expandableClasses(ctx, s.m, want)
	if err != nil {
		return nil, err
	}
	v := verdict.JudgeVolumes(s.m, want, expandable)
	for _, pvc := range v.Expand {
		req := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		patch := client.MergeFrom(pvc.DeepCopy())
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = want
		if err := r.Patch(ctx, pvc, patch); err != nil {
			return nil, fmt.Errorf("expand persistentvolumeclaim %s to %s: %w", pvc.Name, want.String(), err)
		}
		r.event(c, corev1.EventTypeNormal, "ExpandingVolume", "Expand", "Expanding claim %s from %s to %s", pvc.Name, req.String(), want.String())
	}
	// a claim growing brings the pass back sooner (requeueFor); it stops nothing else
	s.report.Volumes = v.Condition(want)
	if msg := s.report.Volumes.Message; s.report.Volumes.Reason == etcdv1alpha1.ReasonExpansionRefused &&
		!verdict.HasCondition(c, etcdv1alpha1.ConditionVolumesResized, metav1.ConditionFalse, msg) {
		r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonExpansionRefused, "Expand", "%s", msg)
	}
	return nil, nil
}

// expandableClasses reads the StorageClass of every claim smaller than want and reports, by class
// name, whether it allows volume expansion; a class that does not exist does not.
func (r *EtcdClusterReconciler) expandableClasses(ctx context.Context, m *model.Cluster, want resource.Quantity) (map[string]bool, error) {
	out := map[string]bool{}
	for _, mem := range m.Claims() {
		req := mem.Claim.Spec.Resources.Requests[corev1.ResourceStorage]
		name := ptr.Deref(mem.Claim.Spec.StorageClassName, "")
		if _, done := out[name]; done || name == "" || req.Cmp(want) >= 0 {
			continue
		}
		sc := &storagev1.StorageClass{}
		if err := r.Get(ctx, client.ObjectKey{Name: name}, sc); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get storageclass %s: %w", name, err)
		} else if err == nil {
			out[name] = ptr.Deref(sc.AllowVolumeExpansion, false)
		} else {
			out[name] = false
		}
	}
	return out, nil
}
