package resources

import (
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

func backupFixtures() (*etcdv1beta1.EtcdCluster, *etcdv1beta1.EtcdBackup) {
	c := testutil.EtcdCluster("demo", testutil.InNamespace("apps"), testutil.WithUID("cluster-uid"), testutil.WithReplicas(3),
		func(c *etcdv1beta1.EtcdCluster) {
			c.Status.Members = []etcdv1beta1.MemberStatus{{Name: "demo-0"}, {Name: "demo-2"}, {Name: "demo-3"}}
		})
	b := &etcdv1beta1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "apps", UID: "backup-uid"},
		Spec:       etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: "demo"}},
	}
	return c, b
}

var s3Dest = &etcdv1beta1.BackupDestination{S3: &etcdv1beta1.S3Destination{
	Endpoint: "http://s3.storage.svc:7070", Bucket: "etcd", Prefix: "prod", Region: "eu-1", ForcePathStyle: true,
	CredentialsSecretRef: etcdv1beta1.LocalObjectReference{Name: "s3-creds"},
}}

// TestBuildBackupJobS3: the Job runs `etcd-operator backup` in the operator's image against every
// member's fully qualified client URL, with the credentials Secret mounted read-only, an emptyDir to
// stage in, as the member pods' hardened non-root user, not retried after the command failed.
func TestBuildBackupJobS3(t *testing.T) {
	c, b := backupFixtures()
	o := Options{OperatorImage: "docker.io/local/etcd-operator:dev", OperatorImagePullPolicy: "IfNotPresent"}
	j := o.BuildBackupJob(c, b, s3Dest)
	if j.Name != "nightly-backup" || j.Namespace != "apps" {
		t.Errorf("job %s/%s", j.Namespace, j.Name)
	}
	if !metav1.IsControlledBy(j, b) {
		t.Errorf("job is not controlled by the backup: %+v", j.OwnerReferences)
	}
	for k, v := range map[string]string{etcdv1beta1.LabelCluster: "demo", etcdv1beta1.LabelBackup: "nightly", "app.kubernetes.io/managed-by": "etcd-operator"} {
		if j.Labels[k] != v || j.Spec.Template.Labels[k] != v {
			t.Errorf("label %s = %q / %q, want %q", k, j.Labels[k], j.Spec.Template.Labels[k], v)
		}
	}
	if j.Spec.Template.Labels["app.kubernetes.io/name"] == "etcd" {
		t.Error("backup pods carry the member pods' selector label: the client Service and PDB would select them")
	}
	pod := j.Spec.Template.Spec
	ctr := pod.Containers[0]
	if ctr.Image != o.OperatorImage || ctr.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image %s %s", ctr.Image, ctr.ImagePullPolicy)
	}
	want := []string{
		"backup",
		"--endpoints=http://demo-0.demo-peer.apps.svc.cluster.local:2379,http://demo-2.demo-peer.apps.svc.cluster.local:2379,http://demo-3.demo-peer.apps.svc.cluster.local:2379",
		"--namespace=apps", "--cluster=demo", "--name=nightly", "--temp-dir=/tmp", "--timeout=30m0s",
		"--s3-endpoint=http://s3.storage.svc:7070", "--s3-bucket=etcd", "--s3-credentials-dir=" + S3CredentialsDir,
		"--s3-prefix=prod", "--s3-region=eu-1", "--s3-force-path-style",
	}
	if !slices.Equal(ctr.Args, want) {
		t.Errorf("args\n got %q\nwant %q", ctr.Args, want)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range ctr.VolumeMounts {
		mounts[m.Name] = m
	}
	if m := mounts["s3-credentials"]; m.MountPath != S3CredentialsDir || !m.ReadOnly {
		t.Errorf("credentials mount %+v", m)
	}
	if m := mounts["staging"]; m.MountPath != "/tmp" {
		t.Errorf("staging mount %+v", m)
	}
	for _, v := range pod.Volumes {
		switch v.Name {
		case "s3-credentials":
			if v.Secret == nil || v.Secret.SecretName != "s3-creds" {
				t.Errorf("credentials volume %+v", v)
			}
		case "staging":
			if v.EmptyDir == nil {
				t.Errorf("staging volume %+v", v)
			}
		default:
			t.Errorf("unexpected volume %s", v.Name)
		}
	}
	checkHardened(t, j)
	if ptr.Deref(j.Spec.BackoffLimit, -1) != 1 || ptr.Deref(j.Spec.ActiveDeadlineSeconds, 0) != int64((BackupTimeout+BackupJobSlack).Seconds()) {
		t.Errorf("backoffLimit %v activeDeadlineSeconds %v", j.Spec.BackoffLimit, j.Spec.ActiveDeadlineSeconds)
	}
	rules := j.Spec.PodFailurePolicy.Rules
	if len(rules) != 2 || rules[0].Action != batchv1.PodFailurePolicyActionFailJob || !slices.Equal(rules[0].OnExitCodes.Values, []int32{ExitCodeBackupFailed}) ||
		*rules[0].OnExitCodes.ContainerName != BackupContainerName || rules[1].Action != batchv1.PodFailurePolicyActionIgnore {
		t.Errorf("podFailurePolicy %+v", rules)
	}
	if ctr.TerminationMessagePolicy != corev1.TerminationMessageReadFile || ctr.TerminationMessagePath != "/dev/termination-log" {
		t.Errorf("termination message %s %s", ctr.TerminationMessagePolicy, ctr.TerminationMessagePath)
	}
}

func checkHardened(t *testing.T, j *batchv1.Job) {
	t.Helper()
	pod := j.Spec.Template.Spec
	ctr := pod.Containers[0]
	psc, sc := pod.SecurityContext, ctr.SecurityContext
	if !*psc.RunAsNonRoot || *psc.RunAsUser != nonRootID || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", psc)
	}
	if *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context %+v", sc)
	}
	if *pod.AutomountServiceAccountToken || pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("service account token %v, restartPolicy %s", *pod.AutomountServiceAccountToken, pod.RestartPolicy)
	}
}

// TestBuildBackupJobPVC: a claim destination is mounted at its subPath and named with --dir.
func TestBuildBackupJobPVC(t *testing.T) {
	c, b := backupFixtures()
	c.Status.Members = nil // before etcd answered: ordinals from spec.replicas
	d := &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups", SubPath: "etcd/demo"}}
	j := Options{OperatorImage: "op"}.BuildBackupJob(c, b, d)
	ctr := j.Spec.Template.Spec.Containers[0]
	if !slices.Contains(ctr.Args, "--dir="+BackupPVCDir) || slices.ContainsFunc(ctr.Args, func(a string) bool { return strings.HasPrefix(a, "--s3") }) {
		t.Errorf("args %q", ctr.Args)
	}
	if !slices.Contains(ctr.Args, "--endpoints=http://demo-0.demo-peer.apps.svc.cluster.local:2379,http://demo-1.demo-peer.apps.svc.cluster.local:2379,http://demo-2.demo-peer.apps.svc.cluster.local:2379") {
		t.Errorf("endpoints from spec.replicas: %q", ctr.Args)
	}
	var found bool
	for _, m := range ctr.VolumeMounts {
		if m.Name == "backups" {
			found = m.MountPath == BackupPVCDir && m.SubPath == "etcd/demo" && !m.ReadOnly
		}
	}
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.Name == "backups" && (v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "backups") {
			t.Errorf("claim volume %+v", v)
		}
	}
	if !found {
		t.Errorf("claim not mounted at %s with its subPath: %+v", BackupPVCDir, ctr.VolumeMounts)
	}
	checkHardened(t, j)
}

// TestBuildDeleteSnapshotJob: `etcd-operator backup delete` for the backup's key in its destination.
func TestBuildDeleteSnapshotJob(t *testing.T) {
	_, b := backupFixtures()
	j := Options{OperatorImage: "op"}.BuildDeleteSnapshotJob("apps", "demo", b, s3Dest)
	ctr := j.Spec.Template.Spec.Containers[0]
	if j.Name != "nightly-delete" || !slices.Equal(ctr.Args[:5], []string{"backup", "delete", "--namespace=apps", "--cluster=demo", "--name=nightly"}) ||
		!slices.Contains(ctr.Args, "--s3-bucket=etcd") || !metav1.IsControlledBy(j, b) {
		t.Errorf("job %s args %q", j.Name, ctr.Args)
	}
	checkHardened(t, j)
}

// TestBackupJobNamesFitLabels: names of any length give Job names and label values of at most 63
// characters, distinct for distinct backups.
func TestBackupJobNamesFitLabels(t *testing.T) {
	seen := map[string]string{}
	for _, n := range []int{1, 40, 55, 56, 57, 63, 64, 120, 253} {
		for _, suffix := range []string{"a", "b"} {
			name := strings.Repeat("x", n-1) + suffix
			b := &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name}}
			for _, jn := range []string{BackupJobName(b), DeleteSnapshotJobName(b)} {
				if errs := validation.IsDNS1123Label(jn); len(errs) > 0 {
					t.Errorf("job name %q of a %d-character backup: %v", jn, n, errs)
				}
				if prev, ok := seen[jn]; ok && prev != name {
					t.Errorf("backups %q and %q share job name %q", prev, name, jn)
				}
				seen[jn] = name
			}
			for k, v := range BackupLabels(strings.Repeat("c", 50), b) {
				if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
					t.Errorf("label %s=%q: %v", k, v, errs)
				}
			}
		}
	}
}

// TestDestinationLocation: locations as EtcdBackup status reports them.
func TestDestinationLocation(t *testing.T) {
	for _, tc := range []struct {
		d    *etcdv1beta1.BackupDestination
		want string
	}{
		{s3Dest, "s3://etcd/prod/apps/demo/b.db"},
		{&etcdv1beta1.BackupDestination{S3: &etcdv1beta1.S3Destination{Bucket: "etcd"}}, "s3://etcd/apps/demo/b.db"},
		{&etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups", SubPath: "x/y"}}, "pvc://backups/x/y/apps/demo/b.db"},
		{&etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups"}}, "pvc://backups/apps/demo/b.db"},
		{nil, ""},
	} {
		if got := DestinationLocation(tc.d, "apps/demo/b.db"); got != tc.want {
			t.Errorf("DestinationLocation(%+v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestScheduledBackupName: one name per schedule time, in UTC whatever the time zone, stable across
// operator restarts, and a valid object name for the longest cluster name.
func TestScheduledBackupName(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := time.Date(2026, 1, 10, 3, 0, 0, 0, berlin)
	if got := ScheduledBackupName("demo", at); got != "demo-20260110-020000" {
		t.Errorf("name %q", got)
	}
	if ScheduledBackupName("demo", at) != ScheduledBackupName("demo", at.UTC()) {
		t.Error("the same instant named twice")
	}
	if ScheduledBackupName("demo", at) == ScheduledBackupName("demo", at.Add(30*time.Second)) {
		t.Error("two schedule times (@every 30s) share a name")
	}
	if errs := validation.IsDNS1123Subdomain(ScheduledBackupName(strings.Repeat("c", 50), at)); len(errs) > 0 {
		t.Errorf("not an object name: %v", errs)
	}
	c := testutil.EtcdCluster("demo", testutil.WithUID("0123456789abcdef"))
	if got := FinalSnapshotName(c); got != "demo-final-01234567" {
		t.Errorf("final snapshot name %q", got)
	}
}

// TestBuildClusterBackups: a scheduled backup is owned by its cluster and says its schedule time; the
// final snapshot is not owned, so that it outlives the cluster; both go to the cluster's destination.
func TestBuildClusterBackups(t *testing.T) {
	c := testutil.EtcdCluster("demo", testutil.WithUID("0123456789abcdef"))
	c.Spec.Backup = &etcdv1beta1.BackupSpec{Destination: etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "snaps"}}}
	at := time.Date(2026, 1, 10, 2, 0, 0, 0, time.UTC)
	s := BuildScheduledBackup(c, at)
	if s.Name != "demo-20260110-020000" || s.Labels[etcdv1beta1.LabelScheduled] != "true" || len(s.OwnerReferences) != 1 ||
		s.Annotations[etcdv1beta1.AnnotationScheduledTime] != "2026-01-10T02:00:00Z" || s.Spec.Destination.PVC.ClaimName != "snaps" {
		t.Errorf("scheduled backup %+v", s)
	}
	f := BuildFinalSnapshot(c)
	if f.Name != "demo-final-01234567" || len(f.OwnerReferences) != 0 || f.Labels[etcdv1beta1.LabelFinalSnapshot] != "true" || f.Spec.Destination.PVC.ClaimName != "snaps" {
		t.Errorf("final snapshot %+v", f)
	}
	if s.Spec.Destination == &c.Spec.Backup.Destination {
		t.Error("the destination is shared with the cluster's spec, not copied")
	}
	v := BuildSurvivorSnapshot(c, "demo-2", at)
	if v.Name != "demo-2-survivor-20260110-020000" || v.Spec.Member != "demo-2" || len(v.OwnerReferences) != 0 ||
		v.Labels[etcdv1beta1.LabelSurvivorSnapshot] != "true" || v.Labels[etcdv1beta1.LabelScheduled] != "" || v.Spec.Destination.PVC.ClaimName != "snaps" {
		t.Errorf("survivor snapshot %+v", v)
	}
	// its Job dials that member only, and takes it without a leader
	ctr := Options{OperatorImage: "op"}.BuildBackupJob(c, v, v.Spec.Destination).Spec.Template.Spec.Containers[0]
	if !slices.Contains(ctr.Args, "--member=http://demo-2.demo-peer..svc.cluster.local:2379") ||
		slices.ContainsFunc(ctr.Args, func(a string) bool { return strings.HasPrefix(a, "--endpoints") }) {
		t.Errorf("args of a survivor's copy %q", ctr.Args)
	}
}

func TestBuildBackupJobWithClientTLS(t *testing.T) {
	c, b := backupFixtures()
	if j := (Options{}).BuildBackupJob(c, b, s3Dest); slices.ContainsFunc(j.Spec.Template.Spec.Containers[0].Args, func(a string) bool {
		return strings.HasPrefix(a, "--cacert") || strings.Contains(a, "https://")
	}) {
		t.Fatalf("a plain-text cluster's backup dials TLS: %q", j.Spec.Template.Spec.Containers[0].Args)
	}
	c.Spec.TLS = &etcdv1beta1.TLSSpec{Client: &etcdv1beta1.TLSListenerSpec{Enabled: true}}
	j := Options{}.BuildBackupJob(c, b, s3Dest)
	ctr := j.Spec.Template.Spec.Containers[0]
	for _, w := range []string{"--cacert=/etc/etcd-operator/etcd-client-tls/ca.crt", "--cert=/etc/etcd-operator/etcd-client-tls/tls.crt",
		"--key=/etc/etcd-operator/etcd-client-tls/tls.key"} {
		if !slices.Contains(ctr.Args, w) {
			t.Errorf("args lack %q: %q", w, ctr.Args)
		}
	}
	if !slices.ContainsFunc(ctr.Args, func(a string) bool { return strings.HasPrefix(a, "--endpoints=https://demo-0.") }) {
		t.Errorf("endpoints are not https: %q", ctr.Args)
	}
	if !slices.ContainsFunc(j.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == "demo-client-tls"
	}) || !slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.MountPath == BackupClientTLSDir && m.ReadOnly
	}) {
		t.Errorf("the client certificate Secret is not mounted read-only: %v %v", j.Spec.Template.Spec.Volumes, ctr.VolumeMounts)
	}
}

// TestBuildBackupJobWithAuth: with spec.auth, the backup Job (a survivor's copy too) authenticates as
// root with the password from the root Secret in its environment, never in an argument; without it,
// neither.
func TestBuildBackupJobWithAuth(t *testing.T) {
	c, b := backupFixtures()
	if ctr := (Options{}).BuildBackupJob(c, b, s3Dest).Spec.Template.Spec.Containers[0]; len(ctr.Env) != 0 || slices.Contains(ctr.Args, "--user=root") {
		t.Fatalf("a cluster without spec.auth: env %v args %q", ctr.Env, ctr.Args)
	}
	for _, tc := range []struct{ ref, secret string }{{"", "demo-root-credentials"}, {"etcd-root", "etcd-root"}} {
		testutil.WithAuth(true, tc.ref)(c)
		for _, member := range []string{"", "demo-2"} {
			b.Spec.Member = member
			ctr := Options{}.BuildBackupJob(c, b, s3Dest).Spec.Template.Spec.Containers[0]
			if !slices.Contains(ctr.Args, "--user=root") {
				t.Errorf("member %q: args lack --user=root: %q", member, ctr.Args)
			}
			if slices.ContainsFunc(ctr.Args, func(a string) bool { return strings.Contains(a, "password") }) {
				t.Errorf("member %q: an argument names the password: %q", member, ctr.Args)
			}
			i := slices.IndexFunc(ctr.Env, func(e corev1.EnvVar) bool { return e.Name == BackupPasswordEnv })
			if i < 0 || ctr.Env[i].Value != "" || ctr.Env[i].ValueFrom == nil || ctr.Env[i].ValueFrom.SecretKeyRef == nil ||
				ctr.Env[i].ValueFrom.SecretKeyRef.Name != tc.secret || ctr.Env[i].ValueFrom.SecretKeyRef.Key != "password" {
				t.Errorf("member %q: env %+v, want %s from Secret %s key password", member, ctr.Env, BackupPasswordEnv, tc.secret)
			}
		}
	}
}
