package verdict

import (
	"cmp"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/backup/policy"
)

// StuckWaitingReasons are the reasons kubelet gives for a container that will not start without
// someone fixing something.
var StuckWaitingReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true,
}

// JobFinishTime is when the Job completed or failed (its finishing condition's transition).
func JobFinishTime(j *batchv1.Job) time.Time {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// JobLocation is where the Job stored the backup: "pvc://<claim>/<subPath>/<key>" for a claim, the
// result's own location ("s3://<bucket>/<prefix>/<key>") otherwise.
func JobLocation(job *batchv1.Job, res policy.Result) string {
	spec := job.Spec.Template.Spec
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		for _, c := range spec.Containers {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name {
					return "pvc://" + path.Join(v.PersistentVolumeClaim.ClaimName, m.SubPath, res.Key)
				}
			}
		}
	}
	return res.Location
}

// JobCondition reports whether the Job has condition t True, and its message.
func JobCondition(j *batchv1.Job, t batchv1.JobConditionType) (bool, string) {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			msg := c.Reason
			if c.Message != "" {
				msg += ": " + c.Message
			}
			return true, msg
		}
	}
	return false, ""
}

// JobFinished reports whether a Job completed or failed.
func JobFinished(j *batchv1.Job) bool {
	done, _ := JobCondition(j, batchv1.JobComplete)
	failed, _ := JobCondition(j, batchv1.JobFailed)
	return done || failed
}

// BackupDestination is b's destination: its own, else its cluster's spec.backup.destination; nil
// when neither names one.
func BackupDestination(b *etcdv1beta1.EtcdBackup, c *etcdv1beta1.EtcdCluster) *etcdv1beta1.BackupDestination {
	if d := b.Spec.Destination; d != nil && (d.S3 != nil || d.PVC != nil) {
		return d
	}
	if c != nil && c.Spec.Backup != nil {
		if d := &c.Spec.Backup.Destination; d.S3 != nil || d.PVC != nil {
			return d
		}
	}
	return nil
}

// CreatedBefore orders backups by creation time, then name.
func CreatedBefore(x, y *etcdv1beta1.EtcdBackup) bool {
	if c := x.CreationTimestamp.Compare(y.CreationTimestamp.Time); c != 0 {
		return c < 0
	}
	return cmp.Less(x.Name, y.Name)
}

// SetPending records what b waits for.
func SetPending(b *etcdv1beta1.EtcdBackup, why string) {
	b.Status.Phase = etcdv1beta1.BackupPending
	b.Status.Message = why
}

// SetBackupCondition sets a condition of b; its lastTransitionTime changes only with its status. Its
// observedGeneration is b's generation: Reconcile discards the status of a pass that failed.
func SetBackupCondition(b *etcdv1beta1.EtcdBackup, t string, status bool, reason, msg string) {
	cs := metav1.ConditionFalse
	if status {
		cs = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: t, Status: cs, Reason: reason, Message: Truncate(msg, 32768), ObservedGeneration: b.Generation})
}

// Truncate shortens s to at most n bytes (n at least 3), ending it with "..." when it cuts, and never
// inside a UTF-8 character.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// UnknownMember says why backup b cannot be taken when its spec.member is not a member cluster c's
// status lists (by name), with the names it lists; "" when b names no member or a listed one.
func UnknownMember(b *etcdv1beta1.EtcdBackup, c *etcdv1beta1.EtcdCluster) string {
	if b.Spec.Member == "" {
		return ""
	}
	var names []string
	for _, m := range c.Status.Members {
		if m.Name == b.Spec.Member {
			return ""
		}
		names = append(names, m.Name)
	}
	return fmt.Sprintf("spec.member %s is not a member of EtcdCluster %s (its members: %s); nothing was stored: create another EtcdBackup naming one of them, or none",
		b.Spec.Member, c.Name, strings.Join(names, ", "))
}

// BackupKey is b's key in its destination (policy.Key), "" when b's names cannot form one.
func BackupKey(b *etcdv1beta1.EtcdBackup) string {
	k, _ := policy.Key(b.Namespace, b.Spec.ClusterRef.Name, b.Name)
	return k
}
