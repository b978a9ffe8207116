package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// testOperatorImage is the image the reconcilers under test put into backup Jobs and restore init
// containers (nothing runs it: runJob plays kubelet).
const testOperatorImage = "docker.io/local/etcd-operator:test"

var (
	operatorBinOnce sync.Once
	operatorBin     string
	operatorBinErr  error
)

// etcdOperatorBinary builds cmd/etcd-operator once per test run: the command backup Jobs run.
func etcdOperatorBinary(t *testing.T) string {
	t.Helper()
	operatorBinOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		dir, err := os.MkdirTemp("", "etcd-operator-bin-")
		if err != nil {
			operatorBinErr = err
			return
		}
		operatorBin = filepath.Join(dir, "etcd-operator")
		cmd := exec.Command("go", "build", "-o", operatorBin, "./cmd/etcd-operator")
		cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			operatorBinErr = fmt.Errorf("go build ./cmd/etcd-operator: %w\n%s", err, out)
		}
	})
	if operatorBinErr != nil {
		t.Fatal(operatorBinErr)
	}
	return operatorBin
}

// jobWorld is what runJob maps a Job's pod onto on this machine: member names to the loopback hosts
// of their embedded etcd, claim names to directories.
type jobWorld struct {
	hosts  map[string]string
	claims map[string]string
}

// runJob plays kubelet and the Job controller for one of the operator's Jobs: it runs the Job's
// command line with the real etcd-operator binary — member URLs mapped to the embedded members, the
// mounted Secret's keys written as files, a claim mapped to a directory — then records the pod with
// the command's termination message and exit code and marks the Job Complete or Failed, as the
// podFailurePolicy decides for exit code 1. It returns the exit code and the termination message.
func runJob(t *testing.T, job *batchv1.Job, w jobWorld) (int, string) {
	t.Helper()
	ctx := context.Background()
	bin := etcdOperatorBinary(t)
	spec := job.Spec.Template.Spec
	ctr := spec.Containers[0]
	work := t.TempDir()
	resultFile := filepath.Join(work, "termination-log")
	mountDir := map[string]string{}
	for _, v := range spec.Volumes {
		dir := filepath.Join(work, v.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		switch {
		case v.Secret != nil:
			sec := &corev1.Secret{}
			err := k8s.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: v.Secret.SecretName}, sec)
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			for k, val := range sec.Data {
				if err := os.WriteFile(filepath.Join(dir, k), val, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		case v.PersistentVolumeClaim != nil:
			dir = w.claims[v.PersistentVolumeClaim.ClaimName]
		}
		mountDir[v.Name] = dir
	}
	mounted := map[string]string{}
	for _, m := range ctr.VolumeMounts {
		dir := filepath.Join(mountDir[m.Name], m.SubPath)
		if err := os.MkdirAll(dir, 0o700); err != nil { // kubelet creates a missing subPath
			t.Fatal(err)
		}
		mounted[m.MountPath] = dir
	}
	var args []string
	for _, a := range ctr.Args {
		if v, ok := strings.CutPrefix(a, "--endpoints="); ok {
			var eps []string
			for _, ep := range strings.Split(v, ",") {
				u, err := url.Parse(ep)
				if err != nil {
					t.Fatal(err)
				}
				member, _, _ := strings.Cut(u.Hostname(), ".")
				eps = append(eps, "http://"+w.hosts[member]+":2379")
			}
			a = "--endpoints=" + strings.Join(eps, ",")
		}
		if flag, path, ok := strings.Cut(a, "="); ok && mounted[path] != "" {
			a = flag + "=" + mounted[path]
		}
		args = append(args, a)
	}
	args = append(args, "--result-file="+resultFile)
	cmd := exec.Command(bin, args...)
	out, err := cmd.CombinedOutput()
	code := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("run %v: %v", args, err)
	}
	msg, _ := os.ReadFile(resultFile)
	t.Logf("Job %s: etcd-operator %s: exit %d\n%s", job.Name, strings.Join(args, " "), code, out)
	finishJob(t, job, code, string(msg))
	return code, string(msg)
}

// finishJob records a pod of job that ended with exit code code and termination message msg, and
// the Job's outcome, as kubelet and the Job controller would.
func finishJob(t *testing.T, job *batchv1.Job, code int, msg string) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{jobControllerUIDLabel: string(job.UID), "batch.kubernetes.io/job-name": job.Name}
	for k, v := range job.Spec.Template.Labels {
		labels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: job.Name + "-", Namespace: job.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatalf("create pod of job %s: %v", job.Name, err)
	}
	now := metav1.Now()
	pod.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: resources.BackupContainerName, Image: pod.Spec.Containers[0].Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: int32(code), Message: msg, StartedAt: job.CreationTimestamp, FinishedAt: now,
		}},
	}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatalf("pod status: %v", err)
	}
	testutil.Eventually(t, waitTimeout, "job "+job.Name+" finished", func(context.Context) error {
		j := &batchv1.Job{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(job), j); err != nil {
			return err
		}
		start := j.CreationTimestamp
		j.Status.StartTime = &start
		if code == 0 {
			j.Status.Succeeded = 1
			j.Status.CompletionTime = &now
			j.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now, LastProbeTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now, LastProbeTime: now},
			}
		} else {
			j.Status.Failed = 1
			j.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "PodFailurePolicy", Message: "Container backup for pod exited with code 1 matching FailJob rule at index 0", LastTransitionTime: now, LastProbeTime: now},
				{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "PodFailurePolicy", Message: "Container backup for pod exited with code 1 matching FailJob rule at index 0", LastTransitionTime: now, LastProbeTime: now},
			}
		}
		return k8s.Status().Update(ctx, j)
	})
}

// waitJob waits for the Job of the given name and returns it.
func waitJob(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{}
	testutil.Eventually(t, waitTimeout, "job "+name, func(context.Context) error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, j)
	})
	return j
}

func getBackup(t *testing.T, ns, name string) *etcdv1beta1.EtcdBackup {
	t.Helper()
	b := &etcdv1beta1.EtcdBackup{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
		t.Fatalf("get backup %s: %v", name, err)
	}
	return b
}

func waitBackupPhase(t *testing.T, ns, name string, phase etcdv1beta1.BackupPhase) *etcdv1beta1.EtcdBackup {
	t.Helper()
	var b *etcdv1beta1.EtcdBackup
	testutil.Eventually(t, waitTimeout, "backup "+name+" "+string(phase), func(context.Context) error {
		b = getBackup(t, ns, name)
		if b.Status.Phase != phase {
			return fmt.Errorf("phase %q: %s", b.Status.Phase, b.Status.Message)
		}
		return nil
	})
	return b
}

func newBackup(t *testing.T, ns, name, cluster string, dest *etcdv1beta1.BackupDestination) *etcdv1beta1.EtcdBackup {
	t.Helper()
	b := &etcdv1beta1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: cluster}, Destination: dest},
	}
	if err := k8s.Create(context.Background(), b); err != nil {
		t.Fatalf("create backup %s: %v", name, err)
	}
	return b
}

// availableCluster creates a 1-member cluster whose member is an embedded etcd on host, and waits
// until it is Available.
func availableCluster(t *testing.T, name, host string) (*etcdv1beta1.EtcdCluster, jobWorld) {
	t.Helper()
	c := createCluster(t, name, 1)
	testenv.StartEtcd(t, []string{name + "-0"}, []string{host})
	runPods(t, c, map[string]string{name + "-0": host})
	testutil.Eventually(t, waitTimeout, "cluster "+name+" Available", func(context.Context) error {
		c = getCluster(t, c)
		if a := condition(c, etcdv1beta1.ConditionAvailable); a == nil || a.Status != metav1.ConditionTrue {
			return fmt.Errorf("available %+v", a)
		}
		return nil
	})
	return c, jobWorld{hosts: map[string]string{name + "-0": host}, claims: map[string]string{}}
}

// s3Destination creates the credentials Secret (with the given secret key) and returns a destination
// in the test's S3 server.
func s3Destination(t *testing.T, ns string, s3 *testenv.S3Server, secretKey string) *etcdv1beta1.BackupDestination {
	t.Helper()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s3-credentials", Namespace: ns},
		StringData: map[string]string{"accessKeyID": s3.AccessKeyID, "secretAccessKey": secretKey},
	}
	if err := k8s.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	return &etcdv1beta1.BackupDestination{S3: &etcdv1beta1.S3Destination{
		Endpoint: s3.Endpoint, Bucket: s3.Bucket, Region: s3.Region, ForcePathStyle: true, Prefix: "etcd",
		CredentialsSecretRef: etcdv1beta1.LocalObjectReference{Name: sec.Name},
	}}
}

func setBackupSpec(t *testing.T, c *etcdv1beta1.EtcdCluster, spec *etcdv1beta1.BackupSpec) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, "set spec.backup", func(context.Context) error {
		cur := getCluster(t, c)
		cur.Spec.Backup = spec
		return k8s.Update(context.Background(), cur)
	})
}

func s3Object(s3 *testenv.S3Server, key string) (minio.ObjectInfo, error) {
	return s3.Client.StatObject(context.Background(), s3.Bucket, key, minio.StatObjectOptions{})
}

// TestBackupToS3: an EtcdBackup without a destination uses its cluster's; a Job runs `etcd-operator
// backup` against the members; the status reports the verified snapshot that is in the bucket, and the
// cluster reports it as its last backup.
func TestBackupToS3(t *testing.T) {
	s3 := testenv.StartS3(t)
	c, w := availableCluster(t, "bks3", "127.0.0.161")
	ctx := context.Background()
	dest := s3Destination(t, c.Namespace, s3, s3.SecretAccessKey)
	setBackupSpec(t, c, &etcdv1beta1.BackupSpec{Destination: *dest})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.161:2379"}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	put, err := cli.Put(ctx, "greeting", "hello")
	if err != nil {
		t.Fatal(err)
	}
	newBackup(t, c.Namespace, "first", c.Name, nil)

	job := waitJob(t, c.Namespace, "first-backup")
	b := waitBackupPhase(t, c.Namespace, "first", etcdv1beta1.BackupRunning)
	if b.Status.StartTime == nil || !strings.Contains(b.Status.Message, "first-backup") {
		t.Errorf("running status %+v", b.Status)
	}
	if code, msg := runJob(t, job, w); code != 0 {
		t.Fatalf("backup exited %d: %s", code, msg)
	}
	b = waitBackupPhase(t, c.Namespace, "first", etcdv1beta1.BackupSucceeded)
	st := b.Status
	wantKey := c.Namespace + "/bks3/first.db"
	if st.Key != wantKey || st.Location != "s3://backups/etcd/"+wantKey || st.SizeBytes <= 0 || st.Revision < put.Header.Revision ||
		!regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(st.SHA256) || !strings.HasPrefix(st.EtcdVersion, "3.6.") ||
		st.CompletionTime == nil || st.StartTime == nil || st.Member == "" {
		t.Errorf("status %+v", st)
	}
	if cond := meta.FindStatusCondition(st.Conditions, etcdv1beta1.BackupConditionComplete); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("Complete condition %+v", cond)
	}
	obj, err := s3Object(s3, "etcd/"+wantKey)
	if err != nil || obj.Size != st.SizeBytes {
		t.Errorf("stored snapshot: %+v %v", obj, err)
	}
	if _, err := s3Object(s3, "etcd/"+wantKey+".json"); err != nil {
		t.Errorf("manifest: %v", err)
	}
	testutil.Eventually(t, waitTimeout, "cluster status.lastBackup", func(context.Context) error {
		cur := getCluster(t, c)
		if lb := cur.Status.LastBackup; lb == nil || lb.Name != "first" || lb.Revision != st.Revision || lb.SizeBytes != st.SizeBytes || lb.Location != st.Location {
			return fmt.Errorf("lastBackup %+v", cur.Status.LastBackup)
		}
		return nil
	})
	if v := promtestutil.ToFloat64(metrics.BackupLastSuccess.WithLabelValues(c.Namespace, c.Name)); v != float64(st.CompletionTime.Unix()) {
		t.Errorf("last success gauge %v, want %d", v, st.CompletionTime.Unix())
	}
	if v := promtestutil.ToFloat64(metrics.BackupSize.WithLabelValues(c.Namespace, c.Name)); v != float64(st.SizeBytes) {
		t.Errorf("size gauge %v", v)
	}
	if n := promtestutil.CollectAndCount(metrics.BackupDuration, "etcd_operator_backup_duration_seconds"); n < 1 {
		t.Errorf("duration histogram has %d series", n)
	}
	// A finished backup is left alone: no second Job.
	jobs := &batchv1.JobList{}
	if err := k8s.List(ctx, jobs, client.InNamespace(c.Namespace)); err != nil || len(jobs.Items) != 1 {
		t.Errorf("%d jobs (%v), want 1", len(jobs.Items), err)
	}
}

// TestBackupsOfOneClusterAreSerialised: two backups of one cluster run one after the other, in creation
// order; the second waits with a message naming the first. They go to a claim.
func TestBackupsOfOneClusterAreSerialised(t *testing.T) {
	c, w := availableCluster(t, "bkser", "127.0.0.162")
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: c.Namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := k8s.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	w.claims["backups"] = t.TempDir()
	dest := &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups", SubPath: "snapshots"}}
	newBackup(t, c.Namespace, "a", c.Name, dest)
	newBackup(t, c.Namespace, "b", c.Name, dest)

	jobA := waitJob(t, c.Namespace, "a-backup")
	b := waitBackupPhase(t, c.Namespace, "b", etcdv1beta1.BackupPending)
	if !strings.Contains(b.Status.Message, "backup a of the same cluster") {
		t.Errorf("b waits for: %q", b.Status.Message)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "b-backup"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("b has a Job while a runs: %v", err)
	}
	if code, msg := runJob(t, jobA, w); code != 0 {
		t.Fatalf("a exited %d: %s", code, msg)
	}
	a := waitBackupPhase(t, c.Namespace, "a", etcdv1beta1.BackupSucceeded)
	jobB := waitJob(t, c.Namespace, "b-backup")
	if jobB.CreationTimestamp.Before(a.Status.CompletionTime) {
		t.Errorf("b's Job was created at %v, before a completed at %v", jobB.CreationTimestamp, a.Status.CompletionTime)
	}
	if code, msg := runJob(t, jobB, w); code != 0 {
		t.Fatalf("b exited %d: %s", code, msg)
	}
	b = waitBackupPhase(t, c.Namespace, "b", etcdv1beta1.BackupSucceeded)
	key := c.Namespace + "/bkser/b.db"
	if b.Status.Location != "pvc://backups/snapshots/"+key {
		t.Errorf("location %q", b.Status.Location)
	}
	fi, err := os.Stat(filepath.Join(w.claims["backups"], "snapshots", key))
	if err != nil || fi.Size() != b.Status.SizeBytes {
		t.Errorf("snapshot on the claim: %v %v", fi, err)
	}
}

// TestBackupWrongCredentials: the storage refusing the credentials fails the backup with a message
// naming the credentials Secret and a Warning event; the backup is not retried.
func TestBackupWrongCredentials(t *testing.T) {
	s3 := testenv.StartS3(t)
	c, w := availableCluster(t, "bkcred", "127.0.0.163")
	ctx := context.Background()
	dest := s3Destination(t, c.Namespace, s3, "not-the-secret-key")
	newBackup(t, c.Namespace, "denied", c.Name, dest)
	job := waitJob(t, c.Namespace, "denied-backup")
	code, msg := runJob(t, job, w)
	if code != resources.ExitCodeBackupFailed {
		t.Fatalf("exit code %d, want %d: %s", code, resources.ExitCodeBackupFailed, msg)
	}
	b := waitBackupPhase(t, c.Namespace, "denied", etcdv1beta1.BackupFailed)
	if !strings.Contains(b.Status.Message, "check the credentials Secret") || b.Status.Message != strings.TrimSpace(msg) {
		t.Errorf("message %q, termination message %q", b.Status.Message, msg)
	}
	if cond := meta.FindStatusCondition(b.Status.Conditions, etcdv1beta1.BackupConditionFailed); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("Failed condition %+v", cond)
	}
	testutil.Eventually(t, waitTimeout, "Warning event", func(context.Context) error {
		evs := &eventsv1.EventList{}
		if err := k8s.List(ctx, evs, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "denied" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, "check the credentials Secret") {
				return nil
			}
		}
		return fmt.Errorf("no Warning event about the credentials among %d events", len(evs.Items))
	})
	if _, err := s3Object(s3, "etcd/"+c.Namespace+"/bkcred/denied.db"); err == nil {
		t.Error("a snapshot was stored with wrong credentials")
	}
	// Waking the backup again creates no new Job and keeps it Failed.
	testutil.Eventually(t, waitTimeout, "annotate", func(context.Context) error {
		cur := getBackup(t, c.Namespace, "denied")
		cur.Annotations = map[string]string{"poke": "1"}
		return k8s.Update(ctx, cur)
	})
	testutil.Consistently(t, 2*time.Second, "a failed backup was retried", func(context.Context) error {
		jobs := &batchv1.JobList{}
		if err := k8s.List(ctx, jobs, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		if phase := getBackup(t, c.Namespace, "denied").Status.Phase; len(jobs.Items) != 1 || phase != etcdv1beta1.BackupFailed {
			return fmt.Errorf("%d jobs, phase %s", len(jobs.Items), phase)
		}
		return nil
	})
	if v := promtestutil.ToFloat64(metrics.BackupFailures.WithLabelValues(c.Namespace, c.Name)); v != 1 {
		t.Errorf("failures counter %v, want 1", v)
	}
}

// TestScheduleCatchUpIsOneBackup: ten schedule times missed (as after an operator outage) make one
// backup, for the newest of them, named after it; later times are skipped while it has not finished.
func TestScheduleCatchUpIsOneBackup(t *testing.T) {
	c, _ := availableCluster(t, "bksched", "127.0.0.164")
	ctx := context.Background()
	tenAgo := metav1.NewTime(time.Now().Add(-10 * time.Minute).Truncate(time.Minute))
	testutil.Eventually(t, waitTimeout, "status.lastScheduleTime ten minutes ago", func(context.Context) error {
		cur := getCluster(t, c)
		cur.Status.LastScheduleTime = &tenAgo
		return k8s.Status().Update(ctx, cur)
	})
	before := time.Now().Truncate(time.Minute)
	setBackupSpec(t, c, &etcdv1beta1.BackupSpec{
		Schedule:    "* * * * *",
		Destination: etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "nowhere"}},
	})
	var list []etcdv1beta1.EtcdBackup
	testutil.Eventually(t, waitTimeout, "one scheduled backup", func(context.Context) error {
		l := &etcdv1beta1.EtcdBackupList{}
		if err := k8s.List(ctx, l, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		list = l.Items
		if len(list) == 0 {
			return errors.New("none yet")
		}
		return nil
	})
	if len(list) != 1 {
		t.Fatalf("%d backups for 10 missed times, want 1", len(list))
	}
	b := list[0]
	scheduled, err := time.Parse(time.RFC3339, b.Annotations[etcdv1beta1.AnnotationScheduledTime])
	if err != nil || scheduled.Before(before) {
		t.Errorf("scheduled for %v (%v), want the newest missed time, not before %v", scheduled, err, before)
	}
	if b.Name != resources.ScheduledBackupName(c.Name, scheduled) || b.Labels[etcdv1beta1.LabelScheduled] != "true" || !metav1.IsControlledBy(&b, getCluster(t, c)) {
		t.Errorf("backup %s labels %v owners %v", b.Name, b.Labels, b.OwnerReferences)
	}
	testutil.Eventually(t, waitTimeout, "status.lastScheduleTime advanced", func(context.Context) error {
		if lst := getCluster(t, c).Status.LastScheduleTime; lst == nil || lst.Time.Before(scheduled) {
			return fmt.Errorf("lastScheduleTime %v", lst)
		}
		return nil
	})
}

// TestRetentionDeletesOldestWithSnapshots: maxCount 2 over three successful scheduled backups deletes
// the oldest EtcdBackup and, through a delete Job, its snapshot and manifest; the others stay.
func TestRetentionDeletesOldestWithSnapshots(t *testing.T) {
	s3 := testenv.StartS3(t)
	c, w := availableCluster(t, "bkret", "127.0.0.165")
	ctx := context.Background()
	dest := s3Destination(t, c.Namespace, s3, s3.SecretAccessKey)
	setBackupSpec(t, c, &etcdv1beta1.BackupSpec{Destination: *dest})
	c = getCluster(t, c)
	names := []string{"bkret-1", "bkret-2", "bkret-3"}
	for _, n := range names { // as the schedule creates them
		b := &etcdv1beta1.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: c.Namespace,
				Labels:          map[string]string{etcdv1beta1.LabelCluster: c.Name, etcdv1beta1.LabelScheduled: "true"},
				OwnerReferences: []metav1.OwnerReference{resources.OwnerReference(c)}},
			Spec: etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: c.Name}, Destination: dest},
		}
		if err := k8s.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		if code, msg := runJob(t, waitJob(t, c.Namespace, n+"-backup"), w); code != 0 {
			t.Fatalf("%s exited %d: %s", n, code, msg)
		}
		waitBackupPhase(t, c.Namespace, n, etcdv1beta1.BackupSucceeded)
	}
	key := func(n string) string { return "etcd/" + c.Namespace + "/bkret/" + n + ".db" }
	setBackupSpec(t, c, &etcdv1beta1.BackupSpec{
		Schedule: "0 0 1 1 *", Retention: &etcdv1beta1.BackupRetention{MaxCount: ptr.To[int32](2)}, Destination: *dest,
	})
	del := waitJob(t, c.Namespace, "bkret-1-delete")
	if code, msg := runJob(t, del, w); code != 0 {
		t.Fatalf("delete exited %d: %s", code, msg)
	}
	testutil.Eventually(t, waitTimeout, "bkret-1 gone", func(context.Context) error {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "bkret-1"}, &etcdv1beta1.EtcdBackup{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return errors.New("still there")
		}
		return fmt.Errorf("still there: %w", err)
	})
	for _, k := range []string{key("bkret-1"), key("bkret-1") + ".json"} {
		if _, err := s3Object(s3, k); minio.ToErrorResponse(err).Code != "NoSuchKey" {
			t.Errorf("%s after retention: %v", k, err)
		}
	}
	for _, n := range names[1:] {
		if getBackup(t, c.Namespace, n).Status.Phase != etcdv1beta1.BackupSucceeded {
			t.Errorf("%s not kept", n)
		}
		if _, err := s3Object(s3, key(n)); err != nil {
			t.Errorf("%s: %v", key(n), err)
		}
	}
	if cond := condition(getCluster(t, c), etcdv1beta1.ConditionBackupFailing); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("verdict.BackupFailing %+v", cond)
	}
}

// TestFinalSnapshotOnDelete: deleting an Available cluster with finalSnapshot takes a backup that
// outlives it, then lets the cluster go; an unreachable cluster is deleted at once, without one.
func TestFinalSnapshotOnDelete(t *testing.T) {
	s3 := testenv.StartS3(t)
	c, w := availableCluster(t, "bkfinal", "127.0.0.166")
	ctx := context.Background()
	dest := s3Destination(t, c.Namespace, s3, s3.SecretAccessKey)
	setBackupSpec(t, c, &etcdv1beta1.BackupSpec{Destination: *dest, FinalSnapshot: true})
	c = getCluster(t, c)
	if err := k8s.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	name := resources.FinalSnapshotName(c)
	job := waitJob(t, c.Namespace, name+"-backup")
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), &etcdv1beta1.EtcdCluster{}); err != nil {
		t.Fatalf("the cluster went before its final snapshot: %v", err)
	}
	if code, msg := runJob(t, job, w); code != 0 {
		t.Fatalf("final snapshot exited %d: %s", code, msg)
	}
	b := waitBackupPhase(t, c.Namespace, name, etcdv1beta1.BackupSucceeded)
	if len(b.OwnerReferences) != 0 {
		t.Errorf("final snapshot is owned: %v", b.OwnerReferences)
	}
	testutil.Eventually(t, waitTimeout, "cluster deleted", func(context.Context) error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(c), &etcdv1beta1.EtcdCluster{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return errors.New("still there")
		}
		return fmt.Errorf("still there: %w", err)
	})

	// Never Available: deleted without waiting.
	dead := createCluster(t, "bkdead", 1)
	setBackupSpec(t, dead, &etcdv1beta1.BackupSpec{Destination: *dest, FinalSnapshot: true})
	testutil.Eventually(t, waitTimeout, "finalizer", func(context.Context) error {
		if len(getCluster(t, dead).Finalizers) == 0 {
			return errors.New("no finalizer yet")
		}
		return nil
	})
	start := time.Now()
	if err := k8s.Delete(ctx, dead); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "unreachable cluster deleted", func(context.Context) error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(dead), &etcdv1beta1.EtcdCluster{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return errors.New("still there")
		}
		return fmt.Errorf("still there: %w", err)
	})
	t.Logf("unreachable cluster deleted in %v", time.Since(start))
	l := &etcdv1beta1.EtcdBackupList{}
	if err := k8s.List(ctx, l, client.InNamespace(dead.Namespace)); err != nil || len(l.Items) != 0 {
		t.Errorf("%d backups of an unreachable cluster (%v)", len(l.Items), err)
	}
}

// TestNamespaceDeletionNotHeldByBackups: once its namespace is being deleted, nothing can be made in
// it, so a deleted backup whose snapshot the delete-snapshot annotation asks to delete lets go at
// once, its snapshot left in place, and a deleted cluster with finalSnapshot goes without one; neither
// holds the namespace's deletion for their timeouts (15 and 5 minutes).
func TestNamespaceDeletionNotHeldByBackups(t *testing.T) {
	s3 := testenv.StartS3(t)
	c, w := availableCluster(t, "bknsdel", "127.0.0.167")
	ctx := context.Background()
	dest := s3Destination(t, c.Namespace, s3, s3.SecretAccessKey)
	setBackupSpec(t, c, &etcdv1beta1.BackupSpec{Destination: *dest, FinalSnapshot: true})
	b := &etcdv1beta1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "bknsdel-1", Namespace: c.Namespace,
			Annotations: map[string]string{etcdv1beta1.AnnotationDeleteSnapshot: "true"}},
		Spec: etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: c.Name}, Destination: dest},
	}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	if code, msg := runJob(t, waitJob(t, c.Namespace, b.Name+"-backup"), w); code != 0 {
		t.Fatalf("backup exited %d: %s", code, msg)
	}
	b = waitBackupPhase(t, c.Namespace, b.Name, etcdv1beta1.BackupSucceeded)
	if len(b.Finalizers) == 0 {
		t.Fatalf("backup without finalizer: %+v", b.ObjectMeta)
	}

	// envtest runs no namespace controller: the namespace stays Terminating, refusing new objects, and
	// the test deletes what it holds
	if err := k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace}}); err != nil {
		t.Fatal(err)
	}
	gone := func(obj client.Object) func(context.Context) error {
		return func(ctx context.Context) error {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err == nil {
				return fmt.Errorf("still there, finalizers %v", obj.GetFinalizers())
			}
			return fmt.Errorf("still there: %w", err)
		}
	}
	start := time.Now()
	if err := k8s.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 15*time.Second, "deleted backup gone", gone(b))
	t.Logf("backup deleted in a namespace being deleted: gone in %v", time.Since(start).Round(10*time.Millisecond))
	if _, err := s3Object(s3, dest.S3.Prefix+"/"+b.Status.Key); err != nil {
		t.Errorf("%s: %v, want it left in place", b.Status.Location, err)
	}
	j := &batchv1.Job{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.DeleteSnapshotJobName(b)}, j); !apierrors.IsNotFound(err) {
		t.Errorf("delete-snapshot job: %v, want none", err)
	}

	start = time.Now()
	if err := k8s.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 15*time.Second, "deleted cluster gone", gone(c))
	t.Logf("cluster with finalSnapshot deleted in a namespace being deleted: gone in %v", time.Since(start).Round(10*time.Millisecond))
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.FinalSnapshotName(c)}, &etcdv1beta1.EtcdBackup{}); !apierrors.IsNotFound(err) {
		t.Errorf("final snapshot: %v, want none", err)
	}
}

// TestBackupToMissingClaim: a backup to a claim that does not exist waits (Pending) and says which
// claim to create, without a Job; once the claim exists the Job is created, and a Job pod that cannot
// be scheduled is named in the backup's message with what the scheduler says.
func TestBackupToMissingClaim(t *testing.T) {
	ctx := context.Background()
	c, _ := availableCluster(t, "bkclaim", "127.0.0.81")
	dest := &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "snapshots"}}
	b := newBackup(t, c.Namespace, "to-missing", c.Name, dest)
	testutil.Eventually(t, waitTimeout, "Pending on the missing claim", func(context.Context) error {
		b = getBackup(t, c.Namespace, b.Name)
		if b.Status.Phase != etcdv1beta1.BackupPending || !strings.Contains(b.Status.Message, "the destination claim snapshots does not exist in namespace "+c.Namespace+": create it") {
			return fmt.Errorf("phase %q message %q", b.Status.Phase, b.Status.Message)
		}
		return nil
	})
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.BackupJobName(b)}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a Job was created for a missing claim (get: %v)", err)
	}

	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "snapshots", Namespace: c.Namespace},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if err := k8s.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	job := waitJob(t, c.Namespace, resources.BackupJobName(b))
	waitBackupPhase(t, c.Namespace, b.Name, etcdv1beta1.BackupRunning)

	// The Job's pod cannot be scheduled (what the scheduler reports for, say, an unbound claim).
	// labelled as the Job controller labels it: the template's labels and the Job's own
	labels := map[string]string{jobControllerUIDLabel: string(job.UID), "batch.kubernetes.io/job-name": job.Name}
	maps.Copy(labels, job.Spec.Template.Labels)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: job.Name + "-", Namespace: job.Namespace, Labels: labels},
		Spec: *job.Spec.Template.Spec.DeepCopy()}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodPending
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims"}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the stuck pod named", func(context.Context) error {
		b = getBackup(t, c.Namespace, b.Name)
		want := "pod " + pod.Name + " cannot be scheduled: 0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims: fix that, or delete this EtcdBackup"
		if b.Status.Phase != etcdv1beta1.BackupRunning || !strings.Contains(b.Status.Message, want) {
			return fmt.Errorf("phase %q message %q", b.Status.Phase, b.Status.Message)
		}
		return nil
	})
}

// TestFinalSnapshotOfDeletedClusterFails: a final snapshot whose cluster went before it could start
// (the deletion stopped waiting for it) fails with a message instead of staying Pending.
func TestFinalSnapshotOfDeletedClusterFails(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-final-gone"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	b := &etcdv1beta1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "gone-final", Namespace: ns.Name,
			Labels: map[string]string{etcdv1beta1.LabelCluster: "gone", etcdv1beta1.LabelFinalSnapshot: "true"}},
		Spec: etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: "gone"},
			Destination: &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "snapshots"}}},
	}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b = waitBackupPhase(t, ns.Name, b.Name, etcdv1beta1.BackupFailed)
	if !strings.Contains(b.Status.Message, "EtcdCluster gone was deleted before its final snapshot could start") {
		t.Errorf("message %q", b.Status.Message)
	}
	// an ordinary backup of a cluster that does not exist (yet) keeps waiting for it
	o := newBackup(t, ns.Name, "gone-manual", "gone", b.Spec.Destination)
	o = waitBackupPhase(t, ns.Name, o.Name, etcdv1beta1.BackupPending)
	if !strings.Contains(o.Status.Message, "EtcdCluster gone does not exist") {
		t.Errorf("message %q", o.Status.Message)
	}
}

// TestFailedBackupPassKeepsObservedGeneration: a pass that fails (here: the Job cannot be created, an
// admission policy refuses every Job in the namespace) leaves status.observedGeneration where it was;
// the first pass that succeeds advances it.
func TestFailedBackupPassKeepsObservedGeneration(t *testing.T) {
	c, _ := availableCluster(t, "bkgen", "127.0.0.82")
	removePolicy := refuseJobs(t, c.Namespace)

	dest := snapshotClaim(t, c.Namespace)
	b := newBackup(t, c.Namespace, "refused", c.Name, dest)
	testutil.Consistently(t, 3*time.Second, "failing passes", func(ctx context.Context) error {
		got := getBackup(t, c.Namespace, b.Name)
		if got.Status.ObservedGeneration != 0 || got.Status.Phase != "" {
			return fmt.Errorf("observedGeneration %d phase %q (%s) after passes that failed", got.Status.ObservedGeneration, got.Status.Phase, got.Status.Message)
		}
		return nil
	})

	removePolicy()
	got := waitBackupPhase(t, c.Namespace, b.Name, etcdv1beta1.BackupRunning)
	if got.Generation == 0 || got.Status.ObservedGeneration != got.Generation {
		t.Errorf("observedGeneration %d, generation %d after a pass that worked", got.Status.ObservedGeneration, got.Generation)
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.BackupConditionComplete); cond == nil ||
		cond.Reason != etcdv1beta1.BackupReasonRunning || cond.ObservedGeneration != got.Generation {
		t.Errorf("Complete condition %+v", cond)
	}
}

// refuseJobs makes the API server refuse every Job created in namespace ns, with a validating
// admission policy, until the function it returns is called.
func refuseJobs(t *testing.T, ns string) func() {
	t.Helper()
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "refuse-jobs-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}}},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "this test refuses Jobs"}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}}
	for _, o := range []client.Object{policy, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	probe := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe", Namespace: ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "probe", Image: testOperatorImage}}}}}}
	testutil.Eventually(t, waitTimeout, "Jobs refused in "+ns, func(ctx context.Context) error {
		if err := k8s.Create(ctx, probe.DeepCopy(), client.DryRunAll); !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			return fmt.Errorf("dry-run create job: %w, want it refused", err)
		}
		return nil
	})
	return func() {
		t.Helper()
		for _, o := range []client.Object{binding, policy} {
			if err := k8s.Delete(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// staleStatusClient is a client whose status patches always find the object changed since the pass
// read it: another writer annotates the object just before each one.
type staleStatusClient struct{ client.Client }

func (c staleStatusClient) Status() client.SubResourceWriter {
	return staleStatusWriter{SubResourceWriter: c.Client.Status(), other: c.Client}
}

type staleStatusWriter struct {
	client.SubResourceWriter
	other client.Client
}

func (w staleStatusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	bumped, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("%T is not a client.Object", obj)
	}
	touch := fmt.Sprintf(`{"metadata":{"annotations":{"test.etcdkit.dev/touched":%q}}}`, time.Now().Format(time.RFC3339Nano))
	if err := w.other.Patch(ctx, bumped, client.RawPatch(types.MergePatchType, []byte(touch))); err != nil {
		return fmt.Errorf("touch: %w", err)
	}
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// TestBackupStatusPatchConflict: a pass that worked on a copy that changed meanwhile does not
// overwrite the newer status (the patch carries the resourceVersion it read), and looks again soon
// without an error.
func TestBackupStatusPatchConflict(t *testing.T) {
	ctx := context.Background()
	c := createCluster(t, "bkconflict", 1) // never Available: no etcd runs for it
	dest := snapshotClaim(t, c.Namespace)
	b := newBackup(t, c.Namespace, "stale", c.Name, dest)
	testutil.Eventually(t, waitTimeout, "Pending on the cluster", func(context.Context) error {
		b = getBackup(t, c.Namespace, b.Name)
		if b.Status.Phase != etcdv1beta1.BackupPending || !strings.Contains(b.Status.Message, "to be Available") {
			return fmt.Errorf("phase %q message %q", b.Status.Phase, b.Status.Message)
		}
		return nil
	})

	// Without an operator image this reconciler decides another message than the manager's, so its
	// pass has a status to write, and the write meets a newer object.
	r := &EtcdBackupReconciler{Client: staleStatusClient{k8s}}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)})
	if err != nil || res.RequeueAfter != requeueCacheLag {
		t.Errorf("reconcile on a stale copy: %+v, %v; want RequeueAfter %s and no error", res, err, requeueCacheLag)
	}
	got := getBackup(t, c.Namespace, b.Name)
	if strings.Contains(got.Status.Message, "does not know its own image") {
		t.Errorf("the stale pass wrote its status: %q", got.Status.Message)
	}
}

// snapshotClaim creates the claim "snapshots" in namespace ns and returns a destination on it.
func snapshotClaim(t *testing.T, ns string) *etcdv1beta1.BackupDestination {
	t.Helper()
	return destinationClaim(t, ns, "snapshots")
}

// destinationClaim creates claim name in ns, as a backup destination, and returns that destination.
func destinationClaim(t *testing.T, ns, name string) *etcdv1beta1.BackupDestination {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if err := k8s.Create(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
	return &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: name}}
}
