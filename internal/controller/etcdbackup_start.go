package controller

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/backup/policy"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// reconcileJob reads the result of b's Job when it has one, or creates it once b may run.
func (r *EtcdBackupReconciler) reconcileJob(ctx context.Context, b *etcdv1beta1.EtcdBackup) (ctrl.Result, error) {
	job := &batchv1.Job{}
	err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: resources.BackupJobName(b)}, job)
	switch {
	case err == nil && !metav1.IsControlledBy(job, b):
		verdict.SetPending(b, fmt.Sprintf("Job %s exists and does not belong to this EtcdBackup: delete it, or create the backup under another name", job.Name))
		return ctrl.Result{RequeueAfter: verdict.RequeueBlocked}, nil
	case err == nil:
		return r.observeJob(ctx, b, job), nil
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("get job: %w", err)
	}
	return r.startBackup(ctx, b)
}

// startBackup creates the Job of b, which has none, once b may run; a backup whose Job went away
// while it ran, or the final snapshot of a cluster that is gone, fails instead.
func (r *EtcdBackupReconciler) startBackup(ctx context.Context, b *etcdv1beta1.EtcdBackup) (ctrl.Result, error) {
	if b.Status.Phase == etcdv1beta1.BackupRunning {
		// the cache may not hold yet the Job created a moment ago: only the API server says it is gone
		err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: resources.BackupJobName(b)}, &batchv1.Job{})
		if err == nil {
			return ctrl.Result{RequeueAfter: requeueCacheLag}, nil
		} else if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get job: %w", err)
		}
		r.fail(b, fmt.Sprintf("the backup Job %s was deleted before it finished; create another EtcdBackup", resources.BackupJobName(b)))
		return ctrl.Result{}, nil
	}
	if b.Labels[etcdv1beta1.LabelFinalSnapshot] == "true" {
		// the final snapshot of a cluster that is gone can never be taken: say so instead of waiting
		err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterRef.Name}, &etcdv1beta1.EtcdCluster{})
		if apierrors.IsNotFound(err) {
			r.fail(b, fmt.Sprintf("EtcdCluster %s was deleted before its final snapshot could start (its deletion waits at most %s for it); nothing was stored", b.Spec.ClusterRef.Name, finalSnapshotTimeout))
			return ctrl.Result{}, nil
		} else if err != nil {
			return ctrl.Result{}, fmt.Errorf("get cluster: %w", err)
		}
	}
	c, dest, wait, err := r.mayRun(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	if wait != "" {
		verdict.SetPending(b, wait)
		return ctrl.Result{RequeueAfter: requeueBackupPending}, nil
	}
	if why := verdict.UnknownMember(b, c); why != "" {
		r.fail(b, why)
		return ctrl.Result{}, nil
	}
	job := r.Options.BuildBackupJob(c, b, dest)
	if err := r.Create(ctx, job); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return ctrl.Result{RequeueAfter: requeueCacheLag}, nil
		}
		return ctrl.Result{}, fmt.Errorf("create job %s: %w", job.Name, err)
	}
	now := metav1.Now()
	b.Status.Phase = etcdv1beta1.BackupRunning
	b.Status.StartTime = &now
	b.Status.Message = fmt.Sprintf("Job %s is taking the snapshot, to %s", job.Name, resources.DestinationLocation(dest, verdict.BackupKey(b)))
	verdict.SetBackupCondition(b, etcdv1beta1.BackupConditionComplete, false, etcdv1beta1.BackupReasonRunning, b.Status.Message)
	r.event(b, corev1.EventTypeNormal, "Started", "Backup", "Created Job %s to back up EtcdCluster %s", job.Name, c.Name)
	return ctrl.Result{}, nil
}

// mayRun returns b's cluster and destination when b may start now, or why it waits: its cluster is
// missing or not Available, it has no destination, the operator's image is unknown, or another
// backup of the same cluster runs or was created earlier (backups of one cluster run one at a time,
// in creation order).
func (r *EtcdBackupReconciler) mayRun(ctx context.Context, b *etcdv1beta1.EtcdBackup) (*etcdv1beta1.EtcdCluster, *etcdv1beta1.BackupDestination, string, error) {
	c := &etcdv1beta1.EtcdCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterRef.Name}, c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Sprintf("EtcdCluster %s does not exist in namespace %s", b.Spec.ClusterRef.Name, b.Namespace), nil
		}
		return nil, nil, "", fmt.Errorf("get cluster: %w", err)
	}
	if _, err := policy.Key(b.Namespace, c.Name, b.Name); err != nil {
		return nil, nil, fmt.Sprintf("the backup cannot be stored under its name: %v", err), nil
	}
	dest := verdict.BackupDestination(b, c)
	if dest == nil {
		return nil, nil, fmt.Sprintf("no destination: set spec.destination, or spec.backup.destination of EtcdCluster %s", c.Name), nil
	}
	if pvc := dest.PVC; pvc != nil {
		err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: pvc.ClaimName}, &corev1.PersistentVolumeClaim{})
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Sprintf("the destination claim %s does not exist in namespace %s: create it (ReadWriteOnce is enough; see docs/backup.md), or delete this EtcdBackup", pvc.ClaimName, b.Namespace), nil
		} else if err != nil {
			return nil, nil, "", fmt.Errorf("get persistentvolumeclaim %s: %w", pvc.ClaimName, err)
		}
	}
	if r.Options.OperatorImage == "" {
		return nil, nil, "the operator does not know its own image, which backup Jobs run: start it with --operator-image", nil
	}
	// a cluster that refuses writes (NOSPACE) still serves snapshots, and one is most wanted then; a
	// copy of one member (a survivor of a quorum loss) needs no quorum
	if a := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionAvailable); b.Spec.Member == "" &&
		(a == nil || (a.Status != metav1.ConditionTrue && a.Reason != etcdv1beta1.ReasonNoSpace)) {
		why := "it has not reported its status yet"
		if a != nil {
			why = a.Message
		}
		return nil, nil, fmt.Sprintf("waiting for EtcdCluster %s to be Available: %s", c.Name, why), nil
	}
	if other, err := r.blockingBackup(ctx, b, c); err != nil || other != "" {
		return nil, nil, other, err
	}
	return c, dest, "", nil
}

// blockingBackup names the backup of the same cluster that b waits for, "" when none: one that is
// Running or has an unfinished Job, or one created before b that is not finished and could run.
func (r *EtcdBackupReconciler) blockingBackup(ctx context.Context, b *etcdv1beta1.EtcdBackup, c *etcdv1beta1.EtcdCluster) (string, error) {
	list := &etcdv1beta1.EtcdBackupList{}
	if err := r.List(ctx, list, client.InNamespace(b.Namespace)); err != nil {
		return "", fmt.Errorf("list backups: %w", err)
	}
	var earlier []*etcdv1beta1.EtcdBackup
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID == b.UID || o.Spec.ClusterRef.Name != b.Spec.ClusterRef.Name || verdict.BackupFinished(o) || !o.DeletionTimestamp.IsZero() {
			continue
		}
		if o.Status.Phase == etcdv1beta1.BackupRunning {
			return fmt.Sprintf("waiting for backup %s of the same cluster, which is running: backups of one cluster run one at a time", o.Name), nil
		}
		// a copy of one member does not wait for earlier backups that wait for the cluster
		if verdict.CreatedBefore(o, b) && verdict.BackupDestination(o, c) != nil && b.Spec.Member == "" {
			earlier = append(earlier, o)
		}
	}
	jobs := &batchv1.JobList{}
	if err := r.List(ctx, jobs, client.InNamespace(b.Namespace), client.MatchingLabels{
		etcdv1beta1.LabelCluster: resources.ShortName(c.Name, 63), "app.kubernetes.io/name": "etcd-backup",
	}); err != nil {
		return "", fmt.Errorf("list jobs: %w", err)
	}
	for _, j := range jobs.Items {
		if !verdict.JobFinished(&j) && !metav1.IsControlledBy(&j, b) && j.DeletionTimestamp.IsZero() {
			return fmt.Sprintf("waiting for Job %s of the same cluster to finish: backups of one cluster run one at a time", j.Name), nil
		}
	}
	if len(earlier) > 0 {
		first := slices.MinFunc(earlier, func(x, y *etcdv1beta1.EtcdBackup) int {
			if verdict.CreatedBefore(x, y) {
				return -1
			}
			return 1
		})
		return fmt.Sprintf("waiting for backup %s of the same cluster, created earlier: backups of one cluster run one at a time, in creation order", first.Name), nil
	}
	return "", nil
}
