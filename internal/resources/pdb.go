package resources

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/membership"
)

// Quorum returns the number of voting members a cluster of n needs to make progress: membership.Quorum,
// for the int32 counts of the API.
func Quorum(n int32) int32 { return int32(membership.Quorum(int(n))) }

// BuildPDB returns the PodDisruptionBudget of the member pods: evictions (node drains) may take a
// member only while a quorum stays available (of the desired members, or of the voters that exist,
// whichever is more), and never one while another is already down. A pod that is not Ready may always
// be evicted (unhealthyPodEvictionPolicy AlwaysAllow): a crash-looping member must not block a node
// drain. A scale-down holds evictions (HoldEvictions) while it drains members out of the client
// Service (see docs/scaling.md).
func BuildPDB(c *etcdv1beta1.EtcdCluster, voters int32) *policyv1.PodDisruptionBudget {
	// During a scale-down spec.replicas is already smaller than the cluster: the quorum of the voters
	// that exist is what must stay up.
	minAvailable := intstr.FromInt32(Quorum(max(c.Spec.ReplicasOrDefault(), voters)))
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: ownedMeta(c, c.Name),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable:               &minAvailable,
			Selector:                   &metav1.LabelSelector{MatchLabels: SelectorLabels(c)},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		},
	}
}

// HoldEvictions makes pdb refuse every eviction of its pods: minAvailable one more than pods, the
// member pods that exist, and unhealthyPodEvictionPolicy IfHealthyBudget. A Ready pod is then refused
// since no disruption is allowed, and one that is not Ready since the budget is not met (per the
// eviction subresource, which lets a pod that is not Ready go under IfHealthyBudget only while
// status.currentHealthy >= status.desiredHealthy). A scale-down holds evictions while it takes the
// members it removes out of the client Service: their pods are not Ready for those seconds, but their
// members still vote, and under AlwaysAllow a node drain could take them, and quorum with them.
func HoldEvictions(pdb *policyv1.PodDisruptionBudget, pods int32) {
	minAvailable := intstr.FromInt32(pods + 1)
	pdb.Spec.MinAvailable = &minAvailable
	pdb.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.IfHealthyBudget)
}

// EvictionsHeld reports whether pdb holds evictions as HoldEvictions sets it and the disruption
// controller has computed its status from that spec (status.observedGeneration): until then the
// eviction subresource judges a pod that is not Ready by the status of the spec before.
func EvictionsHeld(pdb *policyv1.PodDisruptionBudget) bool {
	p := pdb.Spec.UnhealthyPodEvictionPolicy
	return p != nil && *p == policyv1.IfHealthyBudget && pdb.Status.ObservedGeneration >= pdb.Generation &&
		pdb.Status.DesiredHealthy > pdb.Status.CurrentHealthy && pdb.Status.DisruptionsAllowed == 0
}
