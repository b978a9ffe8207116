package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ExpandableClasses reads the StorageClass of every claim of claims that requests less than want and
// reports, by class name, whether it allows volume expansion; a class that does not exist does not.
func ExpandableClasses(ctx context.Context, r client.Reader, claims []*corev1.PersistentVolumeClaim, want resource.Quantity) (map[string]bool, error) {
	out := map[string]bool{}
	for _, pvc := range claims {
		req := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		name := ptr.Deref(pvc.Spec.StorageClassName, "")
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
