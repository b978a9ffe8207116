//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// TestDivergedMemberReplaced: demo-1's data diverges from its peers' (the value of one key changed in
// its own database while it was stopped, as a disk or a bug that changes data under etcd would). It
// starts on its data and serves the changed value, with no alarm: etcd's own corruption checks are off
// by default. The operator's hash comparison, which runs every 10 minutes and within about a minute of
// a member's restart, finds the two others agree and demo-1 differs: DataInconsistent names it, and it
// is replaced at once under the default policy. The operator is not restarted: demo-1's own restart
// brings the comparison forward. With a continuous writer through the client Service, no
// acknowledged write is lost, and the new demo-1 reads the key's true value.
func TestDivergedMemberReplaced(t *testing.T) {
	const ns, key = "e2e-diverged", "diverge-me"
	c := newCluster(t, ns, "demo", 3)
	assertAvailable(t, c, availableTimeout)
	ctx := context.Background()
	oldID := memberID(t, c, "demo-1")
	svc := clientServiceEndpoint(t, c)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := etcdClient(t, svc).Put(pctx, key, "true value"); err != nil {
		t.Fatal(err)
	}
	w := startWriter(t, svc)

	// stop demo-1 (paused: the operator does not recreate its pod) and change the key in its database
	setPaused(t, c, true)
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, pods["demo-1"]); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, time.Minute, "demo-1's pod gone", func(ctx context.Context) error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pods["demo-1"]), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	pvc := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.PVCName("demo-1")}, pvc); err != nil {
		t.Fatal(err)
	}
	// local-path keeps volumes as directories on this node
	db := filepath.Join("/tmp/etcd-operator-k8s/pv", pvc.Spec.VolumeName+"_"+ns+"_"+pvc.Name,
		strings.TrimPrefix(resources.DataDir, resources.DataMountPath), "member", "snap", "db")
	changeValue(t, db, key, "diverged")
	setPaused(t, c, false)
	poll.Eventually(t, repairTimeout, "demo-1 serves on its changed data", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		for _, m := range got.Status.Members {
			if m.Name == "demo-1" && m.Healthy {
				return nil
			}
		}
		return errors.New("demo-1 not healthy yet")
	})
	// the comparison runs within about a minute of demo-1's restart (its last run was before it)
	start := time.Now()
	named := poll.Eventually(t, repairTimeout, "DataInconsistent names demo-1", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		d := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionDataInconsistent)
		if d != nil && d.Status == metav1.ConditionTrue && strings.Contains(d.Message, "demo-1 differs from the majority: replaced at once") {
			return nil
		}
		if eventSaying(ctx, c, "MemberRemoved", corev1.EventTypeWarning, "its data diverged from its peers'") == nil {
			return nil // removed before this poll saw the condition
		}
		return fmt.Errorf("DataInconsistent %+v", d)
	})
	t.Logf("demo-1 serving its changed data -> DataInconsistent named demo-1, or it was removed, in %s", named.Round(100*time.Millisecond))
	waitReplaced(t, c, "demo-1", oldID, repairTimeout)
	t.Logf("demo-1 serving its changed data -> demo-1 replaced, 3 healthy voters in %s", time.Since(start).Round(100*time.Millisecond))
	if err := eventSaying(ctx, c, "MemberRemoved", corev1.EventTypeWarning, "its data diverged from its peers' (at revision "); err != nil {
		t.Error(err)
	}
	pods, err = memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	resp, err := etcdClient(t, podEndpoint(pods["demo-1"])).Get(rctx, key)
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "true value" {
		t.Errorf("get %s through the new demo-1: %v, %v; want its true value", key, resp, err)
	}
	w.stopAndVerify(t, podEndpoint(pods["demo-1"]))
}

// changeValue sets the value of every revision of key in the etcd database file db (of a member that
// is stopped) to value, in place, as a disk or a bug that changes data under etcd would.
func changeValue(t testing.TB, db, key, value string) {
	t.Helper()
	bdb, err := bolt.Open(db, 0o600, &bolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("open %s: %v", db, err)
	}
	defer func() { _ = bdb.Close() }()
	changed := 0
	err = bdb.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return errors.New("no bucket key")
		}
		edits := map[string][]byte{}
		if err := b.ForEach(func(k, v []byte) error {
			var kv mvccpb.KeyValue
			if err := kv.Unmarshal(v); err != nil || string(kv.Key) != key {
				return nil
			}
			kv.Value = []byte(value)
			out, err := kv.Marshal()
			edits[string(k)] = out
			return err
		}); err != nil {
			return err
		}
		for k, v := range edits {
			if err := b.Put([]byte(k), v); err != nil {
				return err
			}
		}
		changed = len(edits)
		return nil
	})
	if err != nil || changed == 0 {
		t.Fatalf("change %q in %s: %v (%d revisions changed)", key, db, err, changed)
	}
}
