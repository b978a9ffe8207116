package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
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

// hashVerdict is the outcome of comparing the members' hashes.
type hashVerdict struct {
	// conclusive is false when the members hashed with different compact revisions (a compaction ran
	// between the calls) or did not all answer: compare again later.
	conclusive bool
	// consistent is true when every member has the same hash.
	consistent bool
	message    string
}

// compareHashes compares the hashes members computed at one revision, as etcd's corruption check does:
// hashes of the same revision and compact revision must be equal.
func compareHashes(rev int64, hashes map[string]etcd.KVHash, want int) hashVerdict {
	if len(hashes) < want {
		return hashVerdict{message: fmt.Sprintf("%d of %d members answered HashKV", len(hashes), want)}
	}
	names := make([]string, 0, len(hashes))
	for n := range hashes {
		names = append(names, n)
	}
	sort.Strings(names)
	compact := hashes[names[0]].CompactRevision
	byHash := map[uint32][]string{}
	var parts []string
	for _, n := range names {
		h := hashes[n]
		if h.CompactRevision != compact || h.HashRevision != rev {
			return hashVerdict{message: "members hashed different revisions; compare again later"}
		}
		byHash[h.Hash] = append(byHash[h.Hash], n)
		parts = append(parts, fmt.Sprintf("%s=%08x", n, h.Hash))
	}
	if len(byHash) == 1 {
		return hashVerdict{conclusive: true, consistent: true,
			message: fmt.Sprintf("All %d members hash to %08x at revision %d (compacted at %d)", len(names), hashes[names[0]].Hash, rev, compact)}
	}
	return hashVerdict{conclusive: true, message: fmt.Sprintf(
		"Members disagree on their data at revision %d: %s. Do not scale or upgrade; find the odd member out with `etcdctl endpoint hashkv --cluster`, then remove it and let the operator re-add it, or restore from a backup",
		rev, strings.Join(parts, ", "))}
}

// hashTarget returns the revision to compare the voters' hashes at (the lowest any of them has
// applied) and each voter's client URL; revision 0 when a member is a learner, or has not answered, or
// is unhealthy: the check waits for a settled cluster.
func hashTarget(m *model.Cluster) (int64, map[string]string) {
	var rev int64
	endpoints := map[string]string{}
	for _, mem := range m.Listed() {
		st := mem.Status
		if mem.Learner() || st == nil || !mem.Healthy() {
			return 0, nil
		}
		if rev == 0 || st.Revision < rev {
			rev = st.Revision
		}
		endpoints[mem.Name] = st.Endpoint
	}
	return rev, endpoints
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
func (r *EtcdClusterReconciler) checkConsistency(ctx context.Context, s *scope) (*step, error) {
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
	rev, endpoints := hashTarget(s.m)
	if rev == 0 {
		return nil, nil // not settled: check later
	}
	hashes := r.hashMembers(ctx, s.etcdClient, rev, endpoints)
	v := compareHashes(rev, hashes, len(endpoints))
	// an inconclusive comparison counts as a check too: hashing a large store on every member is not
	// retried more often than the interval
	r.consistency.done(c.UID, now)
	if !v.conclusive {
		return nil, nil
	}
	if v.consistent {
		s.report.consistency = &progress{etcdv1alpha1.ReasonHashesMatch, v.message}
		return nil, nil
	}
	s.report.consistency = &progress{etcdv1alpha1.ReasonHashMismatch, v.message}
	if !hasCondition(c, etcdv1alpha1.ConditionDataInconsistent, metav1.ConditionTrue, v.message) {
		r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonHashMismatch, "CheckConsistency", "%s", v.message)
	}
	return nil, nil
}
