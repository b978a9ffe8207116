package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/observe"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// DefaultConsistencyCheckInterval is how often the members' key-value hashes are compared.
const DefaultConsistencyCheckInterval = 10 * time.Minute

// hashKVTimeout bounds each member's HashKV, which reads its whole key-value store.
const hashKVTimeout = 10 * time.Second

// checkConsistency compares the key-value hashes of every voting member at one revision (the lowest
// any of them has applied), at most once per ConsistencyCheckInterval and only while the cluster is
// settled and healthy, and records the outcome in the DataInconsistent condition.
func (r *EtcdClusterReconciler) checkConsistency(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	interval := r.ConsistencyCheckInterval
	if interval < 0 || !s.m.Answered() {
		return nil, nil
	}
	if interval == 0 {
		interval = DefaultConsistencyCheckInterval
	}
	now := time.Now()
	if !r.consistency.Due(string(c.UID), interval, now) {
		return nil, nil
	}
	rev, endpoints := verdict.HashTarget(s.m)
	if rev == 0 {
		return nil, nil // not settled: check later
	}
	hashes := observe.Hashes(ctx, s.etcdClient, rev, endpoints, hashKVTimeout)
	v := verdict.CompareHashes(rev, hashes, len(endpoints))
	// an inconclusive comparison counts as a check too: hashing a large store on every member is not
	// retried more often than the interval
	r.consistency.Done(string(c.UID), now)
	if !v.Conclusive {
		return nil, nil
	}
	if v.Consistent {
		s.report.Consistency = &verdict.Progress{Reason: etcdv1beta1.ReasonHashesMatch, Message: v.Message}
		return nil, nil
	}
	s.report.Consistency = &verdict.Progress{Reason: etcdv1beta1.ReasonHashMismatch, Message: v.Message}
	if !verdict.HasCondition(c, etcdv1beta1.ConditionDataInconsistent, metav1.ConditionTrue, v.Message) {
		r.event(c, corev1.EventTypeWarning, etcdv1beta1.ReasonHashMismatch, "CheckConsistency", "%s", v.Message)
	}
	return nil, nil
}
