//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
)

// The benchmarks measure the operations of DESIGN's targets on a real cluster, one cluster per
// benchmark, and report each as seconds (and the API writes and etcd membership calls they took).
// Run them with `make bench` (-benchtime=1x: each iteration is a whole cluster operation).

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

// benchRuns numbers the clusters of the benchmarks: the testing package calls a benchmark function
// more than once (b.N = 1 first, then the -benchtime count), and a namespace of the call before may
// still be terminating.
var benchRuns atomic.Int32

func benchCluster(b *testing.B, ns string, replicas int32) *etcdv1alpha1.EtcdCluster {
	b.Helper()
	return newCluster(b, fmt.Sprintf("%s-%d", ns, benchRuns.Add(1)), "demo", replicas)
}

// BenchmarkBootstrap3: apply -> Available with 3 healthy voters.
func BenchmarkBootstrap3(b *testing.B) {
	for i := 0; i < b.N; i++ {
		before := operatorCounters(b)
		c := benchCluster(b, "bench-boot", 3)
		took, _ := assertAvailable(b, c, availableTimeout)
		report(b, took, before)
	}
}

// BenchmarkMemberPodDeleted: a member's pod deleted (claim kept) -> 3 healthy voters again.
func BenchmarkMemberPodDeleted(b *testing.B) {
	c := benchCluster(b, "bench-pod", 3)
	assertAvailable(b, c, availableTimeout)
	for i := 0; i < b.N; i++ {
		before := operatorCounters(b)
		start := time.Now()
		pods, _ := memberPods(context.Background(), c)
		if err := k8s.Delete(context.Background(), pods["demo-1"]); err != nil {
			b.Fatal(err)
		}
		waitGone(b, c, "demo-1", pods["demo-1"].UID)
		assertAvailable(b, c, recoverTimeout)
		report(b, time.Since(start), before)
	}
}

// BenchmarkMemberPodAndClaimDeleted: a member's pod and claim deleted -> 3 healthy voters again.
func BenchmarkMemberPodAndClaimDeleted(b *testing.B) {
	c := benchCluster(b, "bench-pvc", 3)
	assertAvailable(b, c, availableTimeout)
	for i := 0; i < b.N; i++ {
		before := operatorCounters(b)
		start := time.Now()
		old := deleteMemberWithData(b, c, "demo-1")
		waitGone(b, c, "demo-1", old.UID)
		assertAvailable(b, c, scaleTimeout)
		report(b, time.Since(start), before)
	}
}

// BenchmarkScale3To5 grows a 3-member cluster to 5.
func BenchmarkScale3To5(b *testing.B) { benchScale(b, "bench-up", 3, 5) }

// BenchmarkScale5To3 shrinks a 5-member cluster to 3.
func BenchmarkScale5To3(b *testing.B) { benchScale(b, "bench-down", 5, 3) }

func benchScale(b *testing.B, ns string, from, to int32) {
	c := benchCluster(b, ns, from)
	assertAvailable(b, c, availableTimeout)
	for i := 0; i < b.N; i++ {
		if i > 0 {
			scale(b, c, from)
			assertAvailable(b, c, scaleTimeout)
		}
		before := operatorCounters(b)
		start := time.Now()
		scale(b, c, to)
		assertAvailable(b, c, scaleTimeout)
		report(b, time.Since(start), before)
	}
}

// waitGone waits until the pod of that name is not the one with uid.
func waitGone(b *testing.B, c *etcdv1alpha1.EtcdCluster, name string, uid types.UID) {
	poll.Eventually(b, recoverTimeout, name+" replaced", func(ctx context.Context) error {
		pods, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		if p, ok := pods[name]; ok && p.UID == uid {
			return fmt.Errorf("old pod still there")
		}
		return nil
	})
}
