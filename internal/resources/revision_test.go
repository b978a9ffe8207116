package resources

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestRevision: the revision of a spec gives back, once the spec has changed, the pod a member had on
// that spec, with the fields the revision does not keep (replicas) from the current spec; a revision
// whose data was changed, does not decode, or was made before a TLS change is refused.
func TestRevision(t *testing.T) {
	o := Options{}
	c := testutil.EtcdCluster("rv", testutil.WithReplicas(3))
	c.Namespace, c.Generation = "ns", 4
	c.Spec.Options = &etcdv1beta1.EtcdOptions{ExtraArgs: map[string]string{"log-level": "warn"}, SnapshotCount: ptr.To[int64](5000)}
	c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Labels: map[string]string{"team": "a"}}
	m := Member{Name: "rv-1", InitialClusterState: StateNew}
	served := o.BuildPod(c, m)
	rev := o.Revision(c)
	if rev.Name != "rv-"+o.SpecHash(c) || rev.Namespace != "ns" || rev.Labels[etcdv1beta1.LabelSpecHash] != o.SpecHash(c) || rev.Revision != 4 ||
		len(rev.OwnerReferences) != 1 || rev.Labels[etcdv1beta1.LabelCluster] != "rv" {
		t.Fatalf("revision %s labels %v revision %d owners %v", rev.Name, rev.Labels, rev.Revision, rev.OwnerReferences)
	}

	changed := c.DeepCopy()
	changed.Spec.Version, changed.Spec.Image = "3.6.99", "docker.io/local/etcd:no-such-tag"
	changed.Spec.Options = nil
	changed.Spec.PodTemplate = &etcdv1beta1.PodTemplate{NodeSelector: map[string]string{"zone": "nowhere"}, Labels: map[string]string{"team": "b"},
		Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Mi")}}}
	changed.Spec.Replicas = ptr.To[int32](5)
	back, err := o.SpecOfRevision(changed, rev)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.BuildPod(back, m); !equality.Semantic.DeepEqual(got.Spec, served.Spec) || !equality.Semantic.DeepEqual(got.Labels, served.Labels) ||
		got.Annotations[etcdv1beta1.AnnotationSpecHash] != served.Annotations[etcdv1beta1.AnnotationSpecHash] {
		t.Errorf("pod from the revision differs from the pod served on:\n%+v\nwant\n%+v", got, served)
	}
	if back.Spec.ReplicasOrDefault() != 5 || changed.Spec.Image != "docker.io/local/etcd:no-such-tag" {
		t.Errorf("replicas %d from the revision (want the current 5), or the current cluster changed (image %s)", back.Spec.ReplicasOrDefault(), changed.Spec.Image)
	}

	edited := rev.DeepCopy()
	edited.Data.Raw = []byte(`{"image":"evil/etcd:latest"}`)
	garbled := rev.DeepCopy()
	garbled.Data.Raw = []byte(`{not json`)
	tlsChanged := changed.DeepCopy()
	tlsChanged.Spec.TLS = &etcdv1beta1.TLSSpec{Secrets: &etcdv1beta1.TLSSecrets{Server: "own-server"}}
	if o.SpecHash(tlsChanged) == o.SpecHash(changed) {
		t.Fatal("the TLS Secrets do not change the spec hash: the TLS case tests nothing")
	}
	for what, tc := range map[string]struct {
		c   *etcdv1beta1.EtcdCluster
		rev *appsv1.ControllerRevision
	}{
		"edited data":          {changed, edited},
		"data that is no spec": {changed, garbled},
		"a TLS change since":   {tlsChanged, rev},
	} {
		if _, err := o.SpecOfRevision(tc.c, tc.rev); err == nil {
			t.Errorf("revision with %s: no error", what)
		}
	}
}
