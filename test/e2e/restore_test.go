//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestC12_RestoreIntoNewCluster: a=1 is written, the cluster is backed up to S3, b=2 is written; a new
// cluster restoring that backup has a new cluster ID shared by all its members, a=1 and not b=2; the
// source cluster is untouched.
func TestC12_RestoreIntoNewCluster(t *testing.T) {
	const ns = "e2e-c12"
	src := newCluster(t, ns, "src", 3)
	_, srcStatus := assertAvailable(t, src, availableTimeout)
	srcID := clusterIDOf(t, src)
	srcMembers := assertMembers(t, src, 3, srcID)
	store := startObjectStore(t, ns)
	dest := store.destination(t, ns, "s3-credentials", store.secretAccessKey)

	put := func(c *etcdv1beta1.EtcdCluster, k, v string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := etcdClient(t, clientServiceEndpoint(t, c)).Put(ctx, k, v); err != nil {
			t.Fatalf("put %s=%s into %s: %v", k, v, c.Name, err)
		}
	}
	get := func(c *etcdv1beta1.EtcdCluster, k string) (string, bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := etcdClient(t, clientServiceEndpoint(t, c)).Get(ctx, k, clientv3.WithSerializable())
		if err != nil {
			t.Fatalf("get %s from %s: %v", k, c.Name, err)
		}
		if len(resp.Kvs) == 0 {
			return "", false
		}
		return string(resp.Kvs[0].Value), true
	}

	put(src, "a", "1")
	createBackup(t, ns, "src-before-b", "src", &dest)
	b, took := waitBackup(t, ns, "src-before-b", etcdv1beta1.BackupSucceeded)
	t.Logf("C12: backup of %d bytes at revision %d in %s", b.Status.SizeBytes, b.Status.Revision, took.Round(100*time.Millisecond))
	put(src, "b", "2")

	restored := newCluster(t, ns, "copy", 3, testutil.WithRestoreFrom("src-before-b"))
	tookRestore, _ := assertAvailable(t, restored, availableTimeout)
	t.Logf("C12: apply -> restored cluster Available in %s", tookRestore.Round(100*time.Millisecond))
	newID := clusterIDOf(t, restored)
	if newID == srcID {
		t.Fatalf("the restored cluster has the source's cluster ID %x", srcID)
	}
	assertMembers(t, restored, 3, newID) // every member reports the new ID
	if v, ok := get(restored, "a"); !ok || v != "1" {
		t.Errorf("restored cluster: a = %q (present %v), want 1", v, ok)
	}
	if v, ok := get(restored, "b"); ok {
		t.Errorf("restored cluster has b = %q, written after the backup", v)
	}

	// the source is untouched: same cluster ID and members, both keys
	if id := clusterIDOf(t, src); id != srcID {
		t.Errorf("source cluster ID changed: %x -> %x", srcID, id)
	}
	after := assertMembers(t, src, 3, srcID)
	for i := range srcMembers {
		if srcMembers[i].ID != after[i].ID {
			t.Errorf("source member %s changed ID", srcMembers[i].Name)
		}
	}
	for k, want := range map[string]string{"a": "1", "b": "2"} {
		if v, ok := get(src, k); !ok || v != want {
			t.Errorf("source: %s = %q, want %s", k, v, want)
		}
	}
	got, err := getCluster(context.Background(), src)
	if err != nil || got.Status.ClusterID != srcStatus.Status.ClusterID {
		t.Errorf("source status clusterID %v -> %v (%v)", srcStatus.Status.ClusterID, got.Status.ClusterID, err)
	}
}
