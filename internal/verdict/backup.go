package verdict

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
)

// FailingAfter is how many scheduled backups in a row must fail, or how many schedule periods the
// newest success may be old, before the BackupFailing condition is True.
const FailingAfter = 3

// BackupObservation is what the backup phase found and decided, for the status.
type BackupObservation struct {
	// Last is the newest successful backup of the cluster, nil when none.
	Last *etcdv1alpha1.LastBackup
	// LastSchedule is the schedule time a backup was created (or skipped) for in this pass; nil
	// when none.
	LastSchedule *metav1.Time
	// Failing is the BackupFailing condition (reason, message); nil when the cluster has no schedule.
	Failing *Progress
	// FailingTrue is the condition's status.
	FailingTrue bool
	// Requeue is how soon the next schedule time comes; zero without a schedule.
	Requeue time.Duration
}

// applyBackupStatus sets status.lastBackup, status.lastScheduleTime and the BackupFailing
// condition from what the backup phase observed; nothing when it did not run.
func applyBackupStatus(s *scope) {
	o := s.report.Backup
	if o == nil {
		return
	}
	st := &s.cluster.Status
	st.LastBackup = o.Last
	if o.LastSchedule != nil {
		st.LastScheduleTime = o.LastSchedule
	}
	if o.Failing == nil {
		meta.RemoveStatusCondition(&st.Conditions, etcdv1alpha1.ConditionBackupFailing)
		return
	}
	setCondition(st, s.cluster.Generation, etcdv1alpha1.ConditionBackupFailing, o.FailingTrue, [2]string{o.Failing.Reason, o.Failing.Message})
}

// NewestSuccess returns the newest Succeeded backup as status.lastBackup, nil when none.
func NewestSuccess(backups []*etcdv1alpha1.EtcdBackup) *etcdv1alpha1.LastBackup {
	var best *etcdv1alpha1.EtcdBackup
	for _, b := range backups {
		if b.Status.Phase != etcdv1alpha1.BackupSucceeded || b.Status.CompletionTime == nil {
			continue
		}
		if best == nil || b.Status.CompletionTime.After(best.Status.CompletionTime.Time) ||
			(b.Status.CompletionTime.Equal(best.Status.CompletionTime) && b.Name > best.Name) {
			best = b
		}
	}
	if best == nil {
		return nil
	}
	return &etcdv1alpha1.LastBackup{
		Name: best.Name, CompletionTime: best.Status.CompletionTime.DeepCopy(), Location: best.Status.Location,
		Revision: best.Status.Revision, SizeBytes: best.Status.SizeBytes,
	}
}

// BackupFailing decides the BackupFailing condition of a cluster with a schedule of the given period:
// True when the newest FailingAfter finished scheduled backups all failed, or when the newest
// successful backup (last) completed more than FailingAfter periods before now. It returns the
// condition's status and its reason and message. Pure.
func BackupFailing(scheduled []*etcdv1alpha1.EtcdBackup, last *etcdv1alpha1.LastBackup, period time.Duration, now time.Time) (bool, [2]string) {
	var finished []*etcdv1alpha1.EtcdBackup
	for _, b := range scheduled {
		if BackupFinished(b) && b.Status.CompletionTime != nil {
			finished = append(finished, b)
		}
	}
	slices.SortFunc(finished, func(a, b *etcdv1alpha1.EtcdBackup) int { // newest first
		if c := b.Status.CompletionTime.Compare(a.Status.CompletionTime.Time); c != 0 {
			return c
		}
		return cmp.Compare(b.Name, a.Name)
	})
	if len(finished) >= FailingAfter && !slices.ContainsFunc(finished[:FailingAfter], func(b *etcdv1alpha1.EtcdBackup) bool {
		return b.Status.Phase == etcdv1alpha1.BackupSucceeded
	}) {
		return true, [2]string{etcdv1alpha1.ReasonBackupsFailing, fmt.Sprintf("The last %d scheduled backups failed; the newest, %s: %s",
			FailingAfter, finished[0].Name, finished[0].Status.Message)}
	}
	if last == nil || last.CompletionTime == nil {
		return false, [2]string{etcdv1alpha1.ReasonNoBackupYet, "No backup has succeeded yet"}
	}
	if period > 0 && now.Sub(last.CompletionTime.Time) > FailingAfter*period {
		return true, [2]string{etcdv1alpha1.ReasonBackupTooOld, fmt.Sprintf("The newest successful backup, %s, completed at %s: more than %d schedule periods (%s) ago",
			last.Name, last.CompletionTime.UTC().Format(time.RFC3339), FailingAfter, period)}
	}
	return false, [2]string{etcdv1alpha1.ReasonBackupsSucceeding, fmt.Sprintf("The newest successful backup, %s, completed at %s",
		last.Name, last.CompletionTime.UTC().Format(time.RFC3339))}
}

// BackupFinished reports whether b reached Succeeded or Failed.
func BackupFinished(b *etcdv1alpha1.EtcdBackup) bool {
	return b.Status.Phase == etcdv1alpha1.BackupSucceeded || b.Status.Phase == etcdv1alpha1.BackupFailed
}
