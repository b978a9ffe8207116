// Package testutil is what the project's test suites poll, listen and build with: Eventually and
// Consistently over observed state, FreePort, and an EtcdCluster builder with functional options. It
// starts nothing (internal/testenv starts envtest, etcd members and S3) and builds in every suite,
// the end-to-end one included.
package testutil

import (
	"context"
	"testing"
	"time"
)

const (
	// DefaultInterval is how long Eventually and Consistently wait between two attempts.
	DefaultInterval = 100 * time.Millisecond
	// DefaultAttemptTimeout bounds the context each attempt is given.
	DefaultAttemptTimeout = 10 * time.Second
)

// Poller calls a condition every Interval, each call with a context of AttemptTimeout. Suites that
// poll something slower or faster than an in-process API server declare their own.
type Poller struct {
	// Interval is the wait between the end of one attempt and the start of the next.
	Interval time.Duration
	// AttemptTimeout bounds the context of each attempt, not the whole poll.
	AttemptTimeout time.Duration
}

// Poll is the Poller of Eventually and Consistently.
var Poll = Poller{Interval: DefaultInterval, AttemptTimeout: DefaultAttemptTimeout}

// Eventually is Poll.Eventually.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) error) time.Duration {
	t.Helper()
	return Poll.Eventually(t, timeout, what, cond)
}

// Consistently is Poll.Consistently.
func Consistently(t testing.TB, window time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	Poll.Consistently(t, window, what, cond)
}

// Eventually calls cond until it returns nil and returns how long that took. When timeout has passed
// after a failed attempt, it fails the test with cond's last error. An attempt that has started is
// never cut short by timeout; its context ends after AttemptTimeout.
func (p Poller) Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) error) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		err := p.attempt(cond)
		if err == nil {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(p.Interval)
	}
}

// Consistently calls cond for the whole window and fails the test, with cond's error, the first time
// it does not return nil: for what must not happen (a pod started, a write, a retry) while nothing
// changes.
func (p Poller) Consistently(t testing.TB, window time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(p.Interval) {
		if err := p.attempt(cond); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// attempt calls cond once with a context of AttemptTimeout.
func (p Poller) attempt(cond func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), p.AttemptTimeout)
	defer cancel()
	return cond(ctx)
}
