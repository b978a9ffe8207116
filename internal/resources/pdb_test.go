package resources

import (
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
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

// TestHoldEvictions: a held budget wants one pod more than there are, lets no pod that is not Ready go
// unless the budget is met, and says since when; it counts as held once the disruption controller has
// computed its status from that spec.
func TestHoldEvictions(t *testing.T) {
	pdb := BuildPDB(cluster(func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](1) }), 3)
	if _, held := HeldSince(pdb); held || EvictionsHeld(pdb) {
		t.Fatal("a budget as built counts as held")
	}
	at := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	HoldEvictions(pdb, 3, at)
	if got := pdb.Spec.MinAvailable.IntValue(); got != 4 {
		t.Errorf("minAvailable %d, want 4 (one more than the 3 pods)", got)
	}
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.IfHealthyBudget {
		t.Errorf("unhealthyPodEvictionPolicy %v, want IfHealthyBudget", p)
	}
	if since, held := HeldSince(pdb); !held || !since.Equal(at) {
		t.Errorf("held %v since %v, want since %v (annotations %v)", held, since, at, pdb.Annotations)
	}
	pdb.Generation = 2
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, CurrentHealthy: 3, DesiredHealthy: 2, DisruptionsAllowed: 1}
	if EvictionsHeld(pdb) {
		t.Error("held before the disruption controller observed the spec")
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 2, CurrentHealthy: 3, DesiredHealthy: 4}
	if !EvictionsHeld(pdb) {
		t.Errorf("not held with status %+v", pdb.Status)
	}
	pdb.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
	if _, held := HeldSince(pdb); held || EvictionsHeld(pdb) {
		t.Error("held under AlwaysAllow, which lets any pod that is not Ready go")
	}
}
