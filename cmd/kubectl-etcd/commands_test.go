package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// The API server of the integration tests, started by the first test that needs it.
var (
	apiOnce    sync.Once
	apiEnv     *envtest.Environment
	apiErr     error
	k8s        client.Client
	kubeconfig string
)

func TestMain(m *testing.M) {
	// Commands that follow an object read it this often in the tests.
	pollInterval = 50 * time.Millisecond
	code := m.Run()
	if apiEnv != nil {
		_ = apiEnv.Stop()
	}
	os.Exit(code)
}

// apiServer starts kube-apiserver and etcd once, with the CRDs, a client and a kubeconfig file of an
// administrator for the plugin's --kubeconfig.
func apiServer(t *testing.T) {
	t.Helper()
	apiOnce.Do(func() {
		apiEnv, _, apiErr = testenv.Start()
		if apiErr != nil {
			return
		}
		user, err := apiEnv.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
		if err != nil {
			apiErr = err
			return
		}
		k8s, apiErr = client.New(user.Config(), client.Options{Scheme: testenv.Scheme})
		if apiErr != nil {
			return
		}
		raw, err := user.KubeConfig()
		if err != nil {
			apiErr = err
			return
		}
		dir, err := os.MkdirTemp("", "kubectl-etcd-test")
		if err != nil {
			apiErr = err
			return
		}
		kubeconfig = filepath.Join(dir, "kubeconfig")
		apiErr = os.WriteFile(kubeconfig, raw, 0o600)
	})
	if apiErr != nil {
		t.Fatal(apiErr)
	}
}

// result is what a run of the plugin printed and returned.
type result struct {
	out, errOut *testutil.SyncBuffer
	err         error
}

// start runs `kubectl etcd --kubeconfig <the test API server> args...` in a goroutine; the channel
// receives its result when it returns.
func start(args ...string) (*testutil.SyncBuffer, <-chan result) {
	return startWithInput("", args...)
}

// run runs the plugin to its end.
func run(args ...string) result {
	_, done := start(args...)
	return <-done
}

// newNamespace creates a namespace of its own for a test.
func newNamespace(t *testing.T, name string) string {
	t.Helper()
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// createCluster creates c and then writes st as its status.
func createCluster(t *testing.T, c *etcdv1beta1.EtcdCluster, st etcdv1beta1.EtcdClusterStatus) *etcdv1beta1.EtcdCluster {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatalf("create EtcdCluster %s: %v", c.Name, err)
	}
	st.ObservedGeneration = c.Generation
	c.Status = st
	if err := k8s.Status().Update(ctx, c); err != nil {
		t.Fatalf("write the status of EtcdCluster %s: %v", c.Name, err)
	}
	return c
}

// TestStatus: the status of a cluster shows what its status says, the down member with its
// problem; -o json prints that status; without a name the clusters are listed; an unknown name
// says how to find the right one.
func TestStatus(t *testing.T) {
	apiServer(t)
	ns := newNamespace(t, "status")
	st := degradedCluster().Status
	// Ages that read the same for minutes: 5h, 15m.
	st.LastBackup.CompletionTime = &metav1.Time{Time: time.Now().Add(-5 * time.Hour)}
	st.Members[2].DownSince = &metav1.Time{Time: time.Now().Add(-15 * time.Minute)}
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = metav1.Now()
	}
	createCluster(t, testutil.EtcdCluster("demo", testutil.InNamespace(ns), testutil.WithReplicas(3)), st)
	createCluster(t, testutil.EtcdCluster("other", testutil.InNamespace(ns), testutil.WithReplicas(1)), etcdv1beta1.EtcdClusterStatus{Phase: etcdv1beta1.PhaseCreating})

	r := run("-n", ns, "status", "demo")
	if r.err != nil {
		t.Fatalf("status demo: %v\n%s", r.err, r.errOut)
	}
	out := r.out.String()
	for _, want := range []string{
		"Phase:                     Degraded", "Cluster ID:                8e9e05c52164694d", "Leader:                    demo-1",
		"Ready:                     2/3", "Paused:                    no", "Last backup:               demo-nightly, 5h ago",
		"MembersUnhealthy: member demo-2 is down: CrashLoopBackOff", "Pending defragmentation:   demo-0, demo-1",
		"NAME     ID                 ROLE    LEADER   HEALTHY   VERSION   DB SIZE   DOWN SINCE   PROBLEM",
		"demo-1   91bc3c398fb3c146   Voter   *        yes       3.6.16    1.5 MiB   -",
		"demo-2   fd422379fda50e48   Voter   -        no        -         -         15m ago      CrashLoopBackOff: back-off 40s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status demo lacks %q:\n%s", want, out)
		}
	}

	r = run("-n", ns, "status", "demo", "-o", "json")
	got := etcdv1beta1.EtcdClusterStatus{}
	if r.err != nil || json.Unmarshal(r.out.Bytes(), &got) != nil {
		t.Fatalf("status -o json: %v\n%s", r.err, r.out)
	}
	if got.ClusterID != st.ClusterID || len(got.Members) != 3 || got.Members[2].Problem != st.Members[2].Problem {
		t.Errorf("status -o json: %+v", got)
	}

	r = run("-n", ns, "status")
	want := "NAME    PHASE      READY   VERSION   LEADER   LAST BACKUP\n" +
		"demo    Degraded   2/3     3.6.16    demo-1   5h ago\n" +
		"other   Creating   0/1     -         -        -\n"
	if diff := cmp.Diff(want, r.out.String()); r.err != nil || diff != "" {
		t.Errorf("status without a name: %v (-want +got):\n%s", r.err, diff)
	}

	r = run("-n", ns, "status", "nosuch")
	if r.err == nil || !strings.Contains(r.err.Error(), `no EtcdCluster "nosuch" in namespace status`) {
		t.Errorf("status of a missing cluster: %v", r.err)
	}
}

// TestPauseResume: pause sets spec.paused and, with no operator to observe it, says so after its
// --timeout; resume clears it and prints the status once it is observed.
func TestPauseResume(t *testing.T) {
	apiServer(t)
	ns := newNamespace(t, "pause")
	c := createCluster(t, testutil.EtcdCluster("demo", testutil.InNamespace(ns)), etcdv1beta1.EtcdClusterStatus{Phase: etcdv1beta1.PhaseRunning})
	ctx := context.Background()

	began := time.Now()
	r := run("-n", ns, "pause", "demo", "--timeout", "1s")
	if r.err == nil || !strings.Contains(r.err.Error(), "the operator has not observed it within 1s") {
		t.Errorf("pause without an operator: %v\n%s", r.err, r.out)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("pause --timeout 1s returned after %s", took)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil || !c.Spec.Paused {
		t.Fatalf("spec.paused after pause: %v %v", c.Spec.Paused, err)
	}

	out, done := start("-n", ns, "resume", "demo", "--timeout", "30s")
	// What the operator does: observe the new generation, write the status.
	testutil.Eventually(t, 10*time.Second, "spec.paused false", func(ctx context.Context) error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err
		}
		if c.Spec.Paused {
			return fmt.Errorf("spec.paused is still true (generation %d)", c.Generation)
		}
		return nil
	})
	testutil.Eventually(t, 10*time.Second, "resume says it waits", func(context.Context) error {
		if !strings.Contains(out.String(), "waiting for the operator to observe it") {
			return fmt.Errorf("output so far: %q", out)
		}
		return nil
	})
	c.Status.ObservedGeneration = c.Generation
	c.Status.Conditions = []metav1.Condition{{Type: etcdv1beta1.ConditionProgressing, Status: metav1.ConditionFalse,
		Reason: etcdv1beta1.ReasonReconciled, Message: "all members are current", LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	r = <-done
	if r.err != nil || !strings.Contains(r.out.String(), "Observed: phase Running, Progressing=False Reconciled: all members are current") {
		t.Errorf("resume: %v\n%s", r.err, r.out)
	}
}

// TestBackup: backup creates an EtcdBackup of the cluster with the destination of the flags, follows
// its phases and fails with the operator's message when it fails; without flags the destination is
// left to the cluster's spec.backup, and a cluster without one is refused before anything is created.
func TestBackup(t *testing.T) {
	apiServer(t)
	ns := newNamespace(t, "backup")
	ctx := context.Background()
	createCluster(t, testutil.EtcdCluster("demo", testutil.InNamespace(ns)), etcdv1beta1.EtcdClusterStatus{Phase: etcdv1beta1.PhaseRunning})

	r := run("-n", ns, "backup", "demo")
	if r.err == nil || !strings.Contains(r.err.Error(), "has no spec.backup.destination: name one with --pvc") {
		t.Errorf("backup without a destination: %v", r.err)
	}

	out, done := start("-n", ns, "backup", "demo", "--name", "now", "--pvc", "backups", "--pvc-sub-path", "etcd", "--member", "demo-1", "--timeout", "30s")
	b := &etcdv1beta1.EtcdBackup{}
	key := client.ObjectKey{Namespace: ns, Name: "now"}
	testutil.Eventually(t, 10*time.Second, "EtcdBackup now created", func(ctx context.Context) error {
		return k8s.Get(ctx, key, b)
	})
	wantSpec := etcdv1beta1.EtcdBackupSpec{
		ClusterRef:  etcdv1beta1.LocalObjectReference{Name: "demo"},
		Destination: &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups", SubPath: "etcd"}},
		Member:      "demo-1",
	}
	if diff := cmp.Diff(wantSpec, b.Spec); diff != "" {
		t.Errorf("EtcdBackup spec (-want +got):\n%s", diff)
	}
	testutil.Eventually(t, 10*time.Second, "backup follows the new EtcdBackup", func(context.Context) error {
		if !strings.Contains(out.String(), "waiting for the operator to pick it up") {
			return fmt.Errorf("output so far: %q", out)
		}
		return nil
	})
	setBackupStatus := func(st etcdv1beta1.EtcdBackupStatus, shows string) {
		t.Helper()
		b.Status = st
		if err := k8s.Status().Update(ctx, b); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 10*time.Second, "backup shows "+shows, func(context.Context) error {
			if !strings.Contains(out.String(), shows) {
				return fmt.Errorf("output so far: %q", out)
			}
			return nil
		})
	}
	setBackupStatus(etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupRunning}, "Running\n")
	failure := "the claim backups does not exist in namespace backup: create it, or name another with spec.destination.pvc.claimName"
	setBackupStatus(etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupFailed, Message: failure}, "Failed: "+failure)
	r = <-done
	if r.err == nil || !strings.Contains(r.err.Error(), "EtcdBackup backup/now failed: "+failure) || !strings.Contains(r.err.Error(), "run `kubectl etcd backup demo` again") {
		t.Errorf("backup that failed: %v", r.err)
	}
	if lines := strings.Count(r.out.String(), "\n"); lines != 4 {
		t.Errorf("want 4 progress lines (created, no phase yet, Running, Failed), got %d:\n%s", lines, r.out)
	}

	_, done = start("-n", ns, "backup", "demo", "--name", "gone", "--pvc", "backups", "--timeout", "30s")
	gone := &etcdv1beta1.EtcdBackup{}
	testutil.Eventually(t, 10*time.Second, "EtcdBackup gone created", func(ctx context.Context) error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gone"}, gone)
	})
	if err := k8s.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if r = <-done; r.err == nil || !strings.Contains(r.err.Error(), "EtcdBackup backup/gone was deleted before it finished") {
		t.Errorf("backup deleted while followed: %v", r.err)
	}
}

// TestBackupDefaultDestination: with spec.backup on the cluster, backup leaves the destination to
// it; --wait=false returns once the EtcdBackup exists.
func TestBackupDefaultDestination(t *testing.T) {
	apiServer(t)
	ns := newNamespace(t, "backup-default")
	c := testutil.EtcdCluster("demo", testutil.InNamespace(ns))
	c.Spec.Backup = &etcdv1beta1.BackupSpec{Destination: etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups"}}}
	createCluster(t, c, etcdv1beta1.EtcdClusterStatus{Phase: etcdv1beta1.PhaseRunning})

	r := run("-n", ns, "backup", "demo", "--wait=false")
	if r.err != nil || !strings.Contains(r.out.String(), "to the cluster's spec.backup.destination") {
		t.Fatalf("backup --wait=false: %v\n%s", r.err, r.out)
	}
	list := &etcdv1beta1.EtcdBackupList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
		t.Fatalf("EtcdBackups: %v %v", list.Items, err)
	}
	b := list.Items[0]
	if !strings.HasPrefix(b.Name, "demo-") || b.Spec.ClusterRef.Name != "demo" || b.Spec.Destination != nil || b.Status.Phase != "" {
		t.Errorf("EtcdBackup %s: spec %+v, status %+v", b.Name, b.Spec, b.Status)
	}
}

// TestRestore: restore prints a manifest that the API server accepts, with the backed-up cluster's
// version, storage and TLS settings and the replicas asked for; without the backed-up cluster the
// version is the snapshot's; a failed backup is refused.
func TestRestore(t *testing.T) {
	apiServer(t)
	ns := newNamespace(t, "restore")
	ctx := context.Background()
	source := testutil.EtcdCluster("demo", testutil.InNamespace(ns), testutil.WithReplicas(3), testutil.WithVersion("3.5.26"),
		testutil.WithStorageSize("5Gi"), testutil.WithStorageClass("fast"), testutil.WithTLS(true, false), testutil.WithQuota("4Gi"))
	createCluster(t, source, etcdv1beta1.EtcdClusterStatus{Phase: etcdv1beta1.PhaseRunning})
	done := createBackup(t, ns, "nightly", "demo", etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupSucceeded, EtcdVersion: "3.5.26", Revision: 42,
		CompletionTime: &metav1.Time{Time: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)}})

	r := run("-n", ns, "restore", done, "--into", "demo-copy", "--replicas", "5")
	if r.err != nil {
		t.Fatalf("restore: %v\n%s", r.err, r.errOut)
	}
	if !strings.HasPrefix(r.out.String(), "# A new cluster from EtcdBackup nightly: a snapshot of EtcdCluster demo at revision 42, taken 2026-12-01 03:00:00 UTC.\n") {
		t.Errorf("manifest's comment:\n%s", r.out)
	}
	restored := dryRunCreate(t, r.out.Bytes())
	want := source.Spec.DeepCopy()
	want.Replicas = ptr.To[int32](5)
	want.Bootstrap = &etcdv1beta1.BootstrapSpec{Restore: &etcdv1beta1.RestoreSpec{BackupRef: &etcdv1beta1.LocalObjectReference{Name: "nightly"}}}
	if diff := cmp.Diff(want, &restored.Spec); diff != "" || restored.Name != "demo-copy" || restored.Namespace != ns {
		t.Errorf("restored cluster %s/%s, spec (-want +got):\n%s", restored.Namespace, restored.Name, diff)
	}

	if err := k8s.Delete(ctx, source); err != nil {
		t.Fatal(err)
	}
	r = run("-n", ns, "restore", "nightly", "--into", "demo-copy", "-o", "json")
	if r.err != nil || !strings.Contains(r.errOut.String(), "no longer exists") {
		t.Fatalf("restore of a deleted cluster: %v\n%s", r.err, r.errOut)
	}
	restored = dryRunCreate(t, r.out.Bytes())
	if restored.Spec.Version != "3.5.26" || restored.Spec.TLS != nil || ptr.Deref(restored.Spec.Replicas, 0) != 3 {
		t.Errorf("restored cluster without its source: %+v", restored.Spec)
	}

	failed := createBackup(t, ns, "broken", "demo", etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupFailed, Message: "no member answers"})
	r = run("-n", ns, "restore", failed, "--into", "x")
	if r.err == nil || !strings.Contains(r.err.Error(), "failed and holds no snapshot") || r.out.String() != "" {
		t.Errorf("restore of a failed backup: %v\n%s", r.err, r.out)
	}
}

// createBackup creates EtcdBackup name of cluster with status st, and returns its name.
func createBackup(t *testing.T, ns, name, cluster string, st etcdv1beta1.EtcdBackupStatus) string {
	t.Helper()
	b := &etcdv1beta1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: cluster}},
	}
	if err := k8s.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	b.Status = st
	if err := k8s.Status().Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return name
}

// dryRunCreate decodes a manifest (YAML or JSON) and creates it with a server-side dry run: the API
// server validates and defaults it as it would a real create. It returns what the server returned.
func dryRunCreate(t *testing.T, manifest []byte) *etcdv1beta1.EtcdCluster {
	t.Helper()
	c := &etcdv1beta1.EtcdCluster{}
	if err := yaml.UnmarshalStrict(manifest, c); err != nil {
		t.Fatalf("decode the manifest: %v\n%s", err, manifest)
	}
	if err := k8s.Create(context.Background(), c, client.DryRunAll); err != nil {
		t.Fatalf("the API server refuses the manifest: %v\n%s", err, manifest)
	}
	return c
}

// TestUsageErrors: flags that cannot go together are refused before anything is read.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "-o", "wide"}, `unknown output format "wide"`},
		{[]string{"backup", "demo", "--pvc", "a", "--s3-bucket", "b"}, "--pvc and the --s3-* flags name two destinations"},
		{[]string{"backup", "demo", "--s3-endpoint", "https://s3"}, "an S3 destination needs --s3-endpoint, --s3-bucket and --s3-credentials-secret"},
		{[]string{"backup", "demo", "--pvc-sub-path", "x"}, "--pvc-sub-path needs --pvc"},
		{[]string{"restore", "b"}, `required flag(s) "into" not set`},
		{[]string{"restore", "b", "--into", "c", "--replicas", "4"}, "--replicas 4: a cluster has an odd number of members"},
		{[]string{"defrag"}, "accepts 1 arg(s), received 0"},
		{[]string{"defrag", "demo", "-o", "wide"}, `unknown output format "wide"`},
		{[]string{"move-leader", "demo"}, "accepts 2 arg(s), received 1"},
		{[]string{"replace-member", "demo", "demo-1", "-o", "table"}, `unknown output format "table"`},
		{[]string{"replace-member", "demo", "demo-1"}, "replace-member deletes the member's data: pass --yes to confirm"},
	} {
		var out bytes.Buffer
		cmd := newRootCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
		// No API server is reached: the kubeconfig names none.
		cmd.SetArgs(append([]string{"--kubeconfig", filepath.Join(t.TempDir(), "none")}, tc.args...))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
