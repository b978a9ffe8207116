package v1beta1

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// validateTLSSecrets returns what is wrong with spec.tls.secrets of cluster c: a name that is not a
// Secret name or is one the operator uses for c's own Secrets; the server or client Secret missing with
// client TLS, the peer Secret with peer TLS. (With TLS off on both ports the names may stay: the members
// use them until a switch off has finished.)
func validateTLSSecrets(c *etcdv1beta1.EtcdCluster) field.ErrorList {
	s := &c.Spec
	if !s.UserTLSSecrets() {
		return nil
	}
	p := specPath.Child("tls", "secrets")
	refs := s.TLS.Secrets
	own := map[string]bool{}
	for _, suffix := range []string{resources.CASecretSuffix, resources.ServerTLSSecretSuffix, resources.PeerTLSSecretSuffix, resources.ClientTLSSecretSuffix, resources.RootSecretSuffix} {
		own[c.Name+suffix] = true
		own[c.Name+resources.IssuedSecretInfix+suffix] = true
	}
	var errs field.ErrorList
	for _, f := range []struct {
		name, value, port string
		needed            bool
	}{{"server", refs.Server, "client", s.ClientTLS()}, {"client", refs.Client, "client", s.ClientTLS()}, {"peer", refs.Peer, "peer", s.PeerTLS()}} {
		fp := p.Child(f.name)
		switch {
		case f.value == "" && f.needed:
			errs = append(errs, field.Required(fp, fmt.Sprintf(
				"name the Secret of the %s certificate: TLS is on on the %s port and spec.tls.secrets is set, so the operator issues no certificate", f.name, f.port)))
		case f.value == "":
		case len(validation.IsDNS1123Subdomain(f.value)) > 0:
			errs = append(errs, field.Invalid(fp, f.value, "is not a Secret name: "+strings.Join(validation.IsDNS1123Subdomain(f.value), "; ")))
		case own[f.value]:
			errs = append(errs, field.Invalid(fp, f.value, "is a name the operator uses for the cluster's own Secrets: name another Secret"))
		}
	}
	return errs
}

// validateTLSUpdate checks a change of spec.tls from o to s: validateTLSSecrets; adding or removing
// spec.tls.secrets while TLS is on, which is refused (the members trust only the CAs they started with,
// so certificates of another CA would lock them out of each other), as is adding, removing or changing
// spec.tls.issuerRef (but changing the issuer of a cluster that never had its certificates); and
// clearing the name of a Secret
// whose port had TLS on, which is refused too (the members use it until a switch off has finished).
func validateTLSUpdate(old, c *etcdv1beta1.EtcdCluster) field.ErrorList {
	errs := validateTLSSecrets(c)
	o, s := &old.Spec, &c.Spec
	p := specPath.Child("tls", "secrets")
	if o.UserTLSSecrets() != s.UserTLSSecrets() && o.AnyTLS() {
		return append(errs, field.Forbidden(p, fmt.Sprintf(
			"cannot be %s while TLS is on: the members trust only the CAs they started with, so certificates of another CA would lock them out of each other; "+
				"switch TLS off first (spec.tls.client.enabled and spec.tls.peer.enabled false) and wait for the switch to finish, or restore a backup into a new EtcdCluster", addedRemoved(s.UserTLSSecrets()))))
	}
	if (o.AnyTLS() || old.Status.TLS != nil) && !equality.Semantic.DeepEqual(issuerOf(o), issuerOf(s)) && !neverIssued(old, s) {
		errs = append(errs, field.Forbidden(specPath.Child("tls", "issuerRef"),
			"cannot be added, removed or changed while TLS is on, nor until a switch off has finished (status.tls is gone then): the members trust only "+
				"the CAs they started with, so certificates of another issuer would lock them out of each other; switch TLS off first "+
				"(spec.tls.client.enabled and spec.tls.peer.enabled false) and wait for the switch to finish, or delete the EtcdCluster and create it again "+
				"(a cluster with data: restore a backup into it)"))
	}
	if !o.UserTLSSecrets() || !s.UserTLSSecrets() {
		return errs
	}
	for _, f := range []struct {
		name, old, new string
		on             bool
	}{{"server", o.TLS.Secrets.Server, s.TLS.Secrets.Server, o.ClientTLS()}, {"client", o.TLS.Secrets.Client, s.TLS.Secrets.Client, o.ClientTLS()},
		{"peer", o.TLS.Secrets.Peer, s.TLS.Secrets.Peer, o.PeerTLS()}} {
		if f.old != "" && f.new == "" && f.on {
			errs = append(errs, field.Forbidden(p.Child(f.name), fmt.Sprintf(
				"cannot be removed while its port has TLS on, nor when it is switched off: the members use Secret %s until the switch off has finished; remove it afterwards", f.old)))
		}
	}
	return errs
}

func addedRemoved(added bool) string {
	if added {
		return "added"
	}
	return "removed"
}

// neverIssued reports whether cluster old, whose spec.tls.issuerRef s changes to another issuer, has
// never had usable certificates of its issuer (no trust hash in its status, no member): a name mistyped
// on a new cluster is then fixed in place, since no member trusts any CA yet.
func neverIssued(old *etcdv1beta1.EtcdCluster, s *etcdv1beta1.EtcdClusterSpec) bool {
	return old.Spec.TLSIssuer() && s.TLSIssuer() && len(old.Status.Members) == 0 &&
		(old.Status.TLS == nil || old.Status.TLS.TrustedCAsHash == "")
}

// issuerOf is spec.tls.issuerRef of s with its defaults filled in; nil without one.
func issuerOf(s *etcdv1beta1.EtcdClusterSpec) *etcdv1beta1.IssuerReference {
	if !s.TLSIssuer() {
		return nil
	}
	ref := s.TLS.IssuerRef.Defaulted()
	return &ref
}
