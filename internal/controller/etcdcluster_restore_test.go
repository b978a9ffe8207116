package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// assertRestoreThenGate checks that an initial member's pod restores its snapshot first, then waits in
// await-peers: the gate is released as soon as every pod has its address, and a member that restores
// for long reads the annotation when its turn comes.
func assertRestoreThenGate(t *testing.T, p *corev1.Pod) {
	t.Helper()
	var names []string
	for _, c := range p.Spec.InitContainers {
		names = append(names, c.Name)
	}
	if want := []string{resources.RestoreContainerName, resources.AwaitPeersContainerName}; !slices.Equal(names, want) {
		t.Fatalf("pod %s runs init containers %v, want %v", p.Name, names, want)
	}
}

// TestRestoreBootstrap: a cluster created from an EtcdBackup waits while the backup is not done (no
// member created), then bootstraps every member with an init container that restores that backup's
// snapshot (key, sha256, its own name, the new initial cluster and the new cluster's UID as token).
func TestRestoreBootstrap(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-restore"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	dest := &etcdv1beta1.BackupDestination{S3: &etcdv1beta1.S3Destination{Endpoint: "http://s3.example:9000", Bucket: "etcd",
		ForcePathStyle: true, CredentialsSecretRef: etcdv1beta1.LocalObjectReference{Name: "s3-creds"}}}
	b := &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns.Name},
		Spec: etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: "src"}, Destination: dest}}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	c := testutil.EtcdCluster("copy", testutil.InNamespace(ns.Name), testutil.WithReplicas(3), testutil.WithRestoreFrom("nightly"))
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	retireAtEnd(t, c)
	testutil.Eventually(t, waitTimeout, "waiting for the backup", func(context.Context) error {
		c = getCluster(t, c)
		p := condition(c, etcdv1beta1.ConditionProgressing)
		if p == nil || p.Reason != etcdv1beta1.ReasonWaiting || !strings.Contains(p.Message, "Waiting for EtcdBackup nightly to succeed") {
			return fmt.Errorf("Progressing %+v", p)
		}
		return nil
	})
	if _, err := getPod(c, "copy-0"); err == nil {
		t.Fatalf("a member was created before its backup succeeded")
	}

	sha := strings.Repeat("ab", 32)
	testutil.Eventually(t, waitTimeout, "backup marked Succeeded", func(context.Context) error {
		if err := k8s.Get(ctx, clientKey(b), b); err != nil {
			return err
		}
		if b.Status.Phase == "" {
			return fmt.Errorf("the backup controller has not looked at %s yet", b.Name) // its first write would overwrite ours
		}
		b.Status = etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupSucceeded, Key: "ns-restore/src/nightly.db", SHA256: sha,
			EtcdVersion: "3.6.16", ObservedGeneration: b.Generation}
		return k8s.Status().Update(ctx, b)
	})
	c = getCluster(t, c)
	initial := "--initial-cluster=" + testOptions().InitialCluster(c, []string{"copy-0", "copy-1", "copy-2"})
	for i := range 3 {
		name := fmt.Sprintf("copy-%d", i)
		var p *corev1.Pod
		testutil.Eventually(t, waitTimeout, "pod "+name, func(context.Context) (err error) { p, err = getPod(c, name); return err })
		assertRestoreThenGate(t, p)
		ic := p.Spec.InitContainers[0]
		for _, want := range []string{"restore", "--key=ns-restore/src/nightly.db", "--sha256=" + sha, "--name=" + name, initial,
			"--initial-cluster-token=" + string(c.UID), "--data-dir=/var/lib/etcd/data", "--s3-bucket=etcd", "--s3-force-path-style",
			"--initial-advertise-peer-urls=" + testOptions().PeerURL(c, name)} {
			if !slices.Contains(ic.Args, want) {
				t.Errorf("pod %s restore args lack %q: %q", name, want, ic.Args)
			}
		}
		if ic.Image != testOperatorImage {
			t.Errorf("restore image %q, want the operator's", ic.Image)
		}
		if !slices.Contains(p.Spec.Containers[0].Command, "--initial-cluster-state=new") {
			t.Errorf("pod %s does not bootstrap a new cluster", name)
		}
	}
}

// TestRestoreRefused: a failed backup, or a snapshot from a newer minor than the cluster runs, is
// refused with a message and no member is created.
func TestRestoreRefused(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-restore-bad"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	dest := &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups"}}
	for _, tc := range []struct {
		name, version string
		status        etcdv1beta1.EtcdBackupStatus
		mention       string
	}{
		{"failed", "3.6.16", etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupFailed, Message: "access denied"}, "EtcdBackup failed failed (access denied)"},
		{"newer", "3.5.35", etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupSucceeded, Key: "k", SHA256: strings.Repeat("0", 64), EtcdVersion: "3.6.16"}, "taken from etcd 3.6.16 and cannot be restored by 3.5.35"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: ns.Name},
				Spec: etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: "src"}, Destination: dest}}
			if err := k8s.Create(ctx, b); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, waitTimeout, "backup status set", func(context.Context) error {
				if err := k8s.Get(ctx, clientKey(b), b); err != nil {
					return err
				}
				if b.Status.Phase == "" {
					return fmt.Errorf("the backup controller has not looked at %s yet", b.Name) // its first write would overwrite ours
				}
				b.Status = tc.status
				b.Status.ObservedGeneration = b.Generation
				return k8s.Status().Update(ctx, b) // retried on a conflict with the backup controller
			})
			c := testutil.EtcdCluster("from-"+tc.name, testutil.InNamespace(ns.Name), testutil.WithReplicas(1),
				testutil.WithVersion(tc.version), testutil.WithRestoreFrom(tc.name))
			if err := k8s.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			retireAtEnd(t, c)
			testutil.Eventually(t, waitTimeout, "refused", func(context.Context) error {
				c = getCluster(t, c)
				p := condition(c, etcdv1beta1.ConditionProgressing)
				if p == nil || p.Reason != etcdv1beta1.ReasonInvalidSpec || !strings.Contains(p.Message, tc.mention) {
					return fmt.Errorf("Progressing %+v", p)
				}
				return nil
			})
			if _, err := getPod(c, c.Name+"-0"); err == nil {
				t.Errorf("a member was created from a backup that cannot be restored")
			}
		})
	}
}

func clientKey(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }

// testOptions are the builder options the test manager runs with.
func testOptions() resources.Options { return resources.Options{OperatorImage: testOperatorImage} }
