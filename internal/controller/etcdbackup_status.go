package controller

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/backup/policy"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// succeed records a complete backup.
func (r *EtcdBackupReconciler) succeed(b *etcdv1beta1.EtcdBackup, job *batchv1.Job, res policy.Result) {
	st := &b.Status
	st.Phase = etcdv1beta1.BackupSucceeded
	start, done := metav1.NewTime(res.StartTime), metav1.NewTime(res.CompletionTime)
	st.StartTime, st.CompletionTime = &start, &done
	st.Key = res.Key
	st.Location = verdict.JobLocation(job, res)
	st.SizeBytes = res.SizeBytes
	st.Revision = res.Revision
	st.SHA256 = res.SHA256
	st.EtcdVersion = res.EtcdVersion
	st.Member = res.Member
	st.Message = fmt.Sprintf("Snapshot of revision %d (%d bytes, etcd %s) verified and stored at %s", res.Revision, res.SizeBytes, res.EtcdVersion, st.Location)
	verdict.SetBackupCondition(b, etcdv1beta1.BackupConditionComplete, true, etcdv1beta1.BackupReasonSnapshotStored, st.Message)
	verdict.SetBackupCondition(b, etcdv1beta1.BackupConditionFailed, false, etcdv1beta1.BackupReasonSnapshotStored, "The backup succeeded")
	r.event(b, corev1.EventTypeNormal, "Succeeded", "Backup", "%s", st.Message)
	if d := res.CompletionTime.Sub(res.StartTime); d >= 0 {
		metrics.BackupDuration.WithLabelValues(b.Namespace, b.Spec.ClusterRef.Name).Observe(d.Seconds())
	}
}

// fail records a failed backup, with an event; it is not retried.
func (r *EtcdBackupReconciler) fail(b *etcdv1beta1.EtcdBackup, msg string) {
	now := metav1.Now()
	b.Status.Phase = etcdv1beta1.BackupFailed
	b.Status.CompletionTime = &now
	b.Status.Message = msg
	verdict.SetBackupCondition(b, etcdv1beta1.BackupConditionFailed, true, etcdv1beta1.BackupReasonFailed, msg)
	verdict.SetBackupCondition(b, etcdv1beta1.BackupConditionComplete, false, etcdv1beta1.BackupReasonFailed, "The backup failed")
	r.event(b, corev1.EventTypeWarning, etcdv1beta1.BackupReasonFailed, "Backup", "%s", msg)
	metrics.BackupFailures.WithLabelValues(b.Namespace, b.Spec.ClusterRef.Name).Inc()
}
