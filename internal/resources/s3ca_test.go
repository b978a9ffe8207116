package resources

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// s3Reader is a container that reads an S3 destination, and the volumes of its pod.
type s3Reader struct {
	ctr  corev1.Container
	vols []corev1.Volume
}

// TestS3CAMountedWhereverS3IsRead: with s3.caSecretRef, the backup Job, the delete-snapshot Job and
// the restore init container each mount that Secret read-only (optional, so that a missing Secret is
// reported by the command) and pass its ca.crt as --s3-ca-file; without it, none of them does.
func TestS3CAMountedWhereverS3IsRead(t *testing.T) {
	c, b := backupFixtures()
	o := Options{OperatorImage: "op"}
	withCA := s3Dest.DeepCopy()
	withCA.S3.Endpoint = "https://s3.storage.svc:7070"
	withCA.S3.CASecretRef = &etcdv1beta1.LocalObjectReference{Name: "s3-ca"}

	// readers returns, for each of the three, the container that reads d and its pod's volumes.
	readers := func(d *etcdv1beta1.BackupDestination) map[string]s3Reader {
		backup, del := o.BuildBackupJob(c, b, d).Spec.Template.Spec, o.BuildDeleteSnapshotJob("apps", "demo", b, d).Spec.Template.Spec
		restore := o.BuildPod(c, Member{Name: "demo-0", InitialClusterState: StateNew, InitialCluster: "demo-0=http://x:2380",
			Restore: &RestorePlan{Destination: *d, Key: "apps/demo/nightly.db"}}).Spec
		return map[string]s3Reader{
			"backup Job":             {backup.Containers[0], backup.Volumes},
			"delete-snapshot Job":    {del.Containers[0], del.Volumes},
			"restore init container": {restore.InitContainers[0], restore.Volumes},
		}
	}

	for name, p := range readers(withCA) {
		if !slices.Contains(p.ctr.Args, "--s3-ca-file="+S3CAFile) || S3CAFile != S3CADir+"/ca.crt" {
			t.Errorf("%s: args %q lack --s3-ca-file=%s", name, p.ctr.Args, S3CAFile)
		}
		i := slices.IndexFunc(p.ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == S3CADir })
		if i < 0 || !p.ctr.VolumeMounts[i].ReadOnly || p.ctr.VolumeMounts[i].SubPath != "" {
			t.Errorf("%s: the CA Secret is not mounted read-only at %s: %+v", name, S3CADir, p.ctr.VolumeMounts)
			continue
		}
		j := slices.IndexFunc(p.vols, func(v corev1.Volume) bool { return v.Name == p.ctr.VolumeMounts[i].Name })
		if j < 0 || p.vols[j].Secret == nil || p.vols[j].Secret.SecretName != "s3-ca" || p.vols[j].Secret.Optional == nil || !*p.vols[j].Secret.Optional {
			t.Errorf("%s: volume of the CA mount: %+v", name, p.vols)
		}
	}
	for name, p := range readers(s3Dest) {
		if slices.ContainsFunc(p.ctr.Args, func(a string) bool { return strings.HasPrefix(a, "--s3-ca-file") }) ||
			slices.ContainsFunc(p.ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == S3CADir }) {
			t.Errorf("%s without caSecretRef: args %q, mounts %+v", name, p.ctr.Args, p.ctr.VolumeMounts)
		}
	}
}
