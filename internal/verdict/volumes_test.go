package verdict

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestJudgeVolumes: a bound claim smaller than spec.storage.size is expanded when its StorageClass
// allows it; an unbound one waits to bind; one without a class, or whose class refuses expansion, is
// reported; a claim whose request is met but whose capacity lags is still growing.
func TestJudgeVolumes(t *testing.T) {
	want := resource.MustParse("2Gi")
	claim := func(member, req, capacity, class string, bound, deleting bool) corev1.PersistentVolumeClaim {
		pvc := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName(member)}}
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(req)}
		if capacity != "" {
			pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
		}
		if class != "" {
			pvc.Spec.StorageClassName = ptr.To(class)
		}
		if bound {
			pvc.Status.Phase = corev1.ClaimBound
		}
		if deleting {
			now := metav1.Now()
			pvc.DeletionTimestamp = &now
		}
		return pvc
	}
	expandable := map[string]bool{"fast": true, "fixed": false}
	for _, tc := range []struct {
		name                     string
		claims                   []corev1.PersistentVolumeClaim
		expand, growing, refused string
		reason                   string
	}{
		{name: "all at size", claims: []corev1.PersistentVolumeClaim{claim("v-0", "2Gi", "2Gi", "fast", true, false)},
			expand: "[]", growing: "[]", refused: "[]", reason: etcdv1beta1.ReasonVolumesMatchSpec},
		{name: "bound and expandable: expand now", claims: []corev1.PersistentVolumeClaim{claim("v-0", "1Gi", "1Gi", "fast", true, false)},
			expand: "[data-v-0]", growing: "[data-v-0]", refused: "[]", reason: etcdv1beta1.ReasonExpandingVolumes},
		{name: "request met, capacity lags", claims: []corev1.PersistentVolumeClaim{claim("v-0", "2Gi", "1Gi", "fast", true, false)},
			expand: "[]", growing: "[data-v-0]", refused: "[]", reason: etcdv1beta1.ReasonExpandingVolumes},
		{name: "unbound waits", claims: []corev1.PersistentVolumeClaim{claim("v-0", "1Gi", "", "fast", false, false)},
			expand: "[]", growing: "[data-v-0]", refused: "[]", reason: etcdv1beta1.ReasonExpandingVolumes},
		{name: "refused wins over growing", claims: []corev1.PersistentVolumeClaim{
			claim("v-0", "1Gi", "1Gi", "fast", true, false), claim("v-1", "1Gi", "1Gi", "fixed", true, false), claim("v-2", "1Gi", "1Gi", "", true, false)},
			expand: "[data-v-0]", growing: "[data-v-0]",
			refused: "[data-v-1 (StorageClass fixed does not allow volume expansion) data-v-2 (has no StorageClass)]", reason: etcdv1beta1.ReasonExpansionRefused},
		{name: "a claim being deleted is not judged", claims: []corev1.PersistentVolumeClaim{claim("v-0", "1Gi", "1Gi", "fixed", true, true)},
			expand: "[]", growing: "[]", refused: "[]", reason: etcdv1beta1.ReasonVolumesMatchSpec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := model.Build(model.Input{Cluster: testutil.EtcdCluster("v"), Claims: tc.claims})
			v := JudgeVolumes(m, want, expandable)
			var expand []string
			for _, pvc := range v.Expand {
				expand = append(expand, pvc.Name)
			}
			if got := fmt.Sprint(expand); got != tc.expand {
				t.Errorf("expand %s, want %s", got, tc.expand)
			}
			if got := fmt.Sprint(v.Growing); got != tc.growing {
				t.Errorf("growing %s, want %s", got, tc.growing)
			}
			if got := fmt.Sprint(v.Refused); got != tc.refused {
				t.Errorf("refused %s, want %s", got, tc.refused)
			}
			if got := v.Condition(want).Reason; got != tc.reason {
				t.Errorf("reason %s, want %s", got, tc.reason)
			}
		})
	}
}
