//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// recoveryHold is how long the test watches a cluster that lost its data without opting in, to see
// that no member is started on nothing.
const recoveryHold = 15 * time.Second

// TestC05_EmptyDirPodsAllRestarted: a 3-member emptyDir cluster is backed up (k=v), then written
// (k2=v2), then all its pods are deleted at once, taking every member's data. The operator reports the
// loss (Available False, QuorumDataLost, a Warning event) and starts nothing: no pod comes back, so
// there is no crash loop and no silently empty cluster. Once spec.recovery.restoreOnQuorumLoss is set,
// it recreates the cluster from the backup: Available again with a new cluster ID shared by all
// members, k=v present, k2 absent, no container restarts, status.recovery Succeeded naming the backup.
func TestC05_EmptyDirPodsAllRestarted(t *testing.T) {
	const ns = "e2e-c05"
	c := newCluster(t, ns, "demo", 3, testutil.WithEmptyDir())
	assertAvailable(t, c, availableTimeout)
	oldID := clusterIDOf(t, c)
	store := startObjectStore(t, ns)
	dest := store.destination(t, ns, "s3-credentials", store.secretAccessKey)

	kv := func(c *etcdv1beta1.EtcdCluster) clientv3.KV { return etcdClient(t, clientServiceEndpoint(t, c)) }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := kv(c).Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put k=v: %v", err)
	}
	cancel()
	createBackup(t, ns, "demo-before-k2", "demo", &dest)
	b, _ := waitBackup(t, ns, "demo-before-k2", etcdv1beta1.BackupSucceeded)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := kv(c).Put(ctx, "k2", "v2"); err != nil {
		t.Fatalf("put k2=v2: %v", err)
	}
	cancel()

	// Every pod at once: their emptyDirs, and every member's data, go with them.
	if err := k8s.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns),
		client.MatchingLabels{etcdv1beta1.LabelCluster: c.Name, "app.kubernetes.io/name": "etcd"}); err != nil {
		t.Fatalf("delete the member pods: %v", err)
	}
	lost := time.Now()
	poll.Eventually(t, availableTimeout, "QuorumDataLost reported", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		a := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionAvailable)
		if a == nil || a.Status != "False" || a.Reason != etcdv1beta1.ReasonQuorumDataLost || !strings.Contains(a.Message, "demo-0, demo-1, demo-2 lost their data") {
			return fmt.Errorf("Available %+v", a)
		}
		if got.Status.Phase != etcdv1beta1.PhaseQuorumLost {
			return fmt.Errorf("phase %s", got.Status.Phase)
		}
		return eventSaying(ctx, c, etcdv1beta1.ReasonQuorumDataLost, corev1.EventTypeWarning, "nothing is changed")
	})
	t.Logf("C05: all pods deleted -> QuorumDataLost reported in %s", time.Since(lost).Round(100*time.Millisecond))
	// Without the opt-in, nothing is started: no member pod exists once the deleted ones are gone.
	poll.Eventually(t, availableTimeout, "the deleted pods gone", func(ctx context.Context) error {
		pods, err := memberPods(ctx, c)
		if err != nil {
			return fmt.Errorf("%d member pods (%w)", len(pods), err)
		}
		if len(pods) > 0 {
			return fmt.Errorf("%d member pods", len(pods))
		}
		return nil
	})
	poll.Consistently(t, recoveryHold, "a member was started after the data loss without spec.recovery.restoreOnQuorumLoss", func(ctx context.Context) error {
		pods, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		if len(pods) > 0 {
			return fmt.Errorf("%d member pods exist", len(pods))
		}
		return nil
	})

	start := time.Now()
	poll.Eventually(t, availableTimeout, "opt in", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		got.Spec.Recovery = &etcdv1beta1.RecoverySpec{RestoreOnQuorumLoss: true}
		return k8s.Update(ctx, got)
	})
	took, got := assertAvailable(t, c, availableTimeout)
	t.Logf("C05: restoreOnQuorumLoss set -> restored cluster Available in %s", took.Round(100*time.Millisecond))
	newID := clusterIDOf(t, c)
	if newID == oldID {
		t.Fatalf("the restored cluster kept the lost cluster's ID %x", oldID)
	}
	assertMembers(t, c, 3, newID) // every member reports the new ID
	rec := got.Status.Recovery
	if rec == nil || rec.Phase != etcdv1beta1.RecoverySucceeded || rec.Backup != b.Name || rec.Revision != b.Status.Revision ||
		rec.PreviousClusterID != etcd.FormatID(oldID) || rec.CompletionTime == nil || rec.StartTime.Time.Before(start.Add(-time.Second)) {
		t.Errorf("status.recovery %+v", rec)
	}
	if got.Status.ClusterID != etcd.FormatID(newID) {
		t.Errorf("status.clusterID %s, etcd says %x", got.Status.ClusterID, newID)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	assertRestoredKeys(ctx, t, kv(c), map[string]string{"k": "v", "k2": ""})
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range restarts(pods) {
		if n != 0 {
			t.Errorf("pod %s restarted %d times", name, n)
		}
	}
	if err := eventSaying(ctx, c, "RestoredFromBackup", corev1.EventTypeNormal, "Recreated the cluster from EtcdBackup "+b.Name); err != nil {
		t.Error(err)
	}
}

// eventSaying returns nil when an event of the given reason and type about cluster c has a note
// containing text.
func eventSaying(ctx context.Context, c *etcdv1beta1.EtcdCluster, reason, eventType, text string) error {
	list := &eventsv1.EventList{}
	if err := k8s.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return err
	}
	var seen []string
	for _, e := range list.Items {
		if e.Regarding.Name == c.Name && e.Reason == reason && e.Type == eventType {
			if strings.Contains(e.Note, text) {
				return nil
			}
			seen = append(seen, e.Note)
		}
	}
	return fmt.Errorf("no %s event %s saying %q (seen %q)", eventType, reason, text, seen)
}

// TestQuorumLostWithClaims_RestoredFromBackup: a 3-member cluster on claims, opted in to
// restoreOnQuorumLoss in advance, is backed up (a=1) to its spec.backup.destination, written (b=2,
// applied by demo-0 too), then loses two members with their claims, as losing two nodes with local
// storage would. The survivor cannot form a quorum alone; the operator copies it first (an EtcdBackup
// of demo-0), finds its copy ahead of the backup, deletes it with its claim and recreates the three
// members from that copy: Available with a new cluster ID, a=1 and b=2 (nothing acknowledged before
// the loss is lost), 0 revisions known lost, the survivor on a new claim, no container restarts.
func TestQuorumLostWithClaims_RestoredFromBackup(t *testing.T) {
	const ns = "e2e-quorum-data"
	c := newCluster(t, ns, "demo", 3)
	assertAvailable(t, c, availableTimeout)
	oldID := clusterIDOf(t, c)
	store := startObjectStore(t, ns)
	dest := store.destination(t, ns, "s3-credentials", store.secretAccessKey)
	poll.Eventually(t, availableTimeout, "opt in", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		got.Spec.Recovery = &etcdv1beta1.RecoverySpec{RestoreOnQuorumLoss: true}
		got.Spec.Backup = &etcdv1beta1.BackupSpec{Destination: dest}
		return k8s.Update(ctx, got)
	})

	kv := func() clientv3.KV { return etcdClient(t, clientServiceEndpoint(t, c)) }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := kv().Put(ctx, "a", "1"); err != nil {
		t.Fatalf("put a=1: %v", err)
	}
	cancel()
	createBackup(t, ns, "demo-a", "demo", nil) // to the cluster's destination
	b, _ := waitBackup(t, ns, "demo-a", etcdv1beta1.BackupSucceeded)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	put, err := kv().Put(ctx, "b", "2")
	cancel()
	if err != nil {
		t.Fatalf("put b=2: %v", err)
	}
	// demo-0, the member that survives, has applied b=2 (a follower may trail the leader briefly)
	pod0 := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo-0"}, pod0); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, "demo-0 applied b=2", func(ctx context.Context) error {
		resp, err := etcdClient(t, podEndpoint(pod0)).Get(ctx, "b", clientv3.WithSerializable())
		switch {
		case err != nil:
			return err
		case resp.Header.Revision < put.Header.Revision:
			return fmt.Errorf("demo-0 at revision %d, b=2 at %d", resp.Header.Revision, put.Header.Revision)
		}
		return nil
	})
	survivorClaim := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "data-demo-0"}, survivorClaim); err != nil {
		t.Fatal(err)
	}

	lost := time.Now()
	deleteMemberWithData(t, c, "demo-1")
	deleteMemberWithData(t, c, "demo-2")
	poll.Eventually(t, 3*availableTimeout, "restored from the backup", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		if rec := got.Status.Recovery; rec == nil || rec.Phase != etcdv1beta1.RecoverySucceeded {
			return fmt.Errorf("phase %s, status.recovery %+v, conditions %v", got.Status.Phase, got.Status.Recovery, got.Status.Conditions)
		}
		return nil
	})
	_, got := assertAvailable(t, c, availableTimeout)
	t.Logf("C05 (claims): two members' claims deleted -> cluster recreated from the survivor's copy, Available in %s", time.Since(lost).Round(100*time.Millisecond))
	newID := clusterIDOf(t, c)
	if newID == oldID {
		t.Fatalf("the restored cluster kept the lost cluster's ID %x", oldID)
	}
	assertMembers(t, c, 3, newID)
	rec := got.Status.Recovery
	if len(rec.SurvivorSnapshots) != 1 || rec.Backup != rec.SurvivorSnapshots[0] || rec.Revision < put.Header.Revision || rec.Revision <= b.Status.Revision ||
		rec.LostRevisions == nil || *rec.LostRevisions != 0 || len(rec.LostMembers) == 0 || slices.Contains(rec.LostMembers, "demo-0") {
		t.Errorf("status.recovery %+v: want demo-0's copy restored, at revision %d or later (the backup %s has %d), 0 revisions lost, lost members among demo-1, demo-2",
			rec, put.Header.Revision, b.Name, b.Status.Revision)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	assertRestoredKeys(ctx, t, kv(), map[string]string{"a": "1", "b": "2"})
	now := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-demo-0"}, now); err != nil {
		t.Fatal(err)
	}
	if now.UID == survivorClaim.UID {
		t.Errorf("demo-0 still runs on the lost cluster's claim")
	}
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range restarts(pods) {
		if n != 0 {
			t.Errorf("pod %s restarted %d times", name, n)
		}
	}
}

// assertRestoredKeys checks a restored cluster's keys: each has the value want gives, and a key whose
// wanted value is "" (written after the backup) is absent.
func assertRestoredKeys(ctx context.Context, t testing.TB, kv clientv3.KV, want map[string]string) {
	t.Helper()
	for k, v := range want {
		resp, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		switch {
		case v == "" && len(resp.Kvs) > 0:
			t.Errorf("%s = %q: written after the backup, it cannot be in the restored cluster", k, resp.Kvs[0].Value)
		case v != "" && (len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) != v):
			t.Errorf("%s missing or wrong after the restore: %v", k, resp.Kvs)
		}
	}
}
