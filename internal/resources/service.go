package resources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// BuildPeerService returns the headless Service that gives each member the DNS name of its peer URL.
// It publishes members that are not ready, so that members can find each other while they bootstrap.
func BuildPeerService(c *etcdv1beta1.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: ownedMeta(c, PeerServiceName(c)),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 SelectorLabels(c),
			Ports: []corev1.ServicePort{
				{Name: "peer", Port: PeerPort, TargetPort: intstr.FromInt32(PeerPort), Protocol: corev1.ProtocolTCP},
				{Name: "client", Port: ClientPort, TargetPort: intstr.FromInt32(ClientPort), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// BuildClientService returns the ClusterIP Service clients use; it sends traffic only to ready members.
func BuildClientService(c *etcdv1beta1.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: ownedMeta(c, ClientServiceName(c)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: SelectorLabels(c),
			Ports: []corev1.ServicePort{
				{Name: "client", Port: ClientPort, TargetPort: intstr.FromInt32(ClientPort), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}
