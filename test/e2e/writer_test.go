//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// writer puts keys w/<n> one after another through the client Service for as long as a disruptive
// step runs, and remembers every write etcd acknowledged.
type writer struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// cli is the client the next write goes through (switchTo replaces it).
	cli    *clientv3.Client
	acked  []string
	failed int
	// errs counts the failed writes by error message, to say why writes failed.
	errs map[string]int
	// longestGap is the longest time between two acknowledged writes: the client-visible outage.
	longestGap time.Duration
	// ackedAt holds when each acknowledged write returned, in order.
	ackedAt []time.Time
	// failedAt holds when each failed write returned, in order, to place a failure in an operation.
	failedAt []time.Time
}

// startWriter starts writing through endpoint (or endpoints, which the client balances over) and
// returns once etcd acknowledged the first write (within firstWriteTimeout), so that a disruption
// started afterwards is measured from a working path and not from a Service that kube-proxy has not
// programmed yet; stop it with stopAndVerify.
func startWriter(t testing.TB, endpoint string, more ...string) *writer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cli: etcdClient(t, append([]string{endpoint}, more...)...), cancel: cancel, done: make(chan struct{}), errs: map[string]int{}}
	go func() {
		defer close(w.done)
		// pace: at most ~50 writes/s, no busy loop against a cluster that refuses them
		pace := time.NewTicker(20 * time.Millisecond)
		defer pace.Stop()
		last := time.Now()
		for n := 0; ctx.Err() == nil; n++ {
			key := fmt.Sprintf("w/%08d", n)
			w.mu.Lock()
			cli := w.cli
			w.mu.Unlock()
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := cli.Put(rctx, key, key)
			rcancel()
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, key)
				if gap := time.Since(last); gap > w.longestGap {
					w.longestGap = gap
				}
				last = time.Now()
				w.ackedAt = append(w.ackedAt, last)
			} else if ctx.Err() == nil {
				w.failed++
				w.errs[err.Error()]++
				w.failedAt = append(w.failedAt, time.Now())
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-pace.C:
			}
		}
	}()
	poll.Eventually(t, firstWriteTimeout, "the first write through "+endpoint+" acknowledged", func(context.Context) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.acked) == 0 {
			return fmt.Errorf("%d writes failed: %s", w.failed, w.errorSummary())
		}
		return nil
	})
	return w
}

// longestGapFrom returns the longest time without an acknowledged write from start (an operation's
// start) until the first write acknowledged after done (when the operation counted as done): what a
// client saw of the operation. It waits up to 10 s for that write.
func (w *writer) longestGapFrom(t testing.TB, start, done time.Time) time.Duration {
	t.Helper()
	var gap time.Duration
	poll.Eventually(t, 10*time.Second, "a write acknowledged after the operation", func(context.Context) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		var ok bool
		if gap, ok = gapFrom(w.ackedAt, start, done); !ok {
			return fmt.Errorf("no write acknowledged since %s (%d failed: %s)", done.Format(time.StampMilli), w.failed, w.errorSummary())
		}
		return nil
	})
	return gap
}

// gapFrom returns the longest time between start and the acknowledgements in ackedAt (in order) up to
// the first one after done; ok is false when there is none after done yet.
func gapFrom(ackedAt []time.Time, start, done time.Time) (gap time.Duration, ok bool) {
	last := start
	for _, at := range ackedAt {
		if at.Before(start) {
			continue
		}
		gap = max(gap, at.Sub(last))
		last = at
		if at.After(done) {
			return gap, true
		}
	}
	return gap, false
}

// switchTo makes the writes after the one under way go through endpoint, as a client that is
// reconfigured (a new URL scheme, a certificate) and reconnects does.
func (w *writer) switchTo(t testing.TB, endpoint string) {
	t.Helper()
	cli := etcdClient(t, endpoint)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cli = cli
}

// firstWriteTimeout bounds how long a new client Service may take to carry its first write.
const firstWriteTimeout = 30 * time.Second

// failuresSince returns when each write that failed after start returned, in seconds after start
// ("+12.3s").
func (w *writer) failuresSince(start time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.failedAt))
	for _, at := range w.failedAt {
		if !at.Before(start) {
			out = append(out, fmt.Sprintf("%+.1fs", at.Sub(start).Seconds()))
		}
	}
	return out
}

// errorSummary lists the failed writes' errors, most frequent first; the caller holds w.mu.
func (w *writer) errorSummary() string {
	msgs := make([]string, 0, len(w.errs))
	for m := range w.errs {
		msgs = append(msgs, m)
	}
	sort.Slice(msgs, func(i, j int) bool { return w.errs[msgs[i]] > w.errs[msgs[j]] })
	parts := make([]string, 0, len(msgs))
	for _, m := range msgs {
		parts = append(parts, fmt.Sprintf("%dx %q", w.errs[m], m))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// stopAndVerify stops the writer and checks, through readEndpoint, that every acknowledged write is
// there with its value.
func (w *writer) stopAndVerify(t testing.TB, readEndpoint string) {
	t.Helper()
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.acked) == 0 {
		t.Fatalf("writer: no write was acknowledged (%d failed: %s)", w.failed, w.errorSummary())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := etcdClient(t, readEndpoint).Get(ctx, "w/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("writer: read back: %v", err)
	}
	have := map[string]string{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = string(kv.Value)
	}
	lost := 0
	for _, k := range w.acked {
		if have[k] != k {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("writer: %d of %d acknowledged writes are missing", lost, len(w.acked))
	}
	t.Logf("writer: %d writes acknowledged, all readable; %d failed (%s); longest gap between acknowledged writes %s",
		len(w.acked), w.failed, w.errorSummary(), w.longestGap.Round(10*time.Millisecond))
}
