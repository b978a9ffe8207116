package resources

import (
	"testing"

	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// TestBuildPDB: minAvailable is the quorum of the desired members, or of the voters that exist while
// a scale-down removes them.
func TestBuildPDB(t *testing.T) {
	if got := BuildPDB(cluster(func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](3) }), 5).Spec.MinAvailable.IntValue(); got != 3 {
		t.Errorf("scaling 5 -> 3: minAvailable %d, want 3 (quorum of the 5 voters that still exist)", got)
	}
	for replicas, want := range map[int32]int{1: 1, 3: 2, 5: 3, 7: 4, 9: 5} {
		pdb := BuildPDB(cluster(func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To(replicas) }), replicas)
		if pdb.Spec.MinAvailable.IntValue() != want {
			t.Errorf("replicas %d: minAvailable %s, want %d", replicas, pdb.Spec.MinAvailable.String(), want)
		}
	}
}
