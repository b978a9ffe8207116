package verdict

import (
	"testing"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// TestAuthStatusApplied: status.auth names the root Secret and says whether etcd reported
// authentication on; a pass that did not ask etcd keeps what the status said, and one that did not look
// at all leaves status.auth alone.
func TestAuthStatusApplied(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{}
	on, off := true, false
	for _, step := range []struct {
		name string
		obs  *AuthObservation
		want *etcdv1beta1.AuthStatus
	}{
		{"Secret found, etcd not asked", &AuthObservation{RootSecret: "demo-root-credentials"}, &etcdv1beta1.AuthStatus{RootSecret: "demo-root-credentials"}},
		{"etcd says off", &AuthObservation{RootSecret: "demo-root-credentials", Enabled: &off}, &etcdv1beta1.AuthStatus{RootSecret: "demo-root-credentials"}},
		{"etcd says on", &AuthObservation{RootSecret: "demo-root-credentials", Enabled: &on}, &etcdv1beta1.AuthStatus{Enabled: true, RootSecret: "demo-root-credentials"}},
		{"etcd not asked keeps on", &AuthObservation{RootSecret: "demo-root-credentials"}, &etcdv1beta1.AuthStatus{Enabled: true, RootSecret: "demo-root-credentials"}},
		{"Secret renamed", &AuthObservation{RootSecret: "etcd-root"}, &etcdv1beta1.AuthStatus{Enabled: true, RootSecret: "etcd-root"}},
		{"no observation", nil, &etcdv1beta1.AuthStatus{Enabled: true, RootSecret: "etcd-root"}},
	} {
		applyAuthStatus(&scope{cluster: c, report: &Report{Auth: step.obs}})
		if got := c.Status.Auth; got == nil || *got != *step.want {
			t.Errorf("%s: status.auth = %+v, want %+v", step.name, got, step.want)
		}
	}
}
