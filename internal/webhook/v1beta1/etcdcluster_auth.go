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

// validateAuth returns what is wrong with spec.auth of cluster c: a rootSecretRef without a name, with a
// name that is not a Secret name, or naming one of the Secrets the operator manages for c.
func validateAuth(c *etcdv1beta1.EtcdCluster) field.ErrorList {
	a := c.Spec.Auth
	if a == nil || a.RootSecretRef == nil {
		return nil
	}
	p := specPath.Child("auth", "rootSecretRef", "name")
	name := a.RootSecretRef.Name
	if name == "" {
		return field.ErrorList{field.Required(p, fmt.Sprintf(
			"name a Secret in namespace %s whose key \"password\" holds the root password, or remove rootSecretRef to let the operator create Secret %s",
			c.Namespace, c.Name+resources.RootSecretSuffix))}
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, name, "is not a Secret name: "+strings.Join(msgs, "; "))}
	}
	for _, managed := range []string{resources.CASecretName(c), resources.ServerTLSSecretName(c), resources.PeerTLSSecretName(c), resources.ClientTLSSecretName(c)} {
		if name == managed {
			return field.ErrorList{field.Invalid(p, name, fmt.Sprintf(
				"is a Secret the operator manages for the cluster's certificates (its keys are tls.crt and tls.key, not password): name another Secret, or remove rootSecretRef to let the operator create %s",
				c.Name+resources.RootSecretSuffix))}
		}
	}
	return nil
}

// validateAuthUpdate returns what is wrong with a change of spec.auth from old to c: validateAuth's
// problems and turning authentication off; nothing when spec.auth did not change.
func validateAuthUpdate(old, c *etcdv1beta1.EtcdCluster) field.ErrorList {
	if equality.Semantic.DeepEqual(old.Spec.Auth, c.Spec.Auth) {
		return nil
	}
	return append(validateAuth(c), validateAuthChange(old, c)...)
}

// validateAuthChange refuses turning etcd authentication off: the operator does not disable it (the
// keys it protected would be served to every client of the port), and a spec that says it is off while
// etcd keeps it on would mislead.
func validateAuthChange(old, c *etcdv1beta1.EtcdCluster) field.ErrorList {
	if !old.Spec.AuthEnabled() || c.Spec.AuthEnabled() {
		return nil
	}
	return field.ErrorList{field.Forbidden(specPath.Child("auth", "enabled"),
		"etcd authentication cannot be turned off once on: every client that reaches the client port would read and write every key. "+
			"Keep spec.auth.enabled: true; to run without authentication, restore a backup into a new EtcdCluster and run `etcdctl auth disable` there as root")}
}

// validateAuthRecovery refuses spec.auth together with spec.recovery.restoreOnQuorumLoss: without a
// quorum etcd authenticates no one (a login is a quorum read) and takes snapshots only for an admin, so
// the copies of the survivors a quorum-loss recovery starts with would fail every time, and the
// recovery would wait forever.
func validateAuthRecovery(c *etcdv1beta1.EtcdCluster) field.ErrorList {
	if !c.Spec.AuthEnabled() || c.Spec.Recovery == nil || !c.Spec.Recovery.RestoreOnQuorumLoss {
		return nil
	}
	return field.ErrorList{field.Invalid(specPath.Child("recovery", "restoreOnQuorumLoss"), true,
		"cannot be combined with spec.auth yet: without a quorum etcd authenticates no one, so the copies of the members that "+
			"kept their data would fail and the recovery would wait forever; set it to false (restore a backup by hand after a "+
			"quorum loss, see docs/restore.md) or leave spec.auth out")}
}
