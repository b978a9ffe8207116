package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// TestSpecHash: the hash a member pod carries changes with the fields a pod is built from, and only
// with them (scaling or growing storage must not restart members).
func TestSpecHash(t *testing.T) {
	o := Options{}
	base := o.SpecHash(cluster())
	q := resource.MustParse("2Gi")
	for _, tc := range []struct {
		name    string
		mut     func(*etcdv1beta1.EtcdCluster)
		changes bool
	}{
		{"version", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = "3.6.17" }, true},
		{"image", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Image = "mirror/etcd:v3.6.16" }, true},
		{"resources", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
		}, true},
		{"options", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Options = &etcdv1beta1.EtcdOptions{ExtraArgs: map[string]string{"log-level": "debug"}}
		}, true},
		{"replicas", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](5) }, false},
		{"storage size", func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.Size = &q }, false},
		{"labels of the cluster", func(c *etcdv1beta1.EtcdCluster) { c.Labels = map[string]string{"team": "a"} }, false},
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
	if p.Annotations[etcdv1beta1.AnnotationSpecHash] != base {
		t.Errorf("pod annotation %q, want %q", p.Annotations[etcdv1beta1.AnnotationSpecHash], base)
	}
}

// TestSpecHashUnchangedByV1beta1: a cluster's hash is the one operators of v1alpha1 gave its member
// pods (recorded from them), although v1beta1 spells spec.options.autoCompactionMode differently: an
// operator upgrade must not roll the members of every cluster (new clusters get periodic compaction
// by default).
func TestSpecHashUnchangedByV1beta1(t *testing.T) {
	q := resource.MustParse("8Gi")
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "apps"}, Spec: etcdv1beta1.EtcdClusterSpec{
		Version:     "3.6.16",
		PodTemplate: &etcdv1beta1.PodTemplate{Labels: map[string]string{"team": "a"}},
		Options: &etcdv1beta1.EtcdOptions{QuotaBackendBytes: &q, AutoCompactionMode: etcdv1beta1.AutoCompactionPeriodic,
			AutoCompactionRetention: "1h"},
	}}
	if got, want := (Options{}).SpecHash(c), "e736c238f3"; got != want {
		t.Errorf("periodic compaction: hash %s, want %s (the hash of v1alpha1's operators)", got, want)
	}
	c.Spec.Options.AutoCompactionMode, c.Spec.Options.AutoCompactionRetention = etcdv1beta1.AutoCompactionRevision, "10000"
	if got, want := (Options{}).SpecHash(c), "ead26c5337"; got != want {
		t.Errorf("revision compaction: hash %s, want %s (the hash of v1alpha1's operators)", got, want)
	}
	if c.Spec.Options.AutoCompactionMode != etcdv1beta1.AutoCompactionRevision {
		t.Errorf("SpecHash changed the cluster's spec.options.autoCompactionMode to %q", c.Spec.Options.AutoCompactionMode)
	}
}
