//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// backupTimeout bounds one backup Job from creation to a finished EtcdBackup.
const backupTimeout = 90 * time.Second

// objectStore is a versitygw server running in the test namespace, with a bucket.
type objectStore struct {
	// endpoint is its in-cluster URL (the Service), client one reaching its pod from this machine.
	endpoint string
	client   *minio.Client
	bucket   string
	// accessKeyID and secretAccessKey are its root credentials.
	accessKeyID, secretAccessKey string
	// tls, when the store serves HTTPS (startObjectStoreTLS), is how the test trusts it.
	tls *storeTLS
}

// startObjectStore runs versitygw (hack/build-s3.sh --image) as a Deployment and Service "s3" in ns,
// waits for it, and creates a bucket.
func startObjectStore(t testing.TB, ns string) *objectStore {
	t.Helper()
	return startObjectStoreWith(t, ns, nil)
}

// startObjectStoreWith is startObjectStore, serving HTTPS when tlsCfg is set.
func startObjectStoreWith(t testing.TB, ns string, tlsCfg *storeTLS) *objectStore {
	t.Helper()
	ctx := context.Background()
	v := os.Getenv("VERSITYGW_VERSION")
	if v == "" {
		v = "v1.8.0"
	}
	s := &objectStore{bucket: "etcd-backups", accessKeyID: "e2eroot", secretAccessKey: "e2e-secret-key-0123456789", tls: tlsCfg}
	root := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3-root", Namespace: ns},
		StringData: map[string]string{"accessKeyID": s.accessKeyID, "secretAccessKey": s.secretAccessKey}}
	labels := map[string]string{"app": "s3"}
	secretEnv := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: root.Name}, Key: key}}}
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532)},
					Containers: []corev1.Container{{
						Name: "versitygw", Image: "docker.io/local/versitygw:" + v, ImagePullPolicy: corev1.PullNever,
						Args: []string{"--port", ":7070", "--region", "us-east-1", "posix", "/data"},
						Env: []corev1.EnvVar{secretEnv("ROOT_ACCESS_KEY_ID", "accessKeyID"), secretEnv("ROOT_SECRET_ACCESS_KEY", "secretAccessKey"),
							{Name: "HOME", Value: "/data"}},
						Ports:        []corev1.ContainerPort{{ContainerPort: 7070}},
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
					}},
					Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 7070}}},
	}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
		tlsCfg.serveFrom(&dep.Spec.Template.Spec)
	}
	for _, o := range []client.Object{root, dep, svc} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	s.endpoint = scheme + "://s3." + ns + ".svc.cluster.local:7070"
	poll.Eventually(t, 60*time.Second, "versitygw answers and has a bucket", func(ctx context.Context) error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return err
		}
		if len(pods.Items) == 0 || pods.Items[0].Status.PodIP == "" {
			return errors.New("no pod IP yet")
		}
		opts := &minio.Options{
			Creds: credentials.NewStaticV4(s.accessKeyID, s.secretAccessKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath, MaxRetries: 1,
		}
		if tlsCfg != nil {
			opts.Secure, opts.Transport = true, tlsCfg.transport()
		}
		cli, err := minio.New(pods.Items[0].Status.PodIP+":7070", opts)
		if err != nil {
			return err
		}
		if err := cli.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
			if exists, e := cli.BucketExists(ctx, s.bucket); e != nil || !exists {
				return err
			}
		}
		s.client = cli
		return nil
	})
	return s
}

// destination creates a credentials Secret named name (with secretKey as its secret access key) and
// returns an S3 destination in the store.
func (s *objectStore) destination(t testing.TB, ns, name, secretKey string) etcdv1beta1.BackupDestination {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		StringData: map[string]string{"accessKeyID": s.accessKeyID, "secretAccessKey": secretKey}}
	if err := k8s.Create(context.Background(), sec); err != nil {
		t.Fatalf("create secret %s: %v", name, err)
	}
	d := etcdv1beta1.BackupDestination{S3: &etcdv1beta1.S3Destination{
		Endpoint: s.endpoint, Bucket: s.bucket, Prefix: "e2e", Region: "us-east-1", ForcePathStyle: true,
		CredentialsSecretRef: etcdv1beta1.LocalObjectReference{Name: name},
	}}
	if s.tls != nil && s.tls.caSecret != "" {
		d.S3.CASecretRef = &etcdv1beta1.LocalObjectReference{Name: s.tls.caSecret}
	}
	return d
}

// snapshots lists the snapshot keys (not manifests) the store holds under prefix.
func (s *objectStore) snapshots(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, o.Err
		}
		if strings.HasSuffix(o.Key, ".db") {
			keys = append(keys, o.Key)
		}
	}
	return keys, nil
}

func createBackup(t testing.TB, ns, name, cluster string, dest *etcdv1beta1.BackupDestination) {
	t.Helper()
	b := &etcdv1beta1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: cluster}, Destination: dest},
	}
	if err := k8s.Create(context.Background(), b); err != nil {
		t.Fatalf("create EtcdBackup %s: %v", name, err)
	}
}

// waitBackup waits until backup name is finished and returns it; it fails the test when the phase
// is not want.
func waitBackup(t testing.TB, ns, name string, want etcdv1beta1.BackupPhase) (*etcdv1beta1.EtcdBackup, time.Duration) {
	t.Helper()
	b := &etcdv1beta1.EtcdBackup{}
	took := poll.Eventually(t, backupTimeout, "EtcdBackup "+name+" finished", func(ctx context.Context) error {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b); err != nil {
			return err
		}
		if b.Status.Phase != etcdv1beta1.BackupSucceeded && b.Status.Phase != etcdv1beta1.BackupFailed {
			return fmt.Errorf("phase %q: %s", b.Status.Phase, b.Status.Message)
		}
		return nil
	})
	if b.Status.Phase != want {
		t.Fatalf("EtcdBackup %s is %s, want %s: %s", name, b.Status.Phase, want, b.Status.Message)
	}
	return b, took
}

// backupClaim creates a 256 MiB claim "backups" in ns for backups to a PVC.
func backupClaim(t testing.TB, ns string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "backups", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("256Mi")}},
		},
	}
	if err := k8s.Create(context.Background(), pvc); err != nil {
		t.Fatalf("create claim backups in %s: %v", ns, err)
	}
	return pvc
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestBackupToS3AndPVC: an on-demand backup to S3 succeeds with its size, revision and sha256 and the
// snapshot is in the bucket; a backup to a claim succeeds and the file is on the volume.
func TestBackupToS3AndPVC(t *testing.T) {
	const ns = "e2e-backup"
	c := newCluster(t, ns, "bk", 3)
	store := startObjectStore(t, ns)
	_, c = assertAvailable(t, c, availableTimeout)
	ctx := context.Background()
	put, err := etcdClient(t, clientServiceEndpoint(t, c)).Put(ctx, "e2e-backup-key", "value")
	if err != nil {
		t.Fatal(err)
	}

	dest := store.destination(t, ns, "s3-credentials", store.secretAccessKey)
	createBackup(t, ns, "to-s3", c.Name, &dest)
	b, took := waitBackup(t, ns, "to-s3", etcdv1beta1.BackupSucceeded)
	st := b.Status
	t.Logf("backup to S3: %s after creation, %d bytes, revision %d, from member %s", took.Round(100*time.Millisecond), st.SizeBytes, st.Revision, st.Member)
	key := ns + "/bk/to-s3.db"
	if st.Key != key || st.Location != "s3://etcd-backups/e2e/"+key || st.SizeBytes <= 0 || st.Revision < put.Header.Revision ||
		!sha256Hex.MatchString(st.SHA256) || st.EtcdVersion == "" {
		t.Errorf("status %+v", st)
	}
	info, err := store.client.StatObject(ctx, store.bucket, "e2e/"+key, minio.StatObjectOptions{})
	if err != nil || info.Size != st.SizeBytes {
		t.Errorf("object e2e/%s: %+v %v", key, info, err)
	}

	pvc := backupClaim(t, ns)
	createBackup(t, ns, "to-pvc", c.Name, &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups", SubPath: "etcd"}})
	b, took = waitBackup(t, ns, "to-pvc", etcdv1beta1.BackupSucceeded)
	t.Logf("backup to a PVC: %s after creation (the claim binds with the Job's pod), %d bytes", took.Round(100*time.Millisecond), b.Status.SizeBytes)
	if b.Status.Location != "pvc://backups/etcd/"+ns+"/bk/to-pvc.db" || !sha256Hex.MatchString(b.Status.SHA256) {
		t.Errorf("status %+v", b.Status)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	// local-path keeps volumes as directories on this node
	file := filepath.Join("/tmp/etcd-operator-k8s/pv", pvc.Spec.VolumeName+"_"+ns+"_backups", "etcd", ns, "bk", "to-pvc.db")
	if fi, err := os.Stat(file); err != nil || fi.Size() != b.Status.SizeBytes {
		t.Errorf("snapshot file %s: %v %v", file, fi, err)
	}
	poll.Eventually(t, statusTimeout, "cluster status.lastBackup", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		if got.Status.LastBackup == nil || got.Status.LastBackup.Name != "to-pvc" {
			return fmt.Errorf("lastBackup %+v", got.Status.LastBackup)
		}
		return nil
	})
}

// TestBackupScheduleKeepsMaxCount: a schedule of every minute with retention maxCount 2 keeps at most
// 2 successful backups, and the pruned ones' snapshots leave the bucket.
func TestBackupScheduleKeepsMaxCount(t *testing.T) {
	t.Parallel() // mostly waits for the schedule: runs with the others of its kind once the serial tests are done (suite_test.go)
	const ns = "e2e-backup-schedule"
	c := newCluster(t, ns, "sched", 1)
	store := startObjectStore(t, ns)
	assertAvailable(t, c, availableTimeout)
	dest := store.destination(t, ns, "s3-credentials", store.secretAccessKey)
	poll.Eventually(t, statusTimeout, "set spec.backup", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		got.Spec.Backup = &etcdv1beta1.BackupSpec{Schedule: "* * * * *", Retention: &etcdv1beta1.BackupRetention{MaxCount: ptr.To[int32](2)}, Destination: dest}
		return k8s.Update(ctx, got)
	})
	seen := map[string]bool{}
	maxSucceeded, maxObjects := 0, 0
	var overSince time.Time
	const pruneGrace = 20 * time.Second
	prefix := "e2e/" + ns + "/sched/"
	start := time.Now()
	poll.Eventually(t, 5*time.Minute, "four scheduled backups succeeded", func(ctx context.Context) error {
		list := &etcdv1beta1.EtcdBackupList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		succeeded := 0
		for _, b := range list.Items {
			if b.Status.Phase == etcdv1beta1.BackupFailed {
				t.Fatalf("scheduled backup %s failed: %s", b.Name, b.Status.Message)
			}
			if b.Status.Phase == etcdv1beta1.BackupSucceeded {
				seen[b.Name] = true
				if b.DeletionTimestamp.IsZero() {
					succeeded++
				}
			}
		}
		keys, err := store.snapshots(ctx, prefix)
		if err != nil {
			return err
		}
		maxSucceeded, maxObjects = max(maxSucceeded, succeeded), max(maxObjects, len(keys))
		// A new backup succeeds a moment before the pass that prunes the oldest: allow 3 kept for a
		// short while, never more, and never for long.
		switch {
		case succeeded > 3:
			t.Fatalf("%d successful scheduled backups kept, retention allows 2", succeeded)
		case succeeded == 3 && overSince.IsZero():
			overSince = time.Now()
		case succeeded == 3 && time.Since(overSince) > pruneGrace:
			t.Fatalf("3 successful scheduled backups kept for more than %s, retention allows 2", pruneGrace)
		case succeeded < 3:
			overSince = time.Time{}
		}
		if len(seen) < 4 {
			return fmt.Errorf("%d scheduled backups succeeded so far, %d kept, %d snapshots stored", len(seen), succeeded, len(keys))
		}
		if len(keys) != 2 {
			return fmt.Errorf("%d snapshots stored: %v", len(keys), keys)
		}
		return nil
	})
	t.Logf("schedule * * * * * with maxCount 2: %d backups succeeded in %s; at most %d kept and %d snapshots stored at any poll",
		len(seen), time.Since(start).Round(time.Second), maxSucceeded, maxObjects)
	if maxObjects > 3 {
		t.Errorf("up to %d snapshots stored at once: pruned snapshots were not deleted", maxObjects)
	}
	got, err := getCluster(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if fc := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionBackupFailing); fc == nil || fc.Status != metav1.ConditionFalse {
		t.Errorf("BackupFailing %+v", fc)
	}
	if got.Status.LastBackup == nil || got.Status.LastScheduleTime == nil {
		t.Errorf("lastBackup %+v lastScheduleTime %v", got.Status.LastBackup, got.Status.LastScheduleTime)
	}
}

// TestBackupWrongCredentials: wrong S3 credentials fail the backup with a message naming the
// credentials, after at most two pods, and nothing retries it.
func TestBackupWrongCredentials(t *testing.T) {
	const ns = "e2e-backup-denied"
	c := newCluster(t, ns, "denied", 1)
	store := startObjectStore(t, ns)
	assertAvailable(t, c, availableTimeout)
	dest := store.destination(t, ns, "wrong-credentials", "not-the-key")
	createBackup(t, ns, "denied", c.Name, &dest)
	b, took := waitBackup(t, ns, "denied", etcdv1beta1.BackupFailed)
	t.Logf("wrong credentials: Failed %s after creation: %s", took.Round(100*time.Millisecond), b.Status.Message)
	if !strings.Contains(b.Status.Message, "check the credentials Secret") {
		t.Errorf("message %q does not name the credentials", b.Status.Message)
	}
	// Nothing is retried: the Job stays failed with its pods, and no other Job appears.
	var pods int
	poll.Consistently(t, 20*time.Second, "a failed backup was retried", func(ctx context.Context) error {
		jobs := &batchv1.JobList{}
		if err := k8s.List(ctx, jobs, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(jobs.Items) != 1 {
			return fmt.Errorf("%d Jobs for one failed backup", len(jobs.Items))
		}
		j := jobs.Items[0]
		if pods = int(j.Status.Failed + j.Status.Succeeded + j.Status.Active); pods > 2 {
			return fmt.Errorf("%d pods for a backup with wrong credentials: a retry storm", pods)
		}
		return nil
	})
	t.Logf("pods created for the failed backup: %d", pods)
}
