package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdkit/etcd-operator/internal/auth"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/observe"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// defaultEtcdTimeout bounds each etcd call of a pass.
const defaultEtcdTimeout = 3 * time.Second

// etcdTimeout is the bound of each etcd call.
func (r *EtcdClusterReconciler) etcdTimeout() time.Duration {
	if r.EtcdTimeout == 0 {
		return defaultEtcdTimeout
	}
	return r.EtcdTimeout
}

// observe lists the cluster's claims and asks the members' etcd what it knows, and joins it all, with
// the pods reconcileTLS listed, into the pass's model. etcd being unreachable is an observation, not an
// error.
func (r *EtcdClusterReconciler) observe(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, pvcs, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return nil, fmt.Errorf("list persistentvolumeclaims: %w", err)
	}
	in := model.Input{Cluster: c, Options: r.Options, Pods: s.pods.Items, Claims: pvcs.Items}
	s.m = model.Build(in) // what Kubernetes holds: which pods to ask
	s.etcdBase = s.creds.Config(etcd.Config{TLS: r.Certs.ClientTLS(c.Namespace, c.Name)})
	in.Etcd, s.etcdClient, in.EtcdErr = observe.Etcd(ctx, r.EtcdClient, s.m, r.Options, r.etcdTimeout(), s.etcdBase)
	s.in, s.m = in, model.Build(in)
	return auth.Refused(in.EtcdErr, s.creds), nil
}
