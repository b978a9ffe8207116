package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/kube"
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
	var claims []*corev1.PersistentVolumeClaim
	for _, m := range s.m.Claims() {
		claims = append(claims, m.Claim)
	}
	expandable, err := kube.ExpandableClasses(ctx, r.Client, claims, want)
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
		r.eventAbout(c, objectRef(c, "v1", "PersistentVolumeClaim", pvc.Name), corev1.EventTypeNormal, "ExpandingVolume", "Expand", "Expanding claim %s from %s to %s", pvc.Name, req.String(), want.String())
	}
	// a claim growing brings the pass back sooner (requeueFor); it stops nothing else
	s.report.Volumes = v.Condition(want)
	if msg := s.report.Volumes.Message; s.report.Volumes.Reason == etcdv1beta1.ReasonExpansionRefused &&
		!verdict.HasCondition(c, etcdv1beta1.ConditionVolumesResized, metav1.ConditionFalse, msg) {
		r.event(c, corev1.EventTypeWarning, etcdv1beta1.ReasonExpansionRefused, "Expand", "%s", msg)
	}
	return nil, nil
}
