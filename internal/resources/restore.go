package resources

import (
	corev1 "k8s.io/api/core/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// RestoreContainerName is the name of the init container that restores a member's snapshot.
const RestoreContainerName = "restore"

// scratchPath is a writable emptyDir for downloads and staging (the root filesystem is read-only).
const scratchPath = "/tmp"

// RestorePlan is the snapshot a new cluster's members restore before etcd first starts.
type RestorePlan struct {
	// Destination holds the snapshot.
	Destination etcdv1beta1.BackupDestination
	// Key is the snapshot's key in Destination.
	Key string
	// SHA256 is the snapshot's expected hex sha256; empty means the one in the snapshot's manifest.
	SHA256 string
	// ClusterToken is the --initial-cluster-token the restored members start with, from which etcd
	// derives the member IDs and the cluster ID; empty means the EtcdCluster's UID. A cluster restored
	// in place (same member names and peer URLs) needs another token to get a new cluster ID.
	ClusterToken string
}

// clusterToken returns the --initial-cluster-token of member m of cluster c: the restore plan's, or
// the cluster's UID.
func clusterToken(c *etcdv1beta1.EtcdCluster, m Member) string {
	if m.Restore != nil && m.Restore.ClusterToken != "" {
		return m.Restore.ClusterToken
	}
	return string(c.UID)
}

// restoreInitContainer returns the init container that creates member m's data directory from the
// snapshot of plan before etcd first starts (`etcd-operator restore`, which does nothing when the data
// directory was already restored from that snapshot), with the volumes it needs besides the data
// volume.
func (o Options) restoreInitContainer(c *etcdv1beta1.EtcdCluster, m Member, plan *RestorePlan) (corev1.Container, []corev1.Volume) {
	destArgs := DestinationArgs(&plan.Destination)
	vols, mounts := DestinationVolumes(&plan.Destination, true)
	args := append([]string{"restore",
		"--key=" + plan.Key,
		"--data-dir=" + DataDir,
		"--name=" + m.Name,
		"--initial-cluster=" + m.InitialCluster,
		"--initial-cluster-token=" + clusterToken(c, m),
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
		Name:            RestoreContainerName,
		Image:           o.OperatorImage,
		ImagePullPolicy: corev1.PullPolicy(o.OperatorImagePullPolicy),
		Args:            args,
		Env:             []corev1.EnvVar{{Name: "TMPDIR", Value: scratchPath}},
		VolumeMounts:    mounts,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resourceMustParse("100m"), corev1.ResourceMemory: resourceMustParse("64Mi"),
		}},
		SecurityContext:          RestrictedContainer(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}, vols
}
