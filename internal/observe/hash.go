package observe

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/etcdkit/etcd-operator/internal/etcd"
)

// Hashes asks every member of endpoints (client URLs by member name), in parallel, for its key-value
// hash at revision rev, each call bounded by timeout, and returns the hashes of those that answered, by
// member name, and whether a call ran out of time (timedOut: a store too large to hash within timeout,
// or a member that hangs). A member that did not answer is logged at V(1) and left out.
func Hashes(ctx context.Context, cli etcd.Client, rev int64, endpoints map[string]string, timeout time.Duration) (hashes map[string]etcd.KVHash, timedOut bool) {
	hashes = map[string]etcd.KVHash{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, ep := range endpoints {
		wg.Go(func() {
			hctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			h, err := cli.HashKV(hctx, ep, rev)
			if err != nil {
				logr.FromContextOrDiscard(ctx).V(1).Info("HashKV failed; the consistency check is retried", "member", name, "error", err.Error())
				if hctx.Err() != nil && ctx.Err() == nil {
					mu.Lock()
					timedOut = true
					mu.Unlock()
				}
				return
			}
			mu.Lock()
			hashes[name] = h
			mu.Unlock()
		})
	}
	wg.Wait()
	return hashes, timedOut
}

// Clock remembers when a check of each cluster (by UID) last ran, and what it covered, so that the
// caller can space checks whatever the pass rate, and run one again when what it would cover changed.
// Losing it (an operator restart) only makes the next check come early. The zero Clock is ready; it is
// safe for concurrent use.
type Clock struct {
	mu   sync.Mutex
	last map[string]check
}

// check is a check's record: when it ran and what it covered.
type check struct {
	at      time.Time
	covered string
}

// Last returns when the check of uid last ran and what it covered (as given to Done); ran is false when
// it has not run since the operator started.
func (c *Clock) Last(uid string) (at time.Time, covered string, ran bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.last[uid]
	return r.at, r.covered, ok
}

// Done records that the check of uid ran at now and covered covered (for instance, the members it
// compared).
func (c *Clock) Done(uid string, now time.Time, covered string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[string]check{}
	}
	c.last[uid] = check{at: now, covered: covered}
}

// Forget drops what the Clock holds of uid (a cluster deleted).
func (c *Clock) Forget(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, uid)
}
