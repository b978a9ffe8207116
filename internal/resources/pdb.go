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
// drain. That includes, for the 1 to 3 s before a scale-down removes them, the pods it drained out of
// the client Service, whose members still serve (see docs/scaling.md).
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
