//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// setPaused sets spec.paused of c.
func setPaused(t testing.TB, c *etcdv1beta1.EtcdCluster, paused bool) {
	t.Helper()
	poll.Eventually(t, statusTimeout, fmt.Sprintf("set paused %v", paused), func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		got.Spec.Paused = paused
		return k8s.Update(ctx, got)
	})
}

// TestPausedClusterHonoured: with spec.paused, a deleted member pod is not recreated while a client
// keeps writing through the two members left, and the status says so (phase Paused, Progressing names
// what the operator will do once resumed). Resumed, the member comes back on its data, with no
// acknowledged write lost.
func TestPausedClusterHonoured(t *testing.T) {
	c := newCluster(t, "e2e-pause", "demo", 3)
	assertAvailable(t, c, availableTimeout)
	ctx := context.Background()
	w := startWriter(t, clientServiceEndpoint(t, c))

	setPaused(t, c, true)
	pausedSays := func(want string) {
		t.Helper()
		poll.Eventually(t, statusTimeout, "Progressing Paused: "+want, func(ctx context.Context) error {
			got, err := getCluster(ctx, c)
			if err != nil {
				return err
			}
			p := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionProgressing)
			if p == nil || p.Reason != etcdv1beta1.ReasonPaused || p.Status != metav1.ConditionFalse ||
				!strings.Contains(p.Message, want) || got.Status.Phase != etcdv1beta1.PhasePaused {
				return fmt.Errorf("phase %s, progressing %+v", got.Status.Phase, p)
			}
			return nil
		})
	}
	pausedSays("spec.paused is true")

	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	victim := pods["demo-1"]
	if err := k8s.Delete(ctx, victim); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	poll.Eventually(t, recoverTimeout, "pod demo-1 gone", func(ctx context.Context) error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(victim), victim); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	// a pass that saw the pod gone says what it would do, and did not do it
	pausedSays("next once resumed: recreate the pods of demo-1 on their data")
	if pods, err := memberPods(ctx, c); err != nil || pods["demo-1"] != nil {
		t.Fatalf("pod demo-1 recreated while paused (%v)", err)
	}
	t.Logf("pause: demo-1 not recreated %s after its deletion", time.Since(deleted).Round(100*time.Millisecond))

	setPaused(t, c, false)
	resumed := time.Now()
	assertAvailable(t, c, recoverTimeout)
	poll.Eventually(t, statusTimeout, "3 ready members once resumed", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		if got.Status.ReadyReplicas != 3 || got.Status.Phase != etcdv1beta1.PhaseRunning {
			return fmt.Errorf("ready %d, phase %s", got.Status.ReadyReplicas, got.Status.Phase)
		}
		return nil
	})
	t.Logf("pause: resumed -> 3 ready members in %s", time.Since(resumed).Round(100*time.Millisecond))
	pods, err = memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	w.stopAndVerify(t, podEndpoint(pods["demo-1"])) // 0 acknowledged writes lost
}
