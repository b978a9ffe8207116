package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestC05_QuorumLostWithoutData: a 3-member emptyDir cluster whose pods are all deleted at once has
// lost its data for good. Without spec.recovery.restoreOnQuorumLoss the operator says so (Available
// and Progressing False, reason QuorumDataLost, a Warning event) and creates no pod: no member starts
// on nothing as if it were new. Once the user opts in, it restores the newest successful backup: every
// member is created with the restore init container and a cluster token of its own, status.recovery
// says Restoring from that backup, and once a new cluster answers, Succeeded with a new cluster ID.
func TestC05_QuorumLostWithoutData(t *testing.T) {
	ctx := context.Background()
	dest := &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups"}}
	c, members, names, hosts := runningCluster(t,
		testutil.EtcdCluster("c05", testutil.InNamespace("ns-c05"), testutil.WithReplicas(3), testutil.WithEmptyDir()), "127.0.0.51", "127.0.0.52", "127.0.0.53")
	oldID := c.Status.ClusterID
	sha := strings.Repeat("cd", 32)
	b := succeededBackup(t, c, "c05-nightly", dest, "ns-c05/c05/nightly.db", sha, 42)

	// Every member stops and every pod goes at once: the emptyDirs, and the data, go with them.
	for _, m := range members {
		m.Stop()
	}
	for _, n := range names {
		p, err := getPod(c, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := k8s.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, waitTimeout, "QuorumDataLost reported", func(context.Context) error {
		c = getCluster(t, c)
		a, p := condition(c, etcdv1beta1.ConditionAvailable), condition(c, etcdv1beta1.ConditionProgressing)
		if a == nil || a.Status != metav1.ConditionFalse || a.Reason != etcdv1beta1.ReasonQuorumDataLost {
			return fmt.Errorf("available %+v", a)
		}
		if p == nil || p.Status != metav1.ConditionFalse || p.Reason != etcdv1beta1.ReasonQuorumDataLost ||
			!strings.Contains(p.Message, "members c05-0, c05-1, c05-2 lost their data") || !strings.Contains(p.Message, "nothing is changed") {
			return fmt.Errorf("progressing %+v", p)
		}
		if c.Status.Phase != etcdv1beta1.PhaseQuorumLost {
			return fmt.Errorf("phase %s", c.Status.Phase)
		}
		if q := condition(c, etcdv1beta1.ConditionQuorumDataLost); q == nil || q.Status != metav1.ConditionTrue {
			return fmt.Errorf("QuorumDataLost %+v", q)
		}
		return nil
	})
	testutil.Eventually(t, waitTimeout, "a Warning event", func(context.Context) error {
		return findEvent(ctx, c, "", etcdv1beta1.ReasonQuorumDataLost, "lost their data")
	})
	// Passes keep coming (requeues every 5 s); none creates a member.
	rv := c.ResourceVersion
	testutil.Consistently(t, 6*time.Second, "a member was started after the data loss without restoreOnQuorumLoss", func(context.Context) error {
		for _, n := range names {
			if _, err := getPod(c, n); err == nil {
				return fmt.Errorf("pod %s exists", n)
			} else if !apierrors.IsNotFound(err) {
				return fmt.Errorf("pod %s exists (get: %w)", n, err)
			}
		}
		return nil
	})
	if got := getCluster(t, c); got.ResourceVersion != rv {
		t.Errorf("status rewritten while nothing changed: %s -> %s", rv, got.ResourceVersion)
	}

	// Opting in restores the newest successful backup.
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Recovery = &etcdv1beta1.RecoverySpec{RestoreOnQuorumLoss: true}
	})
	var token string
	for _, n := range names {
		var p *corev1.Pod
		testutil.Eventually(t, waitTimeout, "pod "+n+" recreated from the backup", func(context.Context) (err error) { p, err = getPod(c, n); return err })
		assertRestoreThenGate(t, p)
		args := p.Spec.InitContainers[0].Args
		for _, want := range []string{"--key=ns-c05/c05/nightly.db", "--sha256=" + sha, "--name=" + n} {
			if !slices.Contains(args, want) {
				t.Errorf("pod %s restore args lack %q: %q", n, want, args)
			}
		}
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--initial-cluster-token="); ok {
				if v == string(c.UID) || (token != "" && v != token) {
					t.Errorf("pod %s restores with token %q: want one token for all, not the cluster UID", n, v)
				}
				token = v
			}
		}
		if !slices.Contains(p.Spec.Containers[0].Command, "--initial-cluster-token="+token) {
			t.Errorf("pod %s starts etcd with another token than it restores with: %q", n, p.Spec.Containers[0].Command)
		}
	}
	c = getCluster(t, c)
	rec := c.Status.Recovery
	if rec == nil || rec.Phase != etcdv1beta1.RecoveryRestoring || rec.Backup != b.Name || rec.Revision != 42 ||
		rec.PreviousClusterID != oldID || !slices.Equal(rec.LostMembers, names) || rec.Destination == nil || rec.Destination.PVC.ClaimName != "backups" {
		t.Fatalf("status.recovery %+v", rec)
	}
	if c.Status.Phase != etcdv1beta1.PhaseRestoring || c.Status.ClusterID != "" {
		t.Errorf("phase %s clusterID %q while restoring", c.Status.Phase, c.Status.ClusterID)
	}
	waitEvent(t, c, etcdv1beta1.ReasonRestoringFromBackup, "recreating the cluster from EtcdBackup c05-nightly")

	// The members restore and form a new cluster (here: a new embedded cluster at the pods' addresses,
	// with the token the operator chose; the token of the lost one would make the same cluster ID).
	restored := testenv.StartEtcdWithToken(t, token, names, hosts)
	runPods(t, c, map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]})
	testutil.Eventually(t, waitTimeout, "recovery Succeeded", func(context.Context) error {
		c = getCluster(t, c)
		if rec := c.Status.Recovery; rec == nil || rec.Phase != etcdv1beta1.RecoverySucceeded || rec.CompletionTime == nil {
			return fmt.Errorf("status.recovery %+v", rec)
		}
		if c.Status.Phase != etcdv1beta1.PhaseRunning {
			return fmt.Errorf("phase %s", c.Status.Phase)
		}
		return nil
	})
	newID := etcd.FormatID(uint64(restored[0].Etcd.Server.Cluster().ID()))
	if c.Status.ClusterID != newID || newID == oldID {
		t.Errorf("clusterID %s, want the new cluster's %s (old %s)", c.Status.ClusterID, newID, oldID)
	}
	if n := promtestutil.ToFloat64(metrics.QuorumRestores.WithLabelValues("succeeded")); n < 1 {
		t.Errorf("etcd_operator_quorum_loss_restores_total{result=succeeded} = %v", n)
	}
}

// waitEvent waits until cluster c has an event of reason whose note contains text: events are written
// asynchronously, so what they tell of may be seen before them.
func waitEvent(t *testing.T, c *etcdv1beta1.EtcdCluster, reason, text string) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, reason+" event", func(ctx context.Context) error { return findEvent(ctx, c, "", reason, text) })
}

// waitWarning is waitEvent for an event of type Warning.
func waitWarning(t *testing.T, c *etcdv1beta1.EtcdCluster, reason, text string) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, reason+" warning", func(ctx context.Context) error {
		return findEvent(ctx, c, corev1.EventTypeWarning, reason, text)
	})
}

// findEvent returns nil when an event of the given type ("": any) and reason about c has a note
// containing text.
func findEvent(ctx context.Context, c *etcdv1beta1.EtcdCluster, kind, reason, text string) error {
	list := &eventsv1.EventList{}
	if err := k8s.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return err
	}
	var seen []string
	for _, e := range list.Items {
		if e.Regarding.Name == c.Name && e.Reason == reason {
			if strings.Contains(e.Note, text) && (kind == "" || e.Type == kind) {
				return nil
			}
			seen = append(seen, e.Type+": "+e.Note)
		}
	}
	return errors.New("no " + reason + " event saying " + fmt.Sprintf("%q", text) + fmt.Sprintf("; seen %q", seen))
}

// stopThenDeleteData stops the etcd members of the given indexes, all of them first, then deletes
// their pods and claims: the quorum is lost before any data is, as when several nodes go at once.
func stopThenDeleteData(t *testing.T, c *etcdv1beta1.EtcdCluster, members []*testenv.EtcdMember, names []string, idx ...int) {
	t.Helper()
	for _, i := range idx {
		members[i].Stop()
	}
	for _, i := range idx {
		deleteMemberAndClaim(t, c, names[i])
	}
}

// TestQuorumLostWithClaimsGone: 2 of 3 members lose their pods and claims while the third keeps its
// data but cannot form a quorum alone; restoreOnQuorumLoss was set in advance. The survivor is copied
// first (an EtcdBackup of that member), and its copy, ahead of the older backup, is chosen. Under
// retainPolicy Retain the restore waits and names the claim it will not delete; once the policy is
// Delete, the survivor's pod and claim are deleted, and every member is recreated on a new claim
// restoring the survivor's copy.
func TestQuorumLostWithClaimsGone(t *testing.T) {
	ctx := context.Background()
	c, members, names, _ := runningCluster(t, &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "lc", Namespace: "ns-lostclaims"},
		Spec: etcdv1beta1.EtcdClusterSpec{Replicas: ptr.To[int32](3),
			Storage:  etcdv1beta1.StorageSpec{RetainPolicy: etcdv1beta1.RetainPolicyRetain},
			Recovery: &etcdv1beta1.RecoverySpec{RestoreOnQuorumLoss: true},
			Backup: &etcdv1beta1.BackupSpec{Destination: etcdv1beta1.BackupDestination{
				PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups"}}}}}, "127.0.0.71", "127.0.0.72", "127.0.0.73")
	// A backup with no destination of its own: the cluster's spec.backup.destination holds it.
	b := succeededBackup(t, c, "lc-hourly", nil, "ns-lostclaims/lc/hourly.db", strings.Repeat("ef", 32), 7)

	// lc-1 and lc-2 lose their pods and claims; lc-0 keeps running on its data, without a quorum. Both
	// stop before a claim goes: otherwise, while lc-0 and lc-2 still have a quorum, the operator rightly
	// removes lc-1 from etcd (its data is gone), and the quorum lost later is one of 2 voters.
	destinationClaim(t, c.Namespace, "backups")
	revBefore := getCluster(t, c).Status.Revision
	if revBefore == 0 {
		t.Fatalf("status.revision not reported before the loss")
	}
	stopThenDeleteData(t, c, members, names, 1, 2)

	// lc-0 kept its data: it is copied first, by an EtcdBackup of that member only, and nothing is
	// deleted while the copy runs
	survivor := waitSurvivorCopy(t, c, names[0])
	// its Job runs although the cluster is not Available, against lc-0 only
	testutil.Eventually(t, waitTimeout, "the survivor's copy runs", func(context.Context) error {
		job := &batchv1.Job{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.BackupJobName(survivor)}, job); err != nil {
			return err
		}
		if args := job.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--member="+resources.Options{}.ClientURL(c, "lc-0")) {
			return fmt.Errorf("job args %q", args)
		}
		return nil
	})
	// the survivor is ahead of the hourly backup (revision 7): its copy is the one restored
	markSucceeded(t, c, survivor, "ns-lostclaims/lc/"+survivor.Name+".db", strings.Repeat("ab", 32), revBefore+10)
	b = survivor
	testutil.Eventually(t, waitTimeout, "the restore waits for the retained claim", func(context.Context) error {
		c = getCluster(t, c)
		p := condition(c, etcdv1beta1.ConditionProgressing)
		if p == nil || p.Reason != etcdv1beta1.ReasonQuorumDataLost || !strings.Contains(p.Message, "members lc-1, lc-2 lost their data") ||
			!strings.Contains(p.Message, "claims data-lc-0 still hold the lost cluster's data and storage.retainPolicy is Retain") {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	if c.Status.Recovery != nil {
		t.Fatalf("a restore started while a retained claim holds data: %+v", c.Status.Recovery)
	}
	if _, err := getPod(c, names[0]); err != nil {
		t.Fatalf("the survivor's pod was touched under Retain: %v", err)
	}

	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.RetainPolicy = etcdv1beta1.RetainPolicyDelete })
	testutil.Eventually(t, waitTimeout, "restore started", func(context.Context) error {
		c = getCluster(t, c)
		if rec := c.Status.Recovery; rec == nil || rec.Backup != b.Name || !slices.Equal(rec.LostMembers, []string{"lc-1", "lc-2"}) ||
			!slices.Equal(rec.SurvivorSnapshots, []string{survivor.Name}) || rec.LostRevisions == nil || *rec.LostRevisions != 0 || rec.Revision != revBefore+10 {
			return fmt.Errorf("status.recovery %+v", rec)
		}
		return nil
	})
	members[0].Stop()
	old0, err := getPod(c, names[0])
	if err == nil {
		// the survivor's pod and claim go (kubelet and kube-controller-manager would finish that here)
		testutil.Eventually(t, waitTimeout, "survivor's pod deleted", func(context.Context) error {
			p, err := getPod(c, names[0])
			if apierrors.IsNotFound(err) || (err == nil && p.UID != old0.UID) {
				return nil
			}
			return fmt.Errorf("pod %s still the old one (deleting: %v)", names[0], p.DeletionTimestamp != nil)
		})
	}
	testutil.Eventually(t, waitTimeout, "survivor's claim gone", func(context.Context) error {
		pvc := &corev1.PersistentVolumeClaim{}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "data-lc-0"}, pvc)
		if err == nil && pvc.Annotations[etcdv1beta1.AnnotationInitialClusterState] != "" && pvc.CreationTimestamp.After(c.Status.Recovery.StartTime.Add(-time.Second)) {
			return nil // already recreated for the restore
		}
		if err == nil && pvc.DeletionTimestamp == nil {
			return fmt.Errorf("claim data-lc-0 not deleted")
		}
		if err == nil && len(pvc.Finalizers) > 0 {
			pvc.Finalizers = nil
			_ = k8s.Update(ctx, pvc)
			return fmt.Errorf("claim data-lc-0 finishing its deletion")
		}
		return client.IgnoreNotFound(err)
	})
	for _, n := range names {
		testutil.Eventually(t, waitTimeout, "pod "+n+" restoring", func(context.Context) error {
			p, err := getPod(c, n)
			if err != nil {
				return err
			}
			if len(p.Spec.InitContainers) != 2 || !slices.Contains(p.Spec.InitContainers[0].Args, "--key=ns-lostclaims/lc/"+survivor.Name+".db") ||
				!slices.Contains(p.Spec.InitContainers[0].Args, "--dir="+resources.BackupPVCDir) {
				return fmt.Errorf("pod %s has no restore of the backup from the cluster's destination: %+v", n, p.Spec.InitContainers)
			}
			return nil
		})
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(n)}, &corev1.PersistentVolumeClaim{}); err != nil {
			t.Errorf("claim of %s: %v", n, err)
		}
	}
	if c = getCluster(t, c); c.Status.Phase != etcdv1beta1.PhaseRestoring || c.Status.Recovery.Phase != etcdv1beta1.RecoveryRestoring {
		t.Errorf("phase %s, recovery %+v", c.Status.Phase, c.Status.Recovery)
	}
}

// deleteMemberAndClaim deletes member name's pod and claim, finishing the claim's deletion as
// kube-controller-manager would once no pod uses it.
func deleteMemberAndClaim(t *testing.T, c *etcdv1beta1.EtcdCluster, name string) {
	t.Helper()
	ctx := context.Background()
	// the claim first, as a cluster with the PVC-protection controller has it: marked for deletion
	// while its pod still runs, so the operator never sees the pod gone and the claim still usable (it
	// would recreate the pod on it)
	pvc := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(name)}, pvc); err == nil {
		if err := k8s.Delete(ctx, pvc); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	if p, err := getPod(c, name); err == nil {
		if err := k8s.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, waitTimeout, "claim of "+name+" deleted", func(context.Context) error {
		pvc := &corev1.PersistentVolumeClaim{}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(name)}, pvc)
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if pvc.DeletionTimestamp == nil {
			if err := k8s.Delete(ctx, pvc); err != nil {
				return err
			}
		}
		if len(pvc.Finalizers) > 0 {
			pvc.Finalizers = nil
			_ = k8s.Update(ctx, pvc)
		}
		return fmt.Errorf("claim of %s being deleted", name)
	})
}

// TestRestoreCancelledWhenTurnedOff: a restore that is still deleting the lost cluster (here the
// survivor's pod is held by a finalizer) is cancelled when spec.recovery.restoreOnQuorumLoss is turned
// off: status.recovery is cleared, an event says so, and no member is created from the backup.
func TestRestoreCancelledWhenTurnedOff(t *testing.T) {
	ctx := context.Background()
	dest := &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups"}}
	cx := testutil.EtcdCluster("cx", testutil.InNamespace("ns-cancel"), testutil.WithReplicas(3), testutil.WithRestoreOnQuorumLoss(true))
	cx.Spec.Backup = &etcdv1beta1.BackupSpec{Destination: *dest}
	c, members, names, _ := runningCluster(t, cx, "127.0.0.74", "127.0.0.75", "127.0.0.76")
	succeededBackup(t, c, "cx-b", dest, "ns-cancel/cx/b.db", strings.Repeat("01", 32), 3)
	// the survivor's pod cannot go until the test lets it
	const hold = "test.etcdkit.dev/hold"
	testutil.Eventually(t, waitTimeout, "hold the survivor's pod", func(context.Context) error {
		p, err := getPod(c, names[0])
		if err != nil {
			return err
		}
		p.Finalizers = append(p.Finalizers, hold)
		return k8s.Update(ctx, p)
	})
	release := func() {
		testutil.Eventually(t, waitTimeout, "release the survivor's pod", func(context.Context) error {
			p, err := getPod(c, names[0])
			if apierrors.IsNotFound(err) {
				return nil
			} else if err != nil {
				return err
			}
			p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == hold })
			return k8s.Update(ctx, p)
		})
	}
	t.Cleanup(release)
	stopThenDeleteData(t, c, members, names, 1, 2)
	// the survivor lags the backup (revision 3): the backup is the one restored
	markSucceeded(t, c, waitSurvivorCopy(t, c, names[0]), "ns-cancel/cx/survivor.db", strings.Repeat("02", 32), 1)
	testutil.Eventually(t, waitTimeout, "restore decided, deleting", func(context.Context) error {
		c = getCluster(t, c)
		if rec := c.Status.Recovery; rec == nil || rec.Phase != etcdv1beta1.RecoveryDeleting || rec.Backup != "cx-b" {
			return fmt.Errorf("status.recovery %+v", rec)
		}
		p, err := getPod(c, names[0])
		if err != nil {
			return fmt.Errorf("survivor's pod not being deleted yet (%w)", err)
		}
		if p.DeletionTimestamp == nil {
			return errors.New("survivor's pod not being deleted yet")
		}
		return nil
	})
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Recovery.RestoreOnQuorumLoss = false })
	testutil.Eventually(t, waitTimeout, "restore cancelled", func(context.Context) error {
		c = getCluster(t, c)
		if c.Status.Recovery != nil {
			return fmt.Errorf("status.recovery %+v", c.Status.Recovery)
		}
		return findEvent(ctx, c, "", etcdv1beta1.ReasonRestoreCancelled, "spec.recovery.restoreOnQuorumLoss was turned off")
	})
	release()
	// with the survivor's pod and claim gone, the loss is reported, and nothing is restored
	testutil.Eventually(t, waitTimeout, "loss reported, nothing restored", func(context.Context) error {
		c = getCluster(t, c)
		p := condition(c, etcdv1beta1.ConditionProgressing)
		if p == nil || p.Reason != etcdv1beta1.ReasonQuorumDataLost || !strings.Contains(p.Message, "nothing is changed") {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	for _, n := range names {
		if p, err := getPod(c, n); err == nil && len(p.Spec.InitContainers) > 0 {
			t.Errorf("pod %s restores the backup after the restore was cancelled", n)
		}
	}
}

// runningCluster creates c, and its namespace, runs one embedded etcd member per host as its members
// <name>-0.. (marking their pods Running at those addresses, as kubelet would), and waits until the
// cluster is Running. It returns the cluster as last read, the members, their names and hosts.
func runningCluster(t *testing.T, c *etcdv1beta1.EtcdCluster, hosts ...string) (*etcdv1beta1.EtcdCluster, []*testenv.EtcdMember, []string, []string) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace}}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	retireAtEnd(t, c)
	names := make([]string, len(hosts))
	ips := map[string]string{}
	for i, h := range hosts {
		names[i] = fmt.Sprintf("%s-%d", c.Name, i)
		ips[names[i]] = h
	}
	members := testenv.StartEtcd(t, names, hosts)
	runPods(t, c, ips)
	testutil.Eventually(t, waitTimeout, "Running", func(context.Context) error {
		if c = getCluster(t, c); c.Status.Phase != etcdv1beta1.PhaseRunning {
			return fmt.Errorf("phase %s", c.Status.Phase)
		}
		return nil
	})
	return c, members, names, hosts
}

// succeededBackup creates EtcdBackup name of cluster c (to dest; nil: the cluster's destination) and
// sets its status as its Job would on success (the Job cannot run here): key, sha256, revision, etcd
// 3.6.16, completed now, stored at key in its destination.
func succeededBackup(t *testing.T, c *etcdv1beta1.EtcdCluster, name string, dest *etcdv1beta1.BackupDestination, key, sha string, revision int64) *etcdv1beta1.EtcdBackup {
	t.Helper()
	ctx := context.Background()
	b := &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace},
		Spec: etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: c.Name}, Destination: dest}}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	return markSucceeded(t, c, b, key, sha, revision)
}

// waitSurvivorCopy waits for the one EtcdBackup that copies member, the survivor of a quorum loss of
// cluster c, and checks that nothing was deleted while the copy runs.
func waitSurvivorCopy(t *testing.T, c *etcdv1beta1.EtcdCluster, member string) *etcdv1beta1.EtcdBackup {
	t.Helper()
	survivor := &etcdv1beta1.EtcdBackup{}
	testutil.Eventually(t, waitTimeout, "the survivor is copied first", func(ctx context.Context) error {
		list := &etcdv1beta1.EtcdBackupList{}
		if err := k8s.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1beta1.LabelSurvivorSnapshot: "true"}); err != nil {
			return err
		}
		if len(list.Items) != 1 || list.Items[0].Spec.Member != member || !strings.HasPrefix(list.Items[0].Name, member+"-survivor-") {
			return fmt.Errorf("survivor copies %+v", list.Items)
		}
		*survivor = list.Items[0]
		c = getCluster(t, c)
		if p := condition(c, etcdv1beta1.ConditionProgressing); p == nil || !strings.Contains(p.Message, "copying the members that kept their data before anything is deleted: "+member) {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	if p, err := getPod(c, member); err != nil || p.DeletionTimestamp != nil || c.Status.Recovery != nil {
		t.Fatalf("the survivor's pod was touched (%v) or a restore started (%+v) before it was copied", err, c.Status.Recovery)
	}
	return survivor
}

// markSucceeded sets backup b's status as its Job would on success, once the backup controller has
// looked at it (see succeededBackup).
func markSucceeded(t *testing.T, c *etcdv1beta1.EtcdCluster, b *etcdv1beta1.EtcdBackup, key, sha string, revision int64) *etcdv1beta1.EtcdBackup {
	t.Helper()
	ctx := context.Background()
	stored := b.Spec.Destination
	if stored == nil {
		stored = &c.Spec.Backup.Destination
	}
	testutil.Eventually(t, waitTimeout, "backup "+b.Name+" marked Succeeded", func(context.Context) error {
		if err := k8s.Get(ctx, clientKey(b), b); err != nil {
			return err
		}
		if b.Status.Phase == "" {
			return fmt.Errorf("the backup controller has not looked at %s yet", b.Name) // its first write would overwrite ours
		}
		now := metav1.Now()
		b.Status = etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupSucceeded, Key: key, SHA256: sha, Revision: revision,
			EtcdVersion: "3.6.16", CompletionTime: &now, ObservedGeneration: b.Generation, Location: resources.DestinationLocation(stored, key)}
		return k8s.Status().Update(ctx, b)
	})
	return b
}
