package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

func TestBuildPVC(t *testing.T) {
	m := Member{Name: "demo-2", InitialClusterState: StateNew, InitialCluster: "demo-0=a,demo-1=b,demo-2=c"}
	tests := []struct {
		name      string
		mut       func(*etcdv1beta1.EtcdCluster)
		wantNil   bool
		wantSize  string
		wantOwned bool
		wantClass string
	}{
		{name: "defaults", mut: func(*etcdv1beta1.EtcdCluster) {}, wantSize: "1Gi", wantOwned: true},
		{name: "size and class", mut: func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Storage.Size = ptr.To(resource.MustParse("5Gi"))
			c.Spec.Storage.StorageClassName = ptr.To("fast")
		}, wantSize: "5Gi", wantOwned: true, wantClass: "fast"},
		{name: "retain keeps the claim unowned", mut: func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Storage.RetainPolicy = etcdv1beta1.RetainPolicyRetain
		}, wantSize: "1Gi", wantOwned: false},
		{name: "emptyDir has no claim", mut: func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Storage.EmptyDir = &corev1.EmptyDirVolumeSource{}
		}, wantNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pvc := Options{}.BuildPVC(cluster(tt.mut), m)
			if tt.wantNil {
				if pvc != nil {
					t.Fatalf("BuildPVC = %+v, want nil", pvc)
				}
				return
			}
			if pvc.Name != "data-demo-2" {
				t.Errorf("name = %q", pvc.Name)
			}
			if got := pvc.Spec.Resources.Requests.Storage().String(); got != tt.wantSize {
				t.Errorf("size = %s, want %s", got, tt.wantSize)
			}
			if owned := len(pvc.OwnerReferences) == 1; owned != tt.wantOwned {
				t.Errorf("owned = %v, want %v", owned, tt.wantOwned)
			}
			if got := ptr.Deref(pvc.Spec.StorageClassName, ""); got != tt.wantClass {
				t.Errorf("storageClassName = %q, want %q", got, tt.wantClass)
			}
			if pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce {
				t.Errorf("accessModes = %v", pvc.Spec.AccessModes)
			}
			if pvc.Annotations[etcdv1beta1.AnnotationInitialCluster] != m.InitialCluster ||
				pvc.Annotations[etcdv1beta1.AnnotationInitialClusterState] != StateNew ||
				pvc.Annotations[etcdv1beta1.AnnotationClusterUID] != "uid-1" {
				t.Errorf("annotations = %v: the claim must record how its member was started", pvc.Annotations)
			}
		})
	}
}
