package controller

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// DefaultConsistencyCheckInterval is how often the members' key-value hashes are compared.
const DefaultConsistencyCheckInterval = 10 * time.Minute

// hashKVTimeout bounds each member's HashKV, which reads its whole key-value store.
const hashKVTimeout = 10 * time.Second

// consistencyClock remembers when each cluster's hashes were last compared, so that the check runs
// at most once per interval whatever the pass rate. Losing it (an operator restart) only makes the next
// check come early.
type consistencyClock struct {
	mu   sync.Mutex
	last map[types.UID]time.Time
}

func (c *consistencyClock) due(uid types.UID, interval time.Duration, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.last[uid]
	return !ok || now.Sub(t) >= interval
}

func (c *consistencyClock) done(uid types.UID, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[types.UID]time.Time{}
	}
	c.last[uid] = now
}

// hashMembers asks every member, in parallel, for its key-value hash at revision rev, and returns the
// hashes of those that answered within hashKVTimeout, by member name.
func (r *EtcdClusterReconciler) hashMembers(ctx context.Context, cli etcd.Client, rev int64, endpoints map[string]string) map[string]etcd.KVHash {
	hashes := map[string]etcd.KVHash{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, ep := range endpoints {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hctx, cancel := context.WithTimeout(ctx, hashKVTimeout)
			defer cancel()
			h, err := cli.HashKV(hctx, ep, rev)
			if err != nil {
				log.FromContext(ctx).V(1).Info("HashKV failed; the consistency check is retried", "member", name, "error", err.Error())
				return
			}
			mu.Lock()
			hashes[name] = h
			mu.Unlock()
		}()
	}
	wg.Wait()
	return hashes
}

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
	if !r.consistency.due(c.UID, interval, now) {
		return nil, nil
	}
	rev, endpoints := verdict.HashTarget(s.m)
	if rev == 0 {
		return nil, nil // not settled: check later
	}
	hashes := r.hashMembers(ctx, s.etcdClient, rev, endpoints)
	v := verdict.CompareHashes(rev, hashes, len(endpoints))
	// an inconclusive comparison counts as a check too: hashing a large store on every member is not
	// retried more often than the interval
	r.consistency.done(c.UID, now)
	if !v.Conclusive {
		return nil, nil
	}
	if v.Consistent {
		s.report.Consistency = &verdict.Progress{Reason: etcdv1alpha1.ReasonHashesMatch, Message: v.Message}
		return nil, nil
	}
	s.report.Consistency = &verdict.Progress{Reason: etcdv1alpha1.ReasonHashMismatch, Message: v.Message}
	if !verdict.HasCondition(c, etcdv1alpha1.ConditionDataInconsistent, metav1.ConditionTrue, v.Message) {
		r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonHashMismatch, "CheckConsistency", "%s", v.Message)
	}
	return nil, nil
}
