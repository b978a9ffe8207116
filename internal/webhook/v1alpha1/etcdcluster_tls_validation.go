package v1alpha1

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// validateTLSSecrets returns what is wrong with spec.tls.secrets of cluster c: a name that is not a
// Secret name or is one the operator creates for c; the server or client Secret missing with client
// TLS, the peer Secret with peer TLS; Secrets named without TLS on any port.
func validateTLSSecrets(c *etcdv1alpha1.EtcdCluster) field.ErrorList {
	s := &c.Spec
	if !s.UserTLSSecrets() {
		return nil
	}
	p := specPath.Child("tls", "secrets")
	if !s.AnyTLS() {
		return field.ErrorList{field.Forbidden(p, "names the Secrets of certificates, but TLS is off on both ports: set spec.tls.client.enabled or spec.tls.peer.enabled, or remove spec.tls.secrets")}
	}
	refs := s.TLS.Secrets
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
		case f.value == c.Name+resources.CASecretSuffix || f.value == c.Name+resources.RootSecretSuffix:
			errs = append(errs, field.Invalid(fp, f.value, "is a name the operator uses for the cluster's own Secrets: name another Secret"))
		}
	}
	return errs
}

// validateTLSUpdate checks a change of spec.tls from o to s: validateTLSSecrets, and adding or removing
// spec.tls.secrets while TLS is on, which is refused: the members trust only the CAs they started with,
// so certificates of another CA would lock them out of each other.
func validateTLSUpdate(old, c *etcdv1alpha1.EtcdCluster) field.ErrorList {
	errs := validateTLSSecrets(c)
	if o := &old.Spec; o.UserTLSSecrets() != c.Spec.UserTLSSecrets() && o.AnyTLS() {
		errs = append(errs, field.Forbidden(specPath.Child("tls", "secrets"), fmt.Sprintf(
			"cannot be %s while TLS is on: the members trust only the CAs they started with, so certificates of another CA would lock them out of each other; "+
				"switch TLS off first (spec.tls.client.enabled and spec.tls.peer.enabled false), or restore a backup into a new EtcdCluster", addedRemoved(c.Spec.UserTLSSecrets()))))
	}
	return errs
}

func addedRemoved(added bool) string {
	if added {
		return "added"
	}
	return "removed"
}
