package resources

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

func TestServices(t *testing.T) {
	c := cluster()
	peer := BuildPeerService(c)
	if peer.Name != "demo-peer" || peer.Spec.ClusterIP != corev1.ClusterIPNone || !peer.Spec.PublishNotReadyAddresses {
		t.Errorf("peer service = %+v: must be headless and publish members that are not ready", peer.Spec)
	}
	cl := BuildClientService(c)
	if cl.Name != "demo-client" || cl.Spec.ClusterIP != "" || cl.Spec.PublishNotReadyAddresses {
		t.Errorf("client service = %+v", cl.Spec)
	}
	for _, s := range []*corev1.Service{peer, cl} {
		if s.Spec.Selector[etcdv1beta1.LabelCluster] != "demo" || !strings.HasPrefix(s.OwnerReferences[0].Kind, "EtcdCluster") {
			t.Errorf("%s: selector %v, owners %+v", s.Name, s.Spec.Selector, s.OwnerReferences)
		}
	}
}
