package v1beta1

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// withClientFrom enables the cluster's NetworkPolicy with the given client sources.
func withClientFrom(peers ...networkingv1.NetworkPolicyPeer) testutil.ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.NetworkPolicy = &etcdv1beta1.NetworkPolicySpec{Enabled: true, ClientFrom: peers}
	}
}

func ipBlock(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

func namespaces(kv ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{kv[0]: kv[1]}}}
}

// TestValidateNetworkPolicy: every source the API server would refuse in the cluster's NetworkPolicy
// is refused at admission with what to write instead, on create and on update; valid sources pass.
func TestValidateNetworkPolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  testutil.ClusterOption
		errs []problem
	}{
		{"namespace selector", withClientFrom(namespaces("kubernetes.io/metadata.name", "apps")), nil},
		{"IPv4 and IPv6 blocks", withClientFrom(ipBlock("10.0.0.0/16", "10.0.1.0/24"), ipBlock("fd00::/64")), nil},
		{"no sources", withClientFrom(), nil},
		{"empty source", withClientFrom(networkingv1.NetworkPolicyPeer{}), []problem{{"spec.networkPolicy.clientFrom[0]",
			"a source needs podSelector, namespaceSelector or ipBlock"}}},
		{"ipBlock with a selector", withClientFrom(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"},
			PodSelector: &metav1.LabelSelector{}}), []problem{{"spec.networkPolicy.clientFrom[0]", "list them as two sources"}}},
		{"cidr without a mask", withClientFrom(ipBlock("10.0.0.1")), []problem{{"spec.networkPolicy.clientFrom[0].ipBlock.cidr",
			"is not a CIDR, such as 10.0.0.0/16"}}},
		{"except not a CIDR", withClientFrom(ipBlock("10.0.0.0/16", "ten")), []problem{{"spec.networkPolicy.clientFrom[0].ipBlock.except[0]", "is not a CIDR"}}},
		{"except outside cidr", withClientFrom(ipBlock("10.0.0.0/16", "192.168.0.0/24")), []problem{{"spec.networkPolicy.clientFrom[0].ipBlock.except[0]",
			"must be a range strictly inside cidr 10.0.0.0/16"}}},
		{"except equal to cidr", withClientFrom(ipBlock("10.0.0.0/16", "10.0.0.0/16")), []problem{{"spec.networkPolicy.clientFrom[0].ipBlock.except[0]", "strictly inside"}}},
		{"label key that is not one", withClientFrom(namespaces("not a key", "x")), []problem{{"spec.networkPolicy.clientFrom[0].namespaceSelector", "is not a label selector"}}},
		{"bad metrics source", func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.NetworkPolicy = &etcdv1beta1.NetworkPolicySpec{Enabled: true, MetricsFrom: []networkingv1.NetworkPolicyPeer{ipBlock("x")}}
		}, []problem{{"spec.networkPolicy.metricsFrom[0].ipBlock.cidr", "is not a CIDR"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs, _ := ValidateCreate(cluster(tc.opt))
			checkErrors(t, errs, tc.errs)
			errs, _ = ValidateUpdate(cluster(), cluster(tc.opt))
			checkErrors(t, errs, tc.errs)
		})
	}
}
