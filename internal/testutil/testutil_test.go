package testutil

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// TestEventuallyPollsUntilNil: the condition is called again after an error, with a live context,
// until it returns nil.
func TestEventuallyPollsUntilNil(t *testing.T) {
	calls := 0
	p := Poller{Interval: time.Millisecond, AttemptTimeout: time.Second}
	p.Eventually(t, 5*time.Second, "third call", func(ctx context.Context) error {
		if ctx.Err() != nil {
			t.Fatalf("attempt context already done: %v", ctx.Err())
		}
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if calls != 3 {
		t.Errorf("called %d times, want 3", calls)
	}
}

// TestConsistentlyChecksTheWholeWindow: the condition is called more than once within the window.
func TestConsistentlyChecksTheWholeWindow(t *testing.T) {
	calls := 0
	start := time.Now()
	Poller{Interval: 10 * time.Millisecond, AttemptTimeout: time.Second}.Consistently(t, 100*time.Millisecond, "holds", func(context.Context) error {
		calls++
		return nil
	})
	if took := time.Since(start); took < 100*time.Millisecond || calls < 2 {
		t.Errorf("%d calls in %s, want several over 100ms", calls, took)
	}
}

// TestFreePortsAreNeverRepeated: no port is handed out twice in one test binary.
func TestFreePortsAreNeverRepeated(t *testing.T) {
	seen := map[int]bool{}
	for _, p := range append(FreePorts(t, 20), FreePort(t), FreePort(t)) {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

// TestEtcdClusterAppliesOptionsInOrder: later options win.
func TestEtcdClusterAppliesOptionsInOrder(t *testing.T) {
	c := EtcdCluster("demo", InNamespace("ns1"), WithReplicas(3), WithStorageSize("1Gi"), WithEmptyDir(), WithReplicas(5),
		WithLabels("a", "b"), WithQuota("16Mi"), WithRestoreFrom("nightly"))
	if c.Name != "demo" || c.Namespace != "ns1" || ptr.Deref(c.Spec.Replicas, 0) != 5 || c.Labels["a"] != "b" {
		t.Errorf("metadata or replicas wrong: %+v", c.ObjectMeta)
	}
	if c.Spec.Storage.Size != nil || c.Spec.Storage.EmptyDir == nil {
		t.Errorf("storage %+v, want emptyDir without size", c.Spec.Storage)
	}
	if c.Spec.Options.QuotaBackendBytes.String() != "16Mi" || c.Spec.Bootstrap.Restore.BackupRef.Name != "nightly" {
		t.Errorf("options %+v, bootstrap %+v", c.Spec.Options, c.Spec.Bootstrap)
	}
	if empty := EtcdCluster("x"); !reflect.DeepEqual(empty.Spec, etcdv1beta1.EtcdClusterSpec{}) {
		t.Errorf("no options, spec %+v, want empty", empty.Spec)
	}
}
