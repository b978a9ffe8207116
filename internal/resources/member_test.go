package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
		{"no topology spread", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{}}
		}, true},
		{"empty affinity", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Affinity: &corev1.Affinity{}}
		}, true},
		{"empty resources", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Resources: &corev1.ResourceRequirements{}}
		}, true},
		{"empty pod template", func(c *etcdv1beta1.EtcdCluster) { c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{} }, false},
		{"pod template of empty maps and lists", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Labels: map[string]string{}, NodeSelector: map[string]string{}, Tolerations: []corev1.Toleration{}}
		}, false},
		{"empty options", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Options = &etcdv1beta1.EtcdOptions{ExtraArgs: map[string]string{}}
		}, false},
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

// TestSpecHashBuildsLikePods: two templates hash alike exactly when they build the same pods, as
// BuildPod builds them.
func TestSpecHashBuildsLikePods(t *testing.T) {
	o := Options{}
	m := Member{Name: "demo-0", InitialClusterState: StateNew, InitialCluster: "demo-0=http://x:2380"}
	templates := map[string]*etcdv1beta1.PodTemplate{
		"none":                 nil,
		"empty":                {},
		"empty maps and lists": {Labels: map[string]string{}, Annotations: map[string]string{}, Tolerations: []corev1.Toleration{}, NodeSelector: map[string]string{}},
		"no spread":            {TopologySpreadConstraints: []corev1.TopologySpreadConstraint{}},
		"empty affinity":       {Affinity: &corev1.Affinity{}},
		"empty resources":      {Resources: &corev1.ResourceRequirements{}},
		"labels":               {Labels: map[string]string{"team": "a"}},
	}
	for a, ta := range templates {
		for b, tb := range templates {
			ca, cb := cluster(), cluster()
			ca.Spec.PodTemplate, cb.Spec.PodTemplate = ta, tb
			pa, pb := o.BuildPod(ca, m), o.BuildPod(cb, m)
			delete(pa.Annotations, etcdv1beta1.AnnotationSpecHash)
			delete(pb.Annotations, etcdv1beta1.AnnotationSpecHash)
			samePods := equality.Semantic.DeepEqual(pa, pb)
			if sameHash := o.SpecHash(ca) == o.SpecHash(cb); sameHash != samePods {
				t.Errorf("templates %q and %q: same hash %v, same pods %v", a, b, sameHash, samePods)
			}
		}
	}
}

// TestEmptySpecHash: the hash the operator gave pods of an empty spec.podTemplate or spec.options
// before they hashed as absent ones is found, so that such pods are not rolled; for any other spec
// there is none.
func TestEmptySpecHash(t *testing.T) {
	base := func(mut func(*etcdv1beta1.EtcdClusterSpec)) *etcdv1beta1.EtcdCluster {
		c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "apps"}, Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.6.16"}}
		mut(&c.Spec)
		return c
	}
	// the hashes below are those the operator gave before this change, for the same specs
	for _, tc := range []struct {
		name       string
		mut        func(*etcdv1beta1.EtcdClusterSpec)
		hash, prev string
	}{
		{"none", func(*etcdv1beta1.EtcdClusterSpec) {}, "8d7490337d", ""},
		{"empty pod template", func(s *etcdv1beta1.EtcdClusterSpec) { s.PodTemplate = &etcdv1beta1.PodTemplate{} }, "8d7490337d", "6b37c5e3fe"},
		{"empty options", func(s *etcdv1beta1.EtcdClusterSpec) { s.Options = &etcdv1beta1.EtcdOptions{} }, "8d7490337d", "ea16b54bd1"},
		{"both empty", func(s *etcdv1beta1.EtcdClusterSpec) {
			s.PodTemplate, s.Options = &etcdv1beta1.PodTemplate{}, &etcdv1beta1.EtcdOptions{ExtraArgs: map[string]string{}}
		}, "8d7490337d", "f5c1775709"},
		{"labels", func(s *etcdv1beta1.EtcdClusterSpec) {
			s.PodTemplate = &etcdv1beta1.PodTemplate{Labels: map[string]string{"team": "a"}}
		}, "ca7c7882ee", ""},
		{"no spread: the pods may have been built with the default one", func(s *etcdv1beta1.EtcdClusterSpec) {
			s.PodTemplate = &etcdv1beta1.PodTemplate{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{}}
		}, "", ""},
		{"no spread and empty options", func(s *etcdv1beta1.EtcdClusterSpec) {
			s.PodTemplate = &etcdv1beta1.PodTemplate{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{}}
			s.Options = &etcdv1beta1.EtcdOptions{}
		}, "", ""},
	} {
		c := base(tc.mut)
		got, prev := Options{}.SpecHash(c), Options{}.EmptySpecHash(c)
		if tc.hash != "" && got != tc.hash {
			t.Errorf("%s: SpecHash %s, want %s", tc.name, got, tc.hash)
		}
		if prev != tc.prev {
			t.Errorf("%s: EmptySpecHash %q, want %q", tc.name, prev, tc.prev)
		}
	}
}
