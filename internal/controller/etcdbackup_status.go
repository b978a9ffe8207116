package controller

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/backup/policy"
)

// backupFinished reports whether b reached Succeeded or Failed.
func backupFinished(b *etcdv1alpha1.EtcdBackup) bool {
	return b.Status.Phase == etcdv1alpha1.BackupSucceeded || b.Status.Phase == etcdv1alpha1.BackupFailed
}

// setPending records what b waits for.
func setPending(b *etcdv1alpha1.EtcdBackup, why string) {
	b.Status.Phase = etcdv1alpha1.BackupPending
	b.Status.Message = why
}

// succeed records a complete backup.
func (r *EtcdBackupReconciler) succeed(b *etcdv1alpha1.EtcdBackup, job *batchv1.Job, res policy.Result) {
	st := &b.Status
	st.Phase = etcdv1alpha1.BackupSucceeded
	start, done := metav1.NewTime(res.StartTime), metav1.NewTime(res.CompletionTime)
	st.StartTime, st.CompletionTime = &start, &done
	st.Key = res.Key
	st.Location = jobLocation(job, res)
	st.SizeBytes = res.SizeBytes
	st.Revision = res.Revision
	st.SHA256 = res.SHA256
	st.EtcdVersion = res.EtcdVersion
	st.Member = res.Member
	st.Message = fmt.Sprintf("Snapshot of revision %d (%d bytes, etcd %s) verified and stored at %s", res.Revision, res.SizeBytes, res.EtcdVersion, st.Location)
	setBackupCondition(b, etcdv1alpha1.BackupConditionComplete, true, etcdv1alpha1.BackupReasonSnapshotStored, st.Message)
	setBackupCondition(b, etcdv1alpha1.BackupConditionFailed, false, etcdv1alpha1.BackupReasonSnapshotStored, "The backup succeeded")
	r.event(b, corev1.EventTypeNormal, "Succeeded", "Backup", "%s", st.Message)
	if d := res.CompletionTime.Sub(res.StartTime); d >= 0 {
		backupDuration.WithLabelValues(b.Namespace, b.Spec.ClusterRef.Name).Observe(d.Seconds())
	}
}

// fail records a failed backup, with an event; it is not retried.
func (r *EtcdBackupReconciler) fail(b *etcdv1alpha1.EtcdBackup, msg string) {
	now := metav1.Now()
	b.Status.Phase = etcdv1alpha1.BackupFailed
	b.Status.CompletionTime = &now
	b.Status.Message = msg
	setBackupCondition(b, etcdv1alpha1.BackupConditionFailed, true, etcdv1alpha1.BackupReasonFailed, msg)
	setBackupCondition(b, etcdv1alpha1.BackupConditionComplete, false, etcdv1alpha1.BackupReasonFailed, "The backup failed")
	r.event(b, corev1.EventTypeWarning, etcdv1alpha1.BackupReasonFailed, "Backup", "%s", msg)
	backupFailures.WithLabelValues(b.Namespace, b.Spec.ClusterRef.Name).Inc()
}

// setBackupCondition sets a condition of b; its lastTransitionTime changes only with its status. Its
// observedGeneration is b's generation: Reconcile discards the status of a pass that failed.
func setBackupCondition(b *etcdv1alpha1.EtcdBackup, t string, status bool, reason, msg string) {
	cs := metav1.ConditionFalse
	if status {
		cs = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: t, Status: cs, Reason: reason, Message: truncate(msg, 32768), ObservedGeneration: b.Generation})
}

// truncate shortens s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
