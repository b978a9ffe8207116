//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestNoSpace_QuotaRaiseRecovers: a 3-member cluster with a 16Mi quota is written until etcd refuses
// writes with its NOSPACE alarm. The cluster is reported as refusing writes (Available False, reason
// NoSpace, phase Degraded rather than QuorumLost), its members are neither restarted nor made unready
// by the alarm, and raising spec.options.quotaBackendBytes to 64Mi rolls them and disarms the alarm:
// writes are accepted again.
func TestNoSpace_QuotaRaiseRecovers(t *testing.T) {
	c := newCluster(t, "e2e-nospace", "demo", 3, testutil.WithQuota("16Mi"))
	assertAvailable(t, c, availableTimeout)
	kv := etcdClient(t, clientServiceEndpoint(t, c))
	value := strings.Repeat("x", 1<<20)
	full := false
	for i := 0; i < 40 && !full; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := kv.Put(ctx, fmt.Sprintf("big/%02d", i), value)
		cancel()
		switch {
		case errors.Is(err, rpctypes.ErrNoSpace):
			full = true
		case err != nil:
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if !full {
		t.Fatal("40 MiB written into a 16Mi quota without NOSPACE")
	}
	full0 := time.Now()
	// nothing in Kubernetes changes: the alarm shows at the next health check (--health-check-interval,
	// 60 s by default)
	poll.Eventually(t, 90*time.Second, "NoSpace reported", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		a := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionAvailable)
		p := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionProgressing)
		if a == nil || a.Status != "False" || a.Reason != etcdv1beta1.ReasonNoSpace {
			// Progressing says what the operator does instead (a pass that failed, a step taken)
			return fmt.Errorf("Available %+v; Progressing %+v; phase %s", a, p, got.Status.Phase)
		}
		if p == nil || p.Reason != etcdv1beta1.ReasonNoSpace || !strings.Contains(p.Message, "raise spec.options.quotaBackendBytes") {
			return fmt.Errorf("Progressing %+v", p)
		}
		if got.Status.Phase != etcdv1beta1.PhaseDegraded {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		return nil
	})
	t.Logf("NOSPACE: reported %s after the refused write", time.Since(full0).Round(100*time.Millisecond))
	// the alarm neither restarts members (liveness) nor takes them out of the Service (readiness): once
	// the burst of large writes is absorbed (a probe may time out under it on a loaded machine), every
	// member stays Ready while the alarm lasts
	allReady := func(ctx context.Context) error {
		pods, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		for name, p := range pods {
			if !ready(p) {
				return fmt.Errorf("pod %s is not Ready under NOSPACE", name)
			}
		}
		for name, n := range restarts(pods) {
			if n != 0 {
				return fmt.Errorf("pod %s restarted %d times under NOSPACE", name, n)
			}
		}
		return nil
	}
	poll.Eventually(t, statusTimeout, "every member Ready under NOSPACE", allReady)
	poll.Consistently(t, 10*time.Second, "every member Ready, none restarted, under NOSPACE", allReady)

	start := time.Now()
	poll.Eventually(t, statusTimeout, "raise the quota", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		got.Spec.Options.QuotaBackendBytes = ptr.To(resource.MustParse("64Mi"))
		return k8s.Update(ctx, got)
	})
	assertAvailable(t, c, rolloutTimeout)
	poll.Eventually(t, statusTimeout, "a write accepted", func(ctx context.Context) error {
		_, err := kv.Put(ctx, "after", "quota raised")
		return err
	})
	t.Logf("NOSPACE: quota raised -> members rolled, alarm disarmed, writes accepted in %s", time.Since(start).Round(100*time.Millisecond))
	if err := eventSaying(context.Background(), c, "DisarmedNoSpace", corev1.EventTypeNormal, "Disarmed the NOSPACE alarm"); err != nil {
		t.Error(err)
	}
}
