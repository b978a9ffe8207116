package resources

import (
	"errors"
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// NetworkPolicyName is the name of cluster c's NetworkPolicy: "<cluster>-etcd".
func NetworkPolicyName(c *etcdv1beta1.EtcdCluster) string { return c.Name + "-etcd" }

// ErrOperatorPodUnknown is returned by BuildNetworkPolicy when the operator does not know its own pods:
// a policy would shut the operator out of the members.
var ErrOperatorPodUnknown = errors.New("the operator does not know its own namespace and pod labels " +
	"(it reads them from its pod through POD_NAME and POD_NAMESPACE), so a NetworkPolicy would shut it out of the members: " +
	"run the operator as installed, or set spec.networkPolicy.enabled to false")

// podTemplateLabels are labels a controller sets on its pods per revision: selecting on them would lose
// the operator's pods at its next upgrade.
var podTemplateLabels = []string{"pod-template-hash", "controller-revision-hash", "pod-template-generation"}

// BuildNetworkPolicy returns cluster c's NetworkPolicy: on the members' pods, the peer port (2380)
// accepts only the members and the operator; the client port (2379) only the operator's pods, the pods of the cluster's
// backup Jobs and spec.networkPolicy.clientFrom, or, when it lists none, the pods of the cluster's
// namespace; the metrics port (2381) the sources of
// spec.networkPolicy.metricsFrom, or every source. It fails with ErrOperatorPodUnknown when o does not
// name the operator's pods.
func (o Options) BuildNetworkPolicy(c *etcdv1beta1.EtcdCluster) (*networkingv1.NetworkPolicy, error) {
	operator := maps.Clone(o.OperatorPodLabels)
	for _, l := range podTemplateLabels {
		delete(operator, l)
	}
	if o.OperatorNamespace == "" || len(operator) == 0 {
		return nil, ErrOperatorPodUnknown
	}
	var spec etcdv1beta1.NetworkPolicySpec
	if c.Spec.NetworkPolicy != nil {
		spec = *c.Spec.NetworkPolicy
	}
	members := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(c)}}
	operatorPods := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: o.OperatorNamespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: operator},
	}
	users := spec.ClientFrom
	if len(users) == 0 {
		users = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}} // the cluster's namespace
	}
	clientFrom := append([]networkingv1.NetworkPolicyPeer{
		operatorPods,
		{PodSelector: &metav1.LabelSelector{MatchLabels: backupPodLabels(c)}},
	}, users...)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: ownedMeta(c, NetworkPolicyName(c)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: SelectorLabels(c)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				// the operator reads which certificate a member serves on it during a CA rotation, and holds
				// the CA that issues the peer certificates anyway
				{Ports: tcpPorts(PeerPort), From: []networkingv1.NetworkPolicyPeer{members, operatorPods}},
				{Ports: tcpPorts(ClientPort), From: clientFrom},
				{Ports: tcpPorts(MetricsPort), From: spec.MetricsFrom},
			},
		},
	}, nil
}

// backupPodLabels select the pods of cluster c's backup Jobs (see BackupLabels).
func backupPodLabels(c *etcdv1beta1.EtcdCluster) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "etcd-backup",
		"app.kubernetes.io/managed-by": "etcd-operator",
		etcdv1beta1.LabelCluster:       ShortName(c.Name, maxNameLength),
	}
}

func tcpPorts(port int) []networkingv1.NetworkPolicyPort {
	p := intstr.FromInt32(int32(port))
	return []networkingv1.NetworkPolicyPort{{Port: &p}}
}
