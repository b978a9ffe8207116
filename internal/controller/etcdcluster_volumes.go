package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/model"
)

// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch

// reconcileVolumes expands the members' claims to spec.storage.size where their StorageClass allows
// volume expansion, and records in the VolumesResized condition which claims are growing or cannot
// grow.
func (r *EtcdClusterReconciler) reconcileVolumes(ctx context.Context, s *scope) (*step, error) {
	c := s.cluster
	if c.Spec.Storage.EmptyDir != nil || c.Spec.Storage.Size == nil {
		return nil, nil
	}
	want := *c.Spec.Storage.Size
	expandable, err := r.expandableClasses(ctx, s.m, want)
	if err != nil {
		return nil, err
	}
	v := judgeVolumes(s.m, want, expandable)
	for _, pvc := range v.expand {
		req := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		patch := client.MergeFrom(pvc.DeepCopy())
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = want
		if err := r.Patch(ctx, pvc, patch); err != nil {
			return nil, fmt.Errorf("expand persistentvolumeclaim %s to %s: %w", pvc.Name, want.String(), err)
		}
		r.event(c, corev1.EventTypeNormal, "ExpandingVolume", "Expand", "Expanding claim %s from %s to %s", pvc.Name, req.String(), want.String())
	}
	// a claim growing brings the pass back sooner (requeueFor); it stops nothing else
	s.report.volumes = v.condition(want)
	if msg := s.report.volumes.message; s.report.volumes.reason == etcdv1alpha1.ReasonExpansionRefused &&
		!hasCondition(c, etcdv1alpha1.ConditionVolumesResized, metav1.ConditionFalse, msg) {
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

// volumeVerdict is what judgeVolumes decided.
type volumeVerdict struct {
	// expand are the bound claims to grow to the wanted size now.
	expand []*corev1.PersistentVolumeClaim
	// growing names the claims that are growing or will once bound (expand included).
	growing []string
	// refused says, per claim that cannot grow, why: "<claim> (<why>)".
	refused []string
}

// judgeVolumes decides, for every claim of the cluster not being deleted, whether it has the wanted
// size, is growing, is to be expanded now, or cannot grow (expandable tells which StorageClasses allow
// expansion). It is pure.
func judgeVolumes(m *model.Cluster, want resource.Quantity, expandable map[string]bool) volumeVerdict {
	var v volumeVerdict
	for _, mem := range m.Claims() {
		pvc := mem.Claim
		if pvc.DeletionTimestamp != nil {
			continue
		}
		bound := pvc.Status.Phase == corev1.ClaimBound
		req := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if req.Cmp(want) >= 0 {
			if got, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok && got.Cmp(want) < 0 && bound {
				v.growing = append(v.growing, pvc.Name)
			}
			continue
		}
		className := ptr.Deref(pvc.Spec.StorageClassName, "")
		switch {
		case className == "":
			v.refused = append(v.refused, pvc.Name+" (has no StorageClass)")
		case !expandable[className]:
			v.refused = append(v.refused, pvc.Name+" (StorageClass "+className+" does not allow volume expansion)")
		case !bound:
			v.growing = append(v.growing, pvc.Name) // a claim can grow only once bound; new claims get the new size
		default:
			v.expand = append(v.expand, pvc)
			v.growing = append(v.growing, pvc.Name)
		}
	}
	return v
}

// condition returns the VolumesResized condition's reason and message for the verdict.
func (v volumeVerdict) condition(want resource.Quantity) *progress {
	switch {
	case len(v.refused) > 0:
		names := make([]string, len(v.refused))
		for i, r := range v.refused {
			names[i], _, _ = strings.Cut(r, " ")
		}
		return &progress{etcdv1alpha1.ReasonExpansionRefused, fmt.Sprintf(
			"Claims %s cannot grow to %s: %s. Members created from now on get the new size; to grow these, use a StorageClass with allowVolumeExpansion, or replace the members one at a time",
			strings.Join(names, ", "), want.String(), strings.Join(v.refused, "; "))}
	case len(v.growing) > 0:
		return &progress{etcdv1alpha1.ReasonExpandingVolumes, fmt.Sprintf("Expanding claims %s to %s; waiting for the storage provider", strings.Join(v.growing, ", "), want.String())}
	default:
		return &progress{etcdv1alpha1.ReasonVolumesMatchSpec, fmt.Sprintf("Every member's claim has %s", want.String())}
	}
}
