package verdict

import (
	"fmt"
	"time"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// ClientTLSGrace is the step of a pass while every member serves both http:// and https:// on its
// client port during a switch of spec.tls.client.enabled (model.Cluster.ClientTLS): it says until when
// and what clients must do, and looks again when the grace period ends; nil when none is under way.
func ClientTLSGrace(m *model.Cluster) *Step {
	_, _, ends := m.ClientTLS()
	if ends.IsZero() {
		return nil
	}
	scheme, other := "https://", "http://"
	if !m.Object.Spec.ClientTLS() {
		scheme, other = other, scheme
	}
	st := Acting(etcdv1beta1.ReasonSwitchingTLS, fmt.Sprintf(
		"Switching TLS on the client port: every member serves http:// and https://; from %s on only %s: move clients to %s before then",
		ends.UTC().Format(time.RFC3339), scheme, scheme))
	if other == "http://" {
		st.Message += fmt.Sprintf(" with the CA and a client certificate (Secret %s)", resources.ClientTLSSecretName(m.Object))
	}
	st.After = ends.Sub(m.Now)
	return st
}
