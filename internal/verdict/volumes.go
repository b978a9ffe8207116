package verdict

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/model"
)

// Volumes is what JudgeVolumes decided.
type Volumes struct {
	// Expand are the bound claims to grow to the wanted size now.
	Expand []*corev1.PersistentVolumeClaim
	// Growing names the claims that are growing or will once bound (Expand included).
	Growing []string
	// Refused says, per claim that cannot grow, why: "<claim> (<why>)".
	Refused []string
}

// JudgeVolumes decides, for every claim of the cluster not being deleted, whether it has the wanted
// size, is growing, is to be expanded now, or cannot grow (expandable tells which StorageClasses allow
// expansion). It is pure.
func JudgeVolumes(m *model.Cluster, want resource.Quantity, expandable map[string]bool) Volumes {
	var v Volumes
	for _, mem := range m.Claims() {
		pvc := mem.Claim
		if pvc.DeletionTimestamp != nil {
			continue
		}
		bound := pvc.Status.Phase == corev1.ClaimBound
		req := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if req.Cmp(want) >= 0 {
			if got, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok && got.Cmp(want) < 0 && bound {
				v.Growing = append(v.Growing, pvc.Name)
			}
			continue
		}
		className := ptr.Deref(pvc.Spec.StorageClassName, "")
		switch {
		case className == "":
			v.Refused = append(v.Refused, pvc.Name+" (has no StorageClass)")
		case !expandable[className]:
			v.Refused = append(v.Refused, pvc.Name+" (StorageClass "+className+" does not allow volume expansion)")
		case !bound:
			v.Growing = append(v.Growing, pvc.Name) // a claim can grow only once bound; new claims get the new size
		default:
			v.Expand = append(v.Expand, pvc)
			v.Growing = append(v.Growing, pvc.Name)
		}
	}
	return v
}

// Condition returns the VolumesResized condition's reason and message for the verdict.
func (v Volumes) Condition(want resource.Quantity) *Progress {
	switch {
	case len(v.Refused) > 0:
		names := make([]string, len(v.Refused))
		for i, r := range v.Refused {
			names[i], _, _ = strings.Cut(r, " ")
		}
		return &Progress{Reason: etcdv1beta1.ReasonExpansionRefused, Message: fmt.Sprintf(
			"Claims %s cannot grow to %s: %s. Members created from now on get the new size; to grow these, use a StorageClass with allowVolumeExpansion, or replace the members one at a time",
			strings.Join(names, ", "), want.String(), strings.Join(v.Refused, "; "))}
	case len(v.Growing) > 0:
		return &Progress{Reason: etcdv1beta1.ReasonExpandingVolumes, Message: fmt.Sprintf("Expanding claims %s to %s; waiting for the storage provider", strings.Join(v.Growing, ", "), want.String())}
	default:
		return &Progress{Reason: etcdv1beta1.ReasonVolumesMatchSpec, Message: fmt.Sprintf("Every member's claim has %s", want.String())}
	}
}
