package resources

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
)

// Paths in the pods that run the operator image for a backup or a restore.
const (
	// S3CredentialsPath is where the S3 credentials Secret is mounted (files accessKeyID and
	// secretAccessKey).
	S3CredentialsPath = "/var/run/etcd-operator/s3"
	// BackupDirPath is where a PVC destination is mounted.
	BackupDirPath = "/var/lib/etcd-backups"
	// scratchPath is a writable emptyDir for downloads and staging (the root filesystem is read-only).
	scratchPath = "/tmp"
)

// RestorePlan is the snapshot a new cluster's members restore before etcd first starts.
type RestorePlan struct {
	// Destination holds the snapshot.
	Destination etcdv1alpha1.BackupDestination
	// Key is the snapshot's key in Destination.
	Key string
	// SHA256 is the snapshot's expected hex sha256; empty means the one in the snapshot's manifest.
	SHA256 string
}

// DestinationArgs returns the `etcd-operator backup|restore` flags, volumes and mounts that reach a
// backup destination from a pod: the S3 credentials Secret mounted read-only at S3CredentialsPath, or
// the claim mounted at BackupDirPath (read-only when readOnly).
func DestinationArgs(d etcdv1alpha1.BackupDestination, readOnly bool) ([]string, []corev1.Volume, []corev1.VolumeMount) {
	switch {
	case d.S3 != nil:
		s3 := d.S3
		args := []string{"--s3-endpoint=" + s3.Endpoint, "--s3-bucket=" + s3.Bucket, "--s3-credentials-dir=" + S3CredentialsPath}
		if s3.Prefix != "" {
			args = append(args, "--s3-prefix="+s3.Prefix)
		}
		if s3.Region != "" {
			args = append(args, "--s3-region="+s3.Region)
		}
		if s3.ForcePathStyle {
			args = append(args, "--s3-force-path-style")
		}
		return args,
			[]corev1.Volume{{Name: "s3-credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: s3.CredentialsSecretRef.Name, DefaultMode: ptr.To[int32](0o440),
			}}}},
			[]corev1.VolumeMount{{Name: "s3-credentials", MountPath: S3CredentialsPath, ReadOnly: true}}
	case d.PVC != nil:
		return []string{"--dir=" + path.Join(BackupDirPath, d.PVC.SubPath)},
			[]corev1.Volume{{Name: "backups", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: d.PVC.ClaimName, ReadOnly: readOnly,
			}}}},
			[]corev1.VolumeMount{{Name: "backups", MountPath: BackupDirPath, ReadOnly: readOnly}}
	}
	return nil, nil, nil
}

// restoreInitContainer returns the init container that creates member m's data directory from the
// snapshot of plan before etcd first starts (`etcd-operator restore`, which does nothing when the data
// directory was already restored from that snapshot), with the volumes it needs besides the data
// volume.
func (o Options) restoreInitContainer(c *etcdv1alpha1.EtcdCluster, m Member, plan *RestorePlan) (corev1.Container, []corev1.Volume) {
	destArgs, vols, mounts := DestinationArgs(plan.Destination, true)
	args := append([]string{"restore",
		"--key=" + plan.Key,
		"--data-dir=" + DataDir,
		"--name=" + m.Name,
		"--initial-cluster=" + m.InitialCluster,
		"--initial-cluster-token=" + string(c.UID),
		"--initial-advertise-peer-urls=" + o.PeerURL(c, m.Name),
	}, destArgs...)
	if plan.SHA256 != "" {
		args = append(args, "--sha256="+plan.SHA256)
	}
	vols = append(vols, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	mounts = append(mounts,
		corev1.VolumeMount{Name: "data", MountPath: DataMountPath},
		corev1.VolumeMount{Name: "scratch", MountPath: scratchPath})
	return corev1.Container{
		Name:            "restore",
		Image:           o.OperatorImage,
		ImagePullPolicy: corev1.PullPolicy(o.OperatorImagePullPolicy),
		Args:            args,
		Env:             []corev1.EnvVar{{Name: "TMPDIR", Value: scratchPath}},
		VolumeMounts:    mounts,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resourceMustParse("100m"), corev1.ResourceMemory: resourceMustParse("64Mi"),
		}},
		SecurityContext:          restrictedContainer(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}, vols
}
