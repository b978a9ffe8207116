package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestPausedClusterKeepsItsMembers: with spec.paused a member pod that is deleted is not recreated, and
// a larger spec.replicas adds no member, while the status keeps reporting the members (phase Paused,
// Progressing False with reason Paused and what comes next); once resumed, the pod is recreated on its
// data and the events record the pause and the resumption.
func TestPausedClusterKeepsItsMembers(t *testing.T) {
	c := createCluster(t, "pause", 3)
	ctx := context.Background()
	names := []string{"pause-0", "pause-1", "pause-2"}
	hosts := []string{"127.0.0.141", "127.0.0.142", "127.0.0.143"}
	testenv.StartEtcd(t, names, hosts)
	runPods(t, c, map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]})
	c = waitAvailable(t, c, 3)

	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Paused = true })
	paused := func(want string) {
		t.Helper()
		testutil.Eventually(t, waitTimeout, "Progressing says paused and "+want, func(context.Context) error {
			c = getCluster(t, c)
			p := condition(c, etcdv1beta1.ConditionProgressing)
			if p == nil || p.Status != metav1.ConditionFalse || p.Reason != etcdv1beta1.ReasonPaused || !strings.Contains(p.Message, want) ||
				p.ObservedGeneration != c.Generation || c.Status.Phase != etcdv1beta1.PhasePaused {
				return fmt.Errorf("phase %s, progressing %+v", c.Status.Phase, p)
			}
			return nil
		})
	}
	paused("spec.paused is true")
	if a := condition(c, etcdv1beta1.ConditionAvailable); a == nil || a.Status != metav1.ConditionTrue {
		t.Errorf("Available %+v while paused, want True: the status keeps being observed", a)
	}

	pod, err := getPod(c, "pause-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	// a pass that saw the pod gone says what it would do, and did not do it
	paused("next once resumed: recreate the pods of pause-1 on their data")
	if _, err := getPod(c, "pause-1"); !apierrors.IsNotFound(err) {
		t.Fatalf("pod pause-1 recreated while paused (%v)", err)
	}

	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To[int32](5) })
	paused("spec.paused is true")
	for _, n := range []string{"pause-1", "pause-3", "pause-4"} {
		if _, err := getPod(c, n); !apierrors.IsNotFound(err) {
			t.Errorf("pod %s exists while paused (%v)", n, err)
		}
	}
	if got := len(getCluster(t, c).Status.Members); got != 3 {
		t.Errorf("%d members while paused, want 3", got)
	}

	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Paused, c.Spec.Replicas = false, ptr.To[int32](3) })
	testutil.Eventually(t, waitTimeout, "pod pause-1 recreated once resumed", func(context.Context) error {
		_, err := getPod(c, "pause-1")
		return err
	})
	runPods(t, c, map[string]string{names[1]: hosts[1]})
	c = waitAvailable(t, c, 3)
	testutil.Eventually(t, waitTimeout, "phase Running once resumed", func(context.Context) error {
		if c = getCluster(t, c); c.Status.Phase != etcdv1beta1.PhaseRunning {
			return fmt.Errorf("phase %s", c.Status.Phase)
		}
		return nil
	})
	testutil.Eventually(t, waitTimeout, "events Paused and Resumed", func(context.Context) error {
		evs := &eventsv1.EventList{}
		if err := k8s.List(ctx, evs, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			seen[e.Reason] = true
		}
		if !seen[etcdv1beta1.ReasonPaused] || !seen["Resumed"] {
			return fmt.Errorf("event reasons %v", seen)
		}
		return nil
	})
}

// TestPausedClusterKeepsItsHold: a cluster paused in the middle of a scale-down's drain keeps its
// PodDisruptionBudget's hold of evictions (its drained members still vote), and its paused passes
// restamp the hold, so that holdMax counts from the resume: unstamped, a pause longer than holdMax
// ended the hold on resume, just before the removals.
func TestPausedClusterKeepsItsHold(t *testing.T) {
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-pause-hold"}}); err != nil {
		t.Fatal(err)
	}
	c := testutil.EtcdCluster("hold", testutil.InNamespace("ns-pause-hold"), testutil.WithReplicas(3))
	c.Spec.Paused = true
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	retireAtEnd(t, c)
	pdb := resources.BuildPDB(c, 3)
	pdb.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(c, etcdv1beta1.GroupVersion.WithKind("EtcdCluster"))}
	stamped := time.Now().Add(-holdMax / 2).Truncate(time.Second)
	resources.HoldEvictions(pdb, 3, stamped)
	if err := k8s.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the hold restamped while paused", func(ctx context.Context) error {
		got := &policyv1.PodDisruptionBudget{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pdb), got); err != nil {
			return err
		}
		since, held := resources.HeldSince(got)
		switch {
		case !held:
			return fmt.Errorf("not held: %+v", got.Spec)
		case !since.After(stamped):
			return fmt.Errorf("held since %v, as stamped before the pause", since)
		}
		return nil
	})
}
