package v1beta1

import (
	"fmt"
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// validateNetworkPolicy refuses the sources of spec.networkPolicy that the API server would refuse in
// the cluster's NetworkPolicy, so that the operator could never create it: a source that selects
// nothing, an ipBlock beside a selector, a cidr or except that is not a CIDR, an except outside its
// cidr, a label selector that is not one.
func validateNetworkPolicy(np *etcdv1beta1.NetworkPolicySpec) field.ErrorList {
	if np == nil {
		return nil
	}
	var errs field.ErrorList
	path := specPath.Child("networkPolicy")
	for _, list := range []struct {
		name  string
		peers []networkingv1.NetworkPolicyPeer
	}{{"clientFrom", np.ClientFrom}, {"metricsFrom", np.MetricsFrom}} {
		for i, peer := range list.peers {
			errs = append(errs, validatePeer(path.Child(list.name).Index(i), peer)...)
		}
	}
	return errs
}

func validatePeer(p *field.Path, peer networkingv1.NetworkPolicyPeer) field.ErrorList {
	var errs field.ErrorList
	switch {
	case peer.IPBlock == nil && peer.PodSelector == nil && peer.NamespaceSelector == nil:
		return append(errs, field.Required(p, "a source needs podSelector, namespaceSelector or ipBlock, such as "+
			"{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: apps}}}"))
	case peer.IPBlock != nil && (peer.PodSelector != nil || peer.NamespaceSelector != nil):
		return append(errs, field.Invalid(p, "ipBlock with a selector",
			"ipBlock cannot be combined with podSelector or namespaceSelector in one source: list them as two sources"))
	}
	for _, sel := range []struct {
		name string
		sel  *metav1.LabelSelector
	}{{"podSelector", peer.PodSelector}, {"namespaceSelector", peer.NamespaceSelector}} {
		if sel.sel == nil {
			continue
		}
		if _, err := metav1.LabelSelectorAsSelector(sel.sel); err != nil {
			errs = append(errs, field.Invalid(p.Child(sel.name), sel.sel.String(), fmt.Sprintf("is not a label selector: %v", err)))
		}
	}
	if b := peer.IPBlock; b != nil {
		cidr, err := netip.ParsePrefix(b.CIDR)
		if err != nil {
			return append(errs, field.Invalid(p.Child("ipBlock", "cidr"), b.CIDR, "is not a CIDR, such as 10.0.0.0/16 or fd00::/64"))
		}
		for i, ex := range b.Except {
			e, err := netip.ParsePrefix(ex)
			switch {
			case err != nil:
				errs = append(errs, field.Invalid(p.Child("ipBlock", "except").Index(i), ex, "is not a CIDR, such as 10.0.1.0/24"))
			case e.Bits() <= cidr.Bits() || !cidr.Contains(e.Addr()):
				errs = append(errs, field.Invalid(p.Child("ipBlock", "except").Index(i), ex,
					fmt.Sprintf("must be a range strictly inside cidr %s", b.CIDR)))
			}
		}
	}
	return errs
}
