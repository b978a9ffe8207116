package resources

import (
	"time"

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

// HoldEvictions makes pdb refuse every eviction of its pods from since on: minAvailable one more than
// pods, the member pods that exist, and unhealthyPodEvictionPolicy IfHealthyBudget, with since in
// AnnotationEvictionsHeldSince. A Ready pod is then refused since no disruption is allowed, and one
// that is not Ready since the budget is not met (per the eviction subresource, which lets a pod that is
// not Ready go under IfHealthyBudget only while status.currentHealthy >= status.desiredHealthy); pods
// that are Pending or being deleted skip budgets. A scale-down holds evictions while it takes the
// members it removes out of the client Service: their pods are not Ready for those seconds, but their
// members still vote, and under AlwaysAllow a node drain could take them, and quorum with them.
func HoldEvictions(pdb *policyv1.PodDisruptionBudget, pods int32, since time.Time) {
	minAvailable := intstr.FromInt32(pods + 1)
	pdb.Spec.MinAvailable = &minAvailable
	pdb.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.IfHealthyBudget)
	pdb.Annotations = Merged(pdb.Annotations, map[string]string{etcdv1beta1.AnnotationEvictionsHeldSince: since.UTC().Format(time.RFC3339)})
}

// HeldSince returns when pdb began to hold evictions (HoldEvictions), and whether it does: its spec says
// IfHealthyBudget, which BuildPDB never sets. A hold without a readable time reports the zero time.
func HeldSince(pdb *policyv1.PodDisruptionBudget) (time.Time, bool) {
	p := pdb.Spec.UnhealthyPodEvictionPolicy
	if p == nil || *p != policyv1.IfHealthyBudget {
		return time.Time{}, false
	}
	t, _ := time.Parse(time.RFC3339, pdb.Annotations[etcdv1beta1.AnnotationEvictionsHeldSince])
	return t, true
}

// EvictionsHeld reports whether pdb holds evictions (HeldSince) and the disruption controller has
// computed its status from that spec (status.observedGeneration), with no disruption allowed and fewer
// healthy pods than desired: until then the eviction subresource judges a pod that is not Ready by the
// status of the spec before.
func EvictionsHeld(pdb *policyv1.PodDisruptionBudget) bool {
	_, held := HeldSince(pdb)
	return held && pdb.Status.ObservedGeneration >= pdb.Generation &&
		pdb.Status.DesiredHealthy > pdb.Status.CurrentHealthy && pdb.Status.DisruptionsAllowed == 0
}
