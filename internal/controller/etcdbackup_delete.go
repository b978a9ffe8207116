package controller

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/kube"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// deleteSnapshotGiveUp is how long a deleted backup waits for its stored snapshot to be deleted before
// it lets go with a Warning event naming what is left.
const deleteSnapshotGiveUp = 15 * time.Minute

// reconcileBackupDelete removes the finalizer of a deleted backup, after deleting its stored snapshot
// when the etcd.etcdkit.dev/delete-snapshot annotation asks for it. It never holds the EtcdBackup
// longer than deleteSnapshotGiveUp.
func (r *EtcdBackupReconciler) reconcileBackupDelete(ctx context.Context, b *etcdv1beta1.EtcdBackup) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b, etcdv1beta1.BackupFinalizer) {
		return ctrl.Result{}, nil
	}
	if b.Annotations[etcdv1beta1.AnnotationDeleteSnapshot] == "true" && b.Status.Phase == etcdv1beta1.BackupSucceeded && b.Status.Key != "" {
		res, done, err := r.deleteSnapshot(ctx, b)
		if err != nil || !done {
			return res, err
		}
	}
	controllerutil.RemoveFinalizer(b, etcdv1beta1.BackupFinalizer)
	if err := r.Update(ctx, b); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// deleteSnapshot runs the Job that deletes b's stored snapshot and manifest; done once it finished,
// failed, or cannot run (then a Warning event names what is left behind).
func (r *EtcdBackupReconciler) deleteSnapshot(ctx context.Context, b *etcdv1beta1.EtcdBackup) (ctrl.Result, bool, error) {
	leftBehind := func(why string, args ...any) (ctrl.Result, bool, error) {
		r.event(b, corev1.EventTypeWarning, "SnapshotNotDeleted", "DeleteSnapshot", "%s: %s is left in place; delete it and its manifest (.json) by hand",
			fmt.Sprintf(why, args...), b.Status.Location)
		return ctrl.Result{}, true, nil
	}
	if time.Since(b.DeletionTimestamp.Time) > deleteSnapshotGiveUp {
		return leftBehind("not deleted within %s", deleteSnapshotGiveUp)
	}
	c := &etcdv1beta1.EtcdCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterRef.Name}, c); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, false, fmt.Errorf("get cluster: %w", err)
		}
		c = nil
	}
	dest := verdict.BackupDestination(b, c)
	if dest == nil || resources.DestinationLocation(dest, b.Status.Key) != b.Status.Location {
		return leftBehind("its destination is not known any more (the EtcdBackup names none and its cluster's spec.backup.destination is gone or changed)")
	}
	if r.Options.OperatorImage == "" {
		return leftBehind("the operator does not know its own image (--operator-image)")
	}
	job := &batchv1.Job{}
	err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: resources.DeleteSnapshotJobName(b)}, job)
	if apierrors.IsNotFound(err) {
		job = r.Options.BuildDeleteSnapshotJob(b.Namespace, b.Spec.ClusterRef.Name, b, dest)
		if err := r.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
			if kube.NamespaceTerminating(err) {
				// nothing can be made in a namespace being deleted: waiting would hold the namespace's
				// deletion until deleteSnapshotGiveUp
				log.FromContext(ctx).Info("the stored snapshot is left in place: its namespace is being deleted, so no Job can delete it",
					"location", b.Status.Location)
				return leftBehind("its namespace %s is being deleted, so no Job can run in it", b.Namespace)
			}
			return ctrl.Result{}, false, fmt.Errorf("create job %s: %w", job.Name, err)
		}
		r.event(b, corev1.EventTypeNormal, "DeletingSnapshot", "DeleteSnapshot", "Created Job %s to delete %s", job.Name, b.Status.Location)
		return ctrl.Result{RequeueAfter: requeueSnapshotDelete}, false, nil
	}
	if err != nil {
		return ctrl.Result{}, false, fmt.Errorf("get job: %w", err)
	}
	if !metav1.IsControlledBy(job, b) {
		return leftBehind("Job %s exists and does not belong to this EtcdBackup", job.Name)
	}
	if ok, _ := verdict.JobCondition(job, batchv1.JobComplete); ok {
		r.event(b, corev1.EventTypeNormal, "SnapshotDeleted", "DeleteSnapshot", "Deleted %s and its manifest", b.Status.Location)
		return ctrl.Result{}, true, nil
	}
	if ok, why := verdict.JobCondition(job, batchv1.JobFailed); ok {
		if msg, _, err := r.terminationMessage(ctx, job, false); err == nil && msg != "" {
			why = msg
		}
		return leftBehind("Job %s failed: %s", job.Name, why)
	}
	return ctrl.Result{RequeueAfter: requeueSnapshotDelete}, false, nil
}
