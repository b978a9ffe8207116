package verdict

import etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"

// AuthObservation is what a pass found of etcd authentication (status.auth).
type AuthObservation struct {
	// RootSecret is the Secret with the root password.
	RootSecret string
	// Enabled is what etcd answered; nil when the pass did not ask (the status keeps what it said).
	Enabled *bool
}

// applyAuthStatus sets status.auth from what the pass found; nothing when it did not look.
func applyAuthStatus(s *scope) {
	o := s.report.Auth
	if o == nil {
		return
	}
	st := &s.cluster.Status
	enabled := st.Auth != nil && st.Auth.Enabled
	if o.Enabled != nil {
		enabled = *o.Enabled
	}
	st.Auth = &etcdv1beta1.AuthStatus{Enabled: enabled, RootSecret: o.RootSecret}
}
