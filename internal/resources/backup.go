package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// Settings of backup Jobs.
const (
	// BackupContainerName is the name of the container of backup and delete-snapshot Jobs.
	BackupContainerName = "backup"
	// BackupTimeout is the `--timeout` of `etcd-operator backup`; the Job's activeDeadlineSeconds
	// adds BackupJobSlack to it for scheduling, image pulls and volume mounts.
	BackupTimeout  = 30 * time.Minute
	BackupJobSlack = 10 * time.Minute
	// DeleteSnapshotTimeout is the `--timeout` of `etcd-operator backup delete`.
	DeleteSnapshotTimeout = 5 * time.Minute

	// S3CredentialsDir is where the S3 credentials Secret is mounted (read-only) in backup Jobs.
	S3CredentialsDir = "/var/run/secrets/etcd-backup/s3"
	// S3CADir is where the Secret of s3.caSecretRef is mounted (read-only); S3CAFile is its key
	// "ca.crt" there, the --s3-ca-file of the commands.
	S3CADir  = "/var/run/secrets/etcd-backup/s3-ca"
	S3CAFile = S3CADir + "/ca.crt"
	// BackupPVCDir is where the destination claim (its subPath) is mounted in backup Jobs.
	BackupPVCDir = "/var/lib/etcd-backup"
	// BackupStagingDir is the emptyDir the snapshot is staged in before it is stored.
	BackupStagingDir = "/tmp"
	// ExitCodeBackupFailed is the exit code of `etcd-operator backup` when the backup failed (the
	// termination message says why): such a pod is not retried.
	ExitCodeBackupFailed = 1
)

// maxNameLength is the longest name whose value may also be a label value (Job names are copied
// into the job-name label of their pods).
const maxNameLength = 63

// ShortName returns name when it has at most max characters, else a prefix of it and an 8-character
// hash of the whole name, together max characters long: distinct names stay distinct.
func ShortName(name string, max int) string {
	if len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:4])
	prefix := name[:max-len(h)-1]
	for len(prefix) > 0 && (prefix[len(prefix)-1] == '-' || prefix[len(prefix)-1] == '.') {
		prefix = prefix[:len(prefix)-1]
	}
	return prefix + "-" + h
}

// BackupJobName is the name of the Job that takes backup b: "<b>-backup", shortened to 63
// characters with a hash when b's name is long.
func BackupJobName(b *etcdv1beta1.EtcdBackup) string {
	return ShortName(b.Name, maxNameLength-len("-backup")) + "-backup"
}

// DeleteSnapshotJobName is the name of the Job that deletes b's stored snapshot: "<b>-delete",
// shortened like BackupJobName.
func DeleteSnapshotJobName(b *etcdv1beta1.EtcdBackup) string {
	return ShortName(b.Name, maxNameLength-len("-delete")) + "-delete"
}

// BackupLabels are the labels of the Jobs and pods of backup b of cluster clusterName.
func BackupLabels(clusterName string, b *etcdv1beta1.EtcdBackup) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "etcd-backup",
		"app.kubernetes.io/instance":   ShortName(clusterName, maxNameLength),
		"app.kubernetes.io/managed-by": "etcd-operator",
		etcdv1beta1.LabelCluster:       ShortName(clusterName, maxNameLength),
		etcdv1beta1.LabelBackup:        ShortName(b.Name, maxNameLength),
	}
}

// BackupOwnerReference makes backup b the controller of an object.
func BackupOwnerReference(b *etcdv1beta1.EtcdBackup) metav1.OwnerReference {
	return *metav1.NewControllerRef(b, etcdv1beta1.GroupVersion.WithKind("EtcdBackup"))
}

// BackupEndpoints returns the client URLs of cluster c's members (fully qualified DNS names): those
// its status lists, or, before etcd has answered, those of ordinals 0..replicas-1.
func (o Options) BackupEndpoints(c *etcdv1beta1.EtcdCluster) []string {
	var eps []string
	for _, m := range c.Status.Members {
		if m.Name != "" {
			eps = append(eps, o.ClientURL(c, m.Name))
		}
	}
	if len(eps) == 0 {
		for i := range int(c.Spec.ReplicasOrDefault()) {
			eps = append(eps, o.ClientURL(c, MemberName(c, i)))
		}
	}
	return eps
}

// DestinationArgs are the `etcd-operator backup` flags of destination d as the Job mounts it.
func DestinationArgs(d *etcdv1beta1.BackupDestination) []string {
	switch {
	case d.S3 != nil:
		args := []string{
			"--s3-endpoint=" + d.S3.Endpoint,
			"--s3-bucket=" + d.S3.Bucket,
			"--s3-credentials-dir=" + S3CredentialsDir,
		}
		if d.S3.Prefix != "" {
			args = append(args, "--s3-prefix="+d.S3.Prefix)
		}
		if d.S3.Region != "" {
			args = append(args, "--s3-region="+d.S3.Region)
		}
		if d.S3.ForcePathStyle {
			args = append(args, "--s3-force-path-style")
		}
		if d.S3.CASecretRef != nil {
			args = append(args, "--s3-ca-file="+S3CAFile)
		}
		return args
	case d.PVC != nil:
		return []string{"--dir=" + BackupPVCDir}
	}
	return nil
}

// DestinationVolumes returns the volumes and mounts through which a pod reaches destination d with the
// flags of DestinationArgs: the S3 credentials Secret read-only at S3CredentialsDir and the CA Secret,
// if any, read-only at S3CADir (both optional: a missing Secret or key fails the command with a
// message naming it, instead of a pod stuck in ContainerCreating), or the claim's subPath at
// BackupPVCDir (read-only when readOnly).
func DestinationVolumes(d *etcdv1beta1.BackupDestination, readOnly bool) ([]corev1.Volume, []corev1.VolumeMount) {
	switch {
	case d.S3 != nil:
		vols := []corev1.Volume{{Name: "s3-credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: d.S3.CredentialsSecretRef.Name, Optional: ptr.To(true), DefaultMode: ptr.To[int32](0o440),
		}}}}
		mounts := []corev1.VolumeMount{{Name: "s3-credentials", MountPath: S3CredentialsDir, ReadOnly: true}}
		if d.S3.CASecretRef != nil {
			vols = append(vols, corev1.Volume{Name: "s3-ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: d.S3.CASecretRef.Name, Optional: ptr.To(true), DefaultMode: ptr.To[int32](0o444),
			}}})
			mounts = append(mounts, corev1.VolumeMount{Name: "s3-ca", MountPath: S3CADir, ReadOnly: true})
		}
		return vols, mounts
	case d.PVC != nil:
		return []corev1.Volume{{Name: "backups", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: d.PVC.ClaimName, ReadOnly: readOnly},
			}}},
			[]corev1.VolumeMount{{Name: "backups", MountPath: BackupPVCDir, SubPath: d.PVC.SubPath, ReadOnly: readOnly}}
	}
	return nil, nil
}

// DestinationLocation is where backup key (see policy.Key) is in destination d:
// "s3://<bucket>/<prefix>/<key>" or "pvc://<claim>/<subPath>/<key>"; "" for an empty destination.
func DestinationLocation(d *etcdv1beta1.BackupDestination, key string) string {
	switch {
	case d == nil:
		return ""
	case d.S3 != nil:
		return "s3://" + path.Join(d.S3.Bucket, d.S3.Prefix, key)
	case d.PVC != nil:
		return "pvc://" + path.Join(d.PVC.ClaimName, d.PVC.SubPath, key)
	}
	return ""
}

// BuildBackupJob returns the Job that takes backup b of cluster c into destination d: the operator's
// image runs `etcd-operator backup` against every member's client URL, with the S3 credentials Secret
// mounted read-only or the claim (its subPath) mounted, and an emptyDir to stage the snapshot in.
// A failed backup is not retried: the command exits with ExitCodeBackupFailed and a termination
// message saying why (wrong credentials would fail again); only pods lost to a disruption are
// replaced. The Job is owned by b.
func (o Options) BuildBackupJob(c *etcdv1beta1.EtcdCluster, b *etcdv1beta1.EtcdBackup, d *etcdv1beta1.BackupDestination) *batchv1.Job {
	endpoints := "--endpoints=" + strings.Join(o.BackupEndpoints(c), ",")
	if b.Spec.Member != "" {
		endpoints = "--member=" + o.ClientURL(c, b.Spec.Member)
	}
	args := []string{
		"backup",
		endpoints,
		"--namespace=" + c.Namespace,
		"--cluster=" + c.Name,
		"--name=" + b.Name,
		"--temp-dir=" + BackupStagingDir,
		"--timeout=" + BackupTimeout.String(),
	}
	args = append(args, DestinationArgs(d)...)
	job := o.backupJob(BackupJobName(b), c.Name, b, d, args, BackupTimeout+BackupJobSlack)
	if c.Spec.ClientTLS() {
		// the client certificate issued for users ("<cluster>-client-tls"), read-only
		pod := &job.Spec.Template.Spec
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "etcd-client-tls", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: ClientTLSSecretName(c), DefaultMode: ptr.To[int32](0o440)}}})
		pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: "etcd-client-tls", MountPath: BackupClientTLSDir, ReadOnly: true})
		pod.Containers[0].Args = append(pod.Containers[0].Args, "--cacert="+BackupClientTLSDir+"/"+CAKey,
			"--cert="+BackupClientTLSDir+"/"+TLSCertKey, "--key="+BackupClientTLSDir+"/"+TLSKeyKey)
	}
	if c.Spec.AuthEnabled() {
		// the root password from its Secret into the environment only: never an argument (visible in
		// the pod spec and the process list), never a file in a log
		ctr := &job.Spec.Template.Spec.Containers[0]
		ctr.Args = append(ctr.Args, "--user=root") // etcd.RootUser
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: BackupPasswordEnv, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: RootSecretName(c)}, Key: RootPasswordKey}}})
	}
	return job
}

// BackupPasswordEnv is the environment variable from which `etcd-operator backup --user` reads the
// user's password; a backup Job of a cluster with spec.auth sets it from the root Secret.
const BackupPasswordEnv = "ETCD_OPERATOR_PASSWORD"

// BackupClientTLSDir is where a backup Job of a cluster with client TLS mounts the client certificate
// Secret "<cluster>-client-tls".
const BackupClientTLSDir = "/etc/etcd-operator/etcd-client-tls"

// BuildDeleteSnapshotJob returns the Job that deletes backup b's stored snapshot and manifest from
// destination d (`etcd-operator backup delete`), for destinations the operator cannot reach itself
// (a claim) and so that it never reads S3 credentials. clusterName is b's cluster (the key's second
// element). Owned by b, not retried on failure.
func (o Options) BuildDeleteSnapshotJob(namespace, clusterName string, b *etcdv1beta1.EtcdBackup, d *etcdv1beta1.BackupDestination) *batchv1.Job {
	args := []string{
		"backup", "delete",
		"--namespace=" + namespace,
		"--cluster=" + clusterName,
		"--name=" + b.Name,
		"--timeout=" + DeleteSnapshotTimeout.String(),
	}
	args = append(args, DestinationArgs(d)...)
	return o.backupJob(DeleteSnapshotJobName(b), clusterName, b, d, args, DeleteSnapshotTimeout+BackupJobSlack)
}

// backupJob is the Job of both builders.
func (o Options) backupJob(name, clusterName string, b *etcdv1beta1.EtcdBackup, d *etcdv1beta1.BackupDestination, args []string, deadline time.Duration) *batchv1.Job {
	labels := BackupLabels(clusterName, b)
	volumes := []corev1.Volume{{Name: "staging", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	mounts := []corev1.VolumeMount{{Name: "staging", MountPath: BackupStagingDir}}
	dv, dm := DestinationVolumes(d, false)
	volumes, mounts = append(volumes, dv...), append(mounts, dm...)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       b.Namespace,
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{BackupOwnerReference(b)},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](1),
			ActiveDeadlineSeconds: ptr.To(int64(deadline / time.Second)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{
					// The command failed and said why: running it again would fail the same way.
					Action: batchv1.PodFailurePolicyActionFailJob,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
						ContainerName: ptr.To(BackupContainerName),
						Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
						Values:        []int32{ExitCodeBackupFailed},
					},
				},
				{
					// A pod evicted or preempted does not count against backoffLimit.
					Action: batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
						{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue},
					},
				},
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext:              RestrictedPod(),
					Containers: []corev1.Container{{
						Name:            BackupContainerName,
						Image:           o.OperatorImage,
						ImagePullPolicy: corev1.PullPolicy(o.OperatorImagePullPolicy),
						Args:            args,
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("50m"),
							corev1.ResourceMemory: resource.MustParse("64Mi"),
						}},
						VolumeMounts:             mounts,
						TerminationMessagePath:   corev1.TerminationMessagePathDefault,
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
						SecurityContext:          RestrictedContainer(),
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

// ScheduledBackupName is the name of the EtcdBackup that cluster's schedule creates for time t:
// "<cluster>-<yyyymmdd>-<hhmmss>" in UTC. The same time gives the same name, so an operator that
// restarts never creates a second backup for one schedule time.
func ScheduledBackupName(cluster string, t time.Time) string {
	return cluster + "-" + t.UTC().Format("20060102-150405")
}

// FinalSnapshotName is the name of the EtcdBackup taken when cluster c is deleted: "<cluster>-final-"
// and the first 8 characters of its UID, so that a later cluster of the same name gets its own.
func FinalSnapshotName(c *etcdv1beta1.EtcdCluster) string {
	uid := string(c.UID)
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return c.Name + "-final-" + uid
}

// BuildScheduledBackup returns the EtcdBackup cluster c's schedule creates for schedule time t (named
// by ScheduledBackupName, owned by c, so that retention and the cluster's deletion take it), to
// c's spec.backup.destination.
func BuildScheduledBackup(c *etcdv1beta1.EtcdCluster, t time.Time) *etcdv1beta1.EtcdBackup {
	return &etcdv1beta1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{
			Name: ScheduledBackupName(c.Name, t), Namespace: c.Namespace,
			Labels:          map[string]string{etcdv1beta1.LabelCluster: c.Name, etcdv1beta1.LabelScheduled: "true"},
			Annotations:     map[string]string{etcdv1beta1.AnnotationScheduledTime: t.UTC().Format(time.RFC3339)},
			OwnerReferences: []metav1.OwnerReference{OwnerReference(c)},
		},
		Spec: etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: c.Name}, Destination: c.Spec.Backup.Destination.DeepCopy()},
	}
}

// SurvivorSnapshotName is the name of the EtcdBackup that copies member, a survivor of the quorum
// loss of cluster that began at since: "<member>-survivor-<since, UTC, YYYYMMDD-HHMMSS>", so that
// every pass of one loss names the same backup and a later loss gets new ones.
func SurvivorSnapshotName(member string, since time.Time) string {
	return member + "-survivor-" + since.UTC().Format("20060102-150405")
}

// BuildSurvivorSnapshot returns the EtcdBackup that copies member, a survivor of the quorum loss of
// cluster c that began at since, to c's spec.backup.destination (set by the caller) before the
// cluster is recreated: not owned by c, so that the copy outlives the cluster.
func BuildSurvivorSnapshot(c *etcdv1beta1.EtcdCluster, member string, since time.Time) *etcdv1beta1.EtcdBackup {
	return &etcdv1beta1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{
			Name: SurvivorSnapshotName(member, since), Namespace: c.Namespace,
			Labels: map[string]string{etcdv1beta1.LabelCluster: c.Name, etcdv1beta1.LabelSurvivorSnapshot: "true"},
		},
		Spec: etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: c.Name},
			Destination: c.Spec.Backup.Destination.DeepCopy(), Member: member},
	}
}

// BuildFinalSnapshot returns the EtcdBackup taken when cluster c is deleted (named by
// FinalSnapshotName): not owned by c, so that it outlives it.
func BuildFinalSnapshot(c *etcdv1beta1.EtcdCluster) *etcdv1beta1.EtcdBackup {
	return &etcdv1beta1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{
			Name: FinalSnapshotName(c), Namespace: c.Namespace,
			Labels: map[string]string{etcdv1beta1.LabelCluster: c.Name, etcdv1beta1.LabelFinalSnapshot: "true"},
		},
		Spec: etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: c.Name}, Destination: c.Spec.Backup.Destination.DeepCopy()},
	}
}
