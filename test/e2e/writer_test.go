//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// writer puts keys w/<n> one after another through the client Service for as long as a disruptive
// step runs, and remembers every write etcd acknowledged.
type writer struct {
	cli    *clientv3.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	acked  []string
	failed int
	// longestGap is the longest time between two acknowledged writes: the client-visible outage.
	longestGap time.Duration
}

// startWriter starts writing through endpoint; stop it with stopAndVerify.
func startWriter(t testing.TB, endpoint string) *writer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cli: etcdClient(t, endpoint), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		last := time.Now()
		for n := 0; ctx.Err() == nil; n++ {
			key := fmt.Sprintf("w/%08d", n)
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := w.cli.Put(rctx, key, key)
			rcancel()
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, key)
				if gap := time.Since(last); gap > w.longestGap {
					w.longestGap = gap
				}
				last = time.Now()
			} else if ctx.Err() == nil {
				w.failed++
			}
			w.mu.Unlock()
			time.Sleep(20 * time.Millisecond) // pace: ~50 writes/s, no busy loop against a cluster that refuses
		}
	}()
	return w
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
		t.Fatalf("writer: no write was acknowledged (%d failed)", w.failed)
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
	t.Logf("writer: %d writes acknowledged, all readable; %d failed; longest gap between acknowledged writes %s",
		len(w.acked), w.failed, w.longestGap.Round(10*time.Millisecond))
}
