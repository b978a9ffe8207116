package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
)

// TestSpecHash: the hash a member pod carries changes with the fields a pod is built from, and only
// with them (scaling or growing storage must not restart members).
func TestSpecHash(t *testing.T) {
	o := Options{}
	base := o.SpecHash(cluster())
	q := resource.MustParse("2Gi")
	for _, tc := range []struct {
		name    string
		mut     func(*etcdv1alpha1.EtcdCluster)
		changes bool
	}{
		{"version", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.6.17" }, true},
		{"image", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Image = "mirror/etcd:v3.6.16" }, true},
		{"resources", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.PodTemplate = &etcdv1alpha1.PodTemplate{Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
		}, true},
		{"options", func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Options = &etcdv1alpha1.EtcdOptions{ExtraArgs: map[string]string{"log-level": "debug"}}
		}, true},
		{"replicas", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](5) }, false},
		{"storage size", func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Size = &q }, false},
		{"labels of the cluster", func(c *etcdv1alpha1.EtcdCluster) { c.Labels = map[string]string{"team": "a"} }, false},
	} {
		got := o.SpecHash(cluster(tc.mut))
		if (got != base) != tc.changes {
			t.Errorf("%s: hash %s vs %s, want changed=%v", tc.name, got, base, tc.changes)
		}
	}
	if o.SpecHash(cluster()) != base {
		t.Errorf("SpecHash is not deterministic")
	}
	p := o.BuildPod(cluster(), Member{Name: "c-0", InitialClusterState: StateNew, InitialCluster: "c-0=http://x:2380"})
	if p.Annotations[etcdv1alpha1.AnnotationSpecHash] != base {
		t.Errorf("pod annotation %q, want %q", p.Annotations[etcdv1alpha1.AnnotationSpecHash], base)
	}
}
