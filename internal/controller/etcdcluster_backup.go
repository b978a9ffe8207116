package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/backup/policy"
	"github.com/etcdkit/etcd-operator/internal/kube"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// Bounds of scheduled and final backups.
const (
	// finalSnapshotTimeout bounds how long a deleted cluster waits for its final snapshot.
	finalSnapshotTimeout = 5 * time.Minute
	// requeueFinalSnapshot is how often a deleted cluster looks at its final snapshot.
	requeueFinalSnapshot = 2 * time.Second
)

// reconcileBackups creates the scheduled backup that is due (one for the newest missed schedule
// time), prunes scheduled backups by spec.backup.retention, and observes the newest successful backup
// and whether backups keep failing. It never blocks the phases after it.
func (r *EtcdClusterReconciler) reconcileBackups(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	all, scheduled, err := r.listBackups(ctx, c)
	if err != nil {
		return nil, err
	}
	obs := &verdict.BackupObservation{Last: verdict.NewestSuccess(all)}
	s.report.Backup = obs
	if obs.Last != nil && obs.Last.CompletionTime != nil {
		metrics.BackupLastSuccess.WithLabelValues(c.Namespace, c.Name).Set(float64(obs.Last.CompletionTime.Unix()))
		metrics.BackupSize.WithLabelValues(c.Namespace, c.Name).Set(float64(obs.Last.SizeBytes))
	}
	spec := c.Spec.Backup
	if spec == nil || spec.Schedule == "" {
		return nil, nil
	}
	now := time.Now()
	sched, err := policy.ParseSchedule(spec.Schedule, spec.TimeZone)
	if err != nil {
		obs.Failing, obs.FailingTrue = &verdict.Progress{Reason: etcdv1beta1.ReasonInvalidSpec, Message: "spec.backup: " + err.Error()}, true
		return nil, nil
	}
	earliest := c.CreationTimestamp.Time
	if c.Status.LastScheduleTime != nil {
		earliest = c.Status.LastScheduleTime.Time
	}
	last, missed, next := policy.MissedSchedule(sched, earliest, now)
	if !next.IsZero() {
		obs.Requeue = max(next.Sub(now), time.Second)
	}
	if !last.IsZero() {
		if err := r.createScheduledBackup(ctx, c, scheduled, last, missed); err != nil {
			return nil, err
		}
		t := metav1.NewTime(last)
		obs.LastSchedule = &t
	}
	if err := r.applyRetention(ctx, c, scheduled, now); err != nil {
		return nil, err
	}
	failing, reasonMsg := verdict.BackupFailing(scheduled, obs.Last, policy.SchedulePeriod(sched, now), now)
	obs.Failing, obs.FailingTrue = &verdict.Progress{Reason: reasonMsg[0], Message: reasonMsg[1]}, failing
	if failing && !meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1beta1.ConditionBackupFailing) {
		r.event(c, corev1.EventTypeWarning, reasonMsg[0], "Backup", "%s", reasonMsg[1])
	}
	return nil, nil
}

// listBackups returns the EtcdBackups of cluster c, and of those the ones its schedule created.
func (r *EtcdClusterReconciler) listBackups(ctx context.Context, c *etcdv1beta1.EtcdCluster) (all, scheduled []*etcdv1beta1.EtcdBackup, err error) {
	list := &etcdv1beta1.EtcdBackupList{}
	if err := r.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return nil, nil, fmt.Errorf("list backups: %w", err)
	}
	for i := range list.Items {
		b := &list.Items[i]
		if b.Spec.ClusterRef.Name != c.Name {
			continue
		}
		all = append(all, b)
		if b.Labels[etcdv1beta1.LabelScheduled] == "true" && metav1.IsControlledBy(b, c) {
			scheduled = append(scheduled, b)
		}
	}
	return all, scheduled, nil
}

// createScheduledBackup creates the EtcdBackup of schedule time t, unless a scheduled backup of
// the cluster has not finished yet (then t is skipped, as a CronJob with concurrencyPolicy Forbid
// does, so that backups of an unreachable cluster do not pile up).
func (r *EtcdClusterReconciler) createScheduledBackup(ctx context.Context, c *etcdv1beta1.EtcdCluster, scheduled []*etcdv1beta1.EtcdBackup, t time.Time, missed int) error {
	name := resources.ScheduledBackupName(c.Name, t)
	exists, running := verdict.ScheduledBackupBlocked(scheduled, name)
	if running != nil {
		r.eventAbout(c, objectRef(c, etcdv1beta1.GroupVersion.String(), "EtcdBackup", running.Name), corev1.EventTypeWarning, "BackupSkipped", "Backup", "Skipped the scheduled backup of %s: backup %s has not finished yet (%s)",
			t.UTC().Format(time.RFC3339), running.Name, running.Status.Message)
	}
	if exists || running != nil {
		return nil // created before a restart or by an earlier pass, or skipped
	}
	if err := r.Create(ctx, resources.BuildScheduledBackup(c, t)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("create scheduled backup %s: %w", name, err)
	}
	note := ""
	if missed > 1 {
		note = fmt.Sprintf(" (%d schedule times were missed; one backup makes up for them)", missed)
	}
	r.eventAbout(c, objectRef(c, etcdv1beta1.GroupVersion.String(), "EtcdBackup", name), corev1.EventTypeNormal, "ScheduledBackup", "Backup", "Created EtcdBackup %s for %s%s", name, t.UTC().Format(time.RFC3339), note)
	return nil
}

// applyRetention deletes the scheduled backups spec.backup.retention no longer keeps, with their
// stored snapshots (the delete-snapshot annotation makes the EtcdBackup's finalizer delete them).
func (r *EtcdClusterReconciler) applyRetention(ctx context.Context, c *etcdv1beta1.EtcdCluster, scheduled []*etcdv1beta1.EtcdBackup, now time.Time) error {
	for _, b := range verdict.Pruned(c.Spec.Backup.Retention, scheduled, now) {
		name := b.Name
		if b.Annotations[etcdv1beta1.AnnotationDeleteSnapshot] != "true" {
			patch := client.MergeFrom(b.DeepCopy())
			if b.Annotations == nil {
				b.Annotations = map[string]string{}
			}
			b.Annotations[etcdv1beta1.AnnotationDeleteSnapshot] = "true"
			if err := r.Patch(ctx, b, patch); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fmt.Errorf("mark backup %s for deletion: %w", name, err)
			}
		}
		if err := r.Delete(ctx, b, client.Preconditions{UID: &b.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete backup %s: %w", name, err)
		}
		r.eventAbout(c, objectRef(c, etcdv1beta1.GroupVersion.String(), "EtcdBackup", name), corev1.EventTypeNormal, "PrunedBackup", "Backup", "Deleted backup %s (%s) and its stored snapshot, by spec.backup.retention", name, b.Status.Phase)
	}
	return nil
}

// finalSnapshot takes the final snapshot of a deleted cluster when spec.backup.finalSnapshot asks
// for one: it creates an EtcdBackup not owned by the cluster (so that it outlives it) while the
// cluster was last seen Available, and waits for it, without blocking, at most finalSnapshotTimeout
// after the deletion. done is true when deletion may proceed.
func (r *EtcdClusterReconciler) finalSnapshot(ctx context.Context, c *etcdv1beta1.EtcdCluster) (res ctrl.Result, done bool, err error) {
	defer func() {
		if done {
			metrics.ForgetBackup(c.Namespace, c.Name)
		}
	}()
	if c.Spec.Backup == nil || !c.Spec.Backup.FinalSnapshot {
		return ctrl.Result{}, true, nil
	}
	name := resources.FinalSnapshotName(c)
	b := &etcdv1beta1.EtcdBackup{}
	err = r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, b)
	switch {
	case apierrors.IsNotFound(err):
		if !meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1beta1.ConditionAvailable) {
			r.event(c, corev1.EventTypeWarning, "FinalSnapshotSkipped", "Delete", "No final snapshot: the cluster is not Available")
			return ctrl.Result{}, true, nil
		}
		if time.Since(c.DeletionTimestamp.Time) > finalSnapshotTimeout {
			return ctrl.Result{}, true, nil
		}
		if err := r.Create(ctx, resources.BuildFinalSnapshot(c)); err != nil && !apierrors.IsAlreadyExists(err) {
			if kube.NamespaceTerminating(err) {
				// nothing can be made in a namespace being deleted: waiting would hold its deletion
				// for finalSnapshotTimeout and store nothing
				log.FromContext(ctx).Info("no final snapshot: the cluster's namespace is being deleted, so no EtcdBackup can be made in it")
				r.event(c, corev1.EventTypeWarning, "FinalSnapshotSkipped", "Delete", "No final snapshot: namespace %s is being deleted, so no EtcdBackup can be made in it", c.Namespace)
				return ctrl.Result{}, true, nil
			}
			return ctrl.Result{}, false, fmt.Errorf("create final snapshot %s: %w", name, err)
		}
		r.event(c, corev1.EventTypeNormal, "FinalSnapshot", "Delete", "Taking a final snapshot, EtcdBackup %s, before the members go (waiting at most %s)", name, finalSnapshotTimeout)
		return ctrl.Result{RequeueAfter: requeueFinalSnapshot}, false, nil
	case err != nil:
		return ctrl.Result{}, false, fmt.Errorf("get final snapshot: %w", err)
	}
	if ev := verdict.FinalSnapshotOutcome(b, time.Since(c.DeletionTimestamp.Time) > finalSnapshotTimeout, finalSnapshotTimeout); ev != nil {
		r.event(c, ev[0], ev[1], "Delete", "%s", ev[2])
		return ctrl.Result{}, true, nil
	}
	return ctrl.Result{RequeueAfter: requeueFinalSnapshot}, false, nil
}
