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
// writes with its NOSPACE alarm and the data no longer fits (while it does, the operator defragments
// and disarms, and the writes go on). The cluster is reported as refusing writes (Available False, reason
// NoSpace, phase Degraded rather than QuorumLost), its members are neither restarted nor made unready
// by the alarm, and raising spec.options.quotaBackendBytes to 64Mi rolls them and disarms the alarm:
// writes are accepted again.
func TestNoSpace_QuotaRaiseRecovers(t *testing.T) {
	c := newCluster(t, "e2e-nospace", "demo", 3, testutil.WithQuota("16Mi"))
	assertAvailable(t, c, availableTimeout)
	kv := etcdClient(t, clientServiceEndpoint(t, c))
	value := strings.Repeat("x", 1<<20)
	// Write until etcd refuses writes with its NOSPACE alarm. How much of the file is data when it does
	// depends on how bbolt's copy-on-write pages were reused: when the data fits 90% of the quota, the
	// operator defragments the members and disarms the alarm by itself (the writes go on, the data
	// grows); the quota must be raised only once the data itself no longer fits. 40 MiB written bounds
	// it: in-use data cannot stay under 90% of 16Mi with more than 15 MiB of values stored.
	written, refused, defragRounds := 0, time.Time{}, 0
	for {
		for written < 40 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := kv.Put(ctx, fmt.Sprintf("big/%02d", written), value)
			cancel()
			if errors.Is(err, rpctypes.ErrNoSpace) {
				break
			}
			if err != nil {
				t.Fatalf("put %d: %v", written, err)
			}
			written++
		}
		if written == 40 {
			t.Fatal("40 MiB written into a 16Mi quota without a NOSPACE the operator could not clear")
		}
		refused = time.Now()
		// nothing in Kubernetes changes: the alarm shows at the next health check
		// (--health-check-interval, 60 s by default)
		var judged string
		poll.Eventually(t, 90*time.Second, "NOSPACE judged: reported, or cleared by defragmentation", func(ctx context.Context) error {
			got, err := getCluster(ctx, c)
			if err != nil {
				return err
			}
			a := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionAvailable)
			p := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionProgressing)
			if a != nil && a.Status == "False" && a.Reason == etcdv1beta1.ReasonNoSpace &&
				p != nil && p.Reason == etcdv1beta1.ReasonNoSpace && strings.Contains(p.Message, "raise spec.options.quotaBackendBytes") {
				if got.Status.Phase != etcdv1beta1.PhaseDegraded {
					return fmt.Errorf("NOSPACE reported, but phase %s", got.Status.Phase)
				}
				judged = "reported"
				return nil
			}
			alarms, err := kv.AlarmList(ctx)
			if err != nil {
				return err
			}
			if len(alarms.Alarms) == 0 {
				judged = "cleared"
				return nil
			}
			// Progressing says what the operator does instead (a pass that failed, a step taken)
			return fmt.Errorf("%d alarm(s); Available %+v; Progressing %+v; phase %s", len(alarms.Alarms), a, p, got.Status.Phase)
		})
		if judged == "reported" {
			break
		}
		defragRounds++
		if defragRounds > 10 {
			// the data grows by a write between rounds, or stays: a round without a write accepted is
			// the alarm coming back at once, and must not go on for ever
			t.Fatalf("NOSPACE cleared by defragmentation %d times with %d MiB written: the alarm keeps coming back", defragRounds, written)
		}
		t.Logf("NOSPACE after %d MiB written: the data fit, the operator defragmented and disarmed it in %s; writing on",
			written, time.Since(refused).Round(100*time.Millisecond))
		if err := eventSaying(context.Background(), c, "Defragmented", corev1.EventTypeNormal, "its database file went from"); err != nil {
			t.Error(err)
		}
	}
	t.Logf("NOSPACE: reported %s after the refused write (%d MiB written, %d round(s) cleared by defragmentation before)",
		time.Since(refused).Round(100*time.Millisecond), written, defragRounds)
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
