package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/auth"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// reconcileRootSecret finds (or creates) the root password of a cluster with spec.auth before observe
// dials etcd with it (package auth); it blocks while the Secret cannot be used.
func (r *EtcdClusterReconciler) reconcileRootSecret(ctx context.Context, s *scope) (*verdict.Step, error) {
	creds, created, err := r.Auth.Ensure(ctx, s.cluster)
	if created {
		r.event(s.cluster, corev1.EventTypeNormal, "CreatedSecret", "Create", "Created Secret %s with a random password for etcd's user root", creds.Secret)
	}
	if auth.Blocked(err) {
		return verdict.Blocked(etcdv1beta1.ReasonRootSecretUnusable, err.Error()), nil
	}
	if s.creds = creds; creds != nil {
		s.report.Auth = &verdict.AuthObservation{RootSecret: creds.Secret}
	}
	return nil, err
}

// enableAuth turns etcd authentication on, as spec.auth asks, on a settled cluster (package auth).
func (r *EtcdClusterReconciler) enableAuth(ctx context.Context, s *scope) (*verdict.Step, error) {
	st, err := auth.Enable(ctx, s.etcdClient, s.creds, s.report.Auth, r.etcdTimeout())
	if st != nil {
		r.event(s.cluster, corev1.EventTypeNormal, etcdv1beta1.ReasonEnablingAuth, "EnableAuth", "%s", st.Message)
	}
	return st, err
}
