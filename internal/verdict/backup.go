package verdict

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/backup/policy"
)

// FailingAfter is how many scheduled backups in a row must fail, or how many schedule periods the
// newest success may be old, before the BackupFailing condition is True.
const FailingAfter = 3

// BackupObservation is what the backup phase found and decided, for the status.
type BackupObservation struct {
	// Last is the newest successful backup of the cluster, nil when none.
	Last *etcdv1beta1.LastBackup
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
		meta.RemoveStatusCondition(&st.Conditions, etcdv1beta1.ConditionBackupFailing)
		return
	}
	setCondition(st, s.cluster.Generation, etcdv1beta1.ConditionBackupFailing, o.FailingTrue, [2]string{o.Failing.Reason, o.Failing.Message})
}

// NewestSuccess returns the newest Succeeded backup as status.lastBackup, nil when none.
func NewestSuccess(backups []*etcdv1beta1.EtcdBackup) *etcdv1beta1.LastBackup {
	var best *etcdv1beta1.EtcdBackup
	for _, b := range backups {
		if b.Status.Phase != etcdv1beta1.BackupSucceeded || b.Status.CompletionTime == nil {
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
	return &etcdv1beta1.LastBackup{
		Name: best.Name, CompletionTime: best.Status.CompletionTime.DeepCopy(), Location: best.Status.Location,
		Revision: best.Status.Revision, SizeBytes: best.Status.SizeBytes,
	}
}

// BackupFailing decides the BackupFailing condition of a cluster with a schedule of the given period:
// True when the newest FailingAfter finished scheduled backups all failed, or when the newest
// successful backup (last) completed more than FailingAfter periods before now. It returns the
// condition's status and its reason and message. Pure.
func BackupFailing(scheduled []*etcdv1beta1.EtcdBackup, last *etcdv1beta1.LastBackup, period time.Duration, now time.Time) (bool, [2]string) {
	var finished []*etcdv1beta1.EtcdBackup
	for _, b := range scheduled {
		if BackupFinished(b) && b.Status.CompletionTime != nil {
			finished = append(finished, b)
		}
	}
	slices.SortFunc(finished, func(a, b *etcdv1beta1.EtcdBackup) int { // newest first
		if c := b.Status.CompletionTime.Compare(a.Status.CompletionTime.Time); c != 0 {
			return c
		}
		return cmp.Compare(b.Name, a.Name)
	})
	if len(finished) >= FailingAfter && !slices.ContainsFunc(finished[:FailingAfter], func(b *etcdv1beta1.EtcdBackup) bool {
		return b.Status.Phase == etcdv1beta1.BackupSucceeded
	}) {
		return true, [2]string{etcdv1beta1.ReasonBackupsFailing, fmt.Sprintf("The last %d scheduled backups failed; the newest, %s: %s",
			FailingAfter, finished[0].Name, finished[0].Status.Message)}
	}
	if last == nil || last.CompletionTime == nil {
		return false, [2]string{etcdv1beta1.ReasonNoBackupYet, "No backup has succeeded yet"}
	}
	if period > 0 && now.Sub(last.CompletionTime.Time) > FailingAfter*period {
		return true, [2]string{etcdv1beta1.ReasonBackupTooOld, fmt.Sprintf("The newest successful backup, %s, completed at %s: more than %d schedule periods (%s) ago",
			last.Name, last.CompletionTime.UTC().Format(time.RFC3339), FailingAfter, period)}
	}
	return false, [2]string{etcdv1beta1.ReasonBackupsSucceeding, fmt.Sprintf("The newest successful backup, %s, completed at %s",
		last.Name, last.CompletionTime.UTC().Format(time.RFC3339))}
}

// BackupFinished reports whether b reached Succeeded or Failed.
func BackupFinished(b *etcdv1beta1.EtcdBackup) bool {
	return b.Status.Phase == etcdv1beta1.BackupSucceeded || b.Status.Phase == etcdv1beta1.BackupFailed
}

// ScheduledBackupBlocked judges whether the scheduled backup name may be created: exists when one of
// scheduled has that name (created before a restart, or by an earlier pass), otherwise running is
// the scheduled backup that has not finished yet (the schedule time is then skipped, as a CronJob
// with concurrencyPolicy Forbid does, so that backups of an unreachable cluster do not pile up).
func ScheduledBackupBlocked(scheduled []*etcdv1beta1.EtcdBackup, name string) (exists bool, running *etcdv1beta1.EtcdBackup) {
	for _, b := range scheduled {
		if b.Name == name {
			return true, nil
		}
	}
	for _, b := range scheduled {
		if !BackupFinished(b) {
			return false, b
		}
	}
	return false, nil
}

// Pruned returns the scheduled backups (not being deleted) that retention no longer keeps as of now
// (policy.Prune); none when retention is nil.
func Pruned(ret *etcdv1beta1.BackupRetention, scheduled []*etcdv1beta1.EtcdBackup, now time.Time) []*etcdv1beta1.EtcdBackup {
	if ret == nil {
		return nil
	}
	p := policy.Retention{}
	if ret.MaxCount != nil {
		p.MaxCount = int(*ret.MaxCount)
	}
	if ret.MaxAge != nil {
		p.MaxAge = ret.MaxAge.Duration
	}
	byName := map[string]*etcdv1beta1.EtcdBackup{}
	var infos []policy.BackupInfo
	for _, b := range scheduled {
		if !b.DeletionTimestamp.IsZero() {
			continue
		}
		byName[b.Name] = b
		info := policy.BackupInfo{Name: b.Name, Succeeded: b.Status.Phase == etcdv1beta1.BackupSucceeded}
		if BackupFinished(b) && b.Status.CompletionTime != nil {
			info.CompletionTime = b.Status.CompletionTime.Time
		}
		infos = append(infos, info)
	}
	var out []*etcdv1beta1.EtcdBackup
	for _, name := range policy.Prune(infos, p, now) {
		out = append(out, byName[name])
	}
	return out
}

// FinalSnapshotOutcome returns the event (type, reason, message) that ends the wait for final snapshot
// b of a deleted cluster, nil while it should go on: b finished, or timedOut (the cluster has waited
// longer than timeout since its deletion).
func FinalSnapshotOutcome(b *etcdv1beta1.EtcdBackup, timedOut bool, timeout time.Duration) *[3]string {
	switch {
	case b.Status.Phase == etcdv1beta1.BackupSucceeded:
		return &[3]string{corev1.EventTypeNormal, "FinalSnapshotTaken", fmt.Sprintf("Final snapshot %s stored at %s", b.Name, b.Status.Location)}
	case b.Status.Phase == etcdv1beta1.BackupFailed:
		return &[3]string{corev1.EventTypeWarning, "FinalSnapshotFailed", fmt.Sprintf("Final snapshot %s failed: %s", b.Name, b.Status.Message)}
	case timedOut:
		return &[3]string{corev1.EventTypeWarning, "FinalSnapshotTimedOut", fmt.Sprintf(
			"Final snapshot %s did not finish within %s (%s): deleting the cluster anyway", b.Name, timeout, b.Status.Message)}
	}
	return nil
}
