//go:build e2e

package e2e

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// The benchmarks measure operations on a real cluster and report each as seconds (and the API writes
// and etcd membership calls they took): BenchmarkSideBySide (sidebyside_test.go) the floor and this
// operator side by side, BenchmarkUpgrade3 a rolling upgrade. Run them with `make bench`
// (-benchtime=1x: each iteration is a whole cluster operation).

// opCost is what an operation cost the operator.
type opCost struct{ writes, membershipCalls float64 }

func operatorCounters(b *testing.B) opCost {
	b.Helper()
	ctx := context.Background()
	w, err := operatorMetric(ctx, "etcd_operator_api_writes_total")
	if err != nil {
		b.Fatalf("scrape operator metrics: %v", err)
	}
	m, err := operatorMetric(ctx, "etcd_operator_membership_operations_total")
	if err != nil {
		b.Fatalf("scrape operator metrics: %v", err)
	}
	return opCost{w, m}
}

func report(b *testing.B, took time.Duration, before opCost) {
	after := operatorCounters(b)
	b.ReportMetric(took.Seconds(), "s")
	b.ReportMetric(after.writes-before.writes, "api-writes")
	b.ReportMetric(after.membershipCalls-before.membershipCalls, "membership-calls")
	if rss, err := operatorMetric(context.Background(), "process_resident_memory_bytes"); err == nil {
		b.ReportMetric(rss/(1<<20), "operator-MiB")
	}
}

// benchRuns numbers the clusters of the benchmarks: the testing package may call a benchmark function
// more than once (b.N = 1 first, then the -benchtime count), and a namespace of the call before may
// still be terminating.
var benchRuns atomic.Int32
