package controller

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// Requeue delays of the EtcdBackup reconciler.
const (
	// requeueBackupPending is how soon a Pending backup looks again at what it waits for (the
	// cluster's and other backups' changes also wake it), and a Running one at its Job's pods.
	requeueBackupPending = 10 * time.Second
	// requeueSnapshotDelete is how often a deleted backup checks its delete-snapshot Job.
	requeueSnapshotDelete = 5 * time.Second
	// requeueCacheLag is how soon a pass looks again when what it read lags behind the API server: its
	// Job exists though the cache did not show it, the pod result of a Job that just finished is not
	// in the cache yet, or the backup changed while the pass worked on an older copy (a Conflict).
	requeueCacheLag = time.Second
)

// EtcdBackupReconciler runs each EtcdBackup as a Job (`etcd-operator backup` in the operator's image),
// one at a time per cluster in creation order, and reports the Job's result into the EtcdBackup's
// status. When an EtcdBackup with the etcd.etcdkit.dev/delete-snapshot annotation is deleted, a Job
// deletes its stored snapshot first.
type EtcdBackupReconciler struct {
	client.Client
	// Recorder records events on EtcdBackups.
	Recorder events.EventRecorder
	// Options are the operator's settings; Options.OperatorImage is the image Jobs run.
	Options resources.Options

	apiReader client.Reader // uncached: whether a Job the cache does not hold yet exists
}

// +kubebuilder:rbac:groups=etcd.etcdkit.dev,resources=etcdbackups,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=etcd.etcdkit.dev,resources=etcdbackups/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=etcd.etcdkit.dev,resources=etcdbackups/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete

// Reconcile moves one EtcdBackup along Pending → Running → Succeeded or Failed. Like the EtcdCluster
// reconciler, it writes the status once per pass, only when it changed and with an optimistic lock,
// and advances observedGeneration only on a pass that succeeded.
func (r *EtcdBackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &etcdv1beta1.EtcdBackup{}
	if err := r.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		return r.reconcileBackupDelete(ctx, b)
	}
	if controllerutil.AddFinalizer(b, etcdv1beta1.BackupFinalizer) {
		if err := r.Update(ctx, b); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
		return ctrl.Result{}, nil // the update brings a new event
	}
	if verdict.BackupFinished(b) {
		return ctrl.Result{}, nil
	}
	before := b.Status.DeepCopy()
	res, err := r.reconcileJob(ctx, b)
	if err != nil {
		// a failed pass records nothing: what it decided may rest on what it could not read, and
		// observedGeneration must not claim that the generation was acted on
		b.Status = *before
		return ctrl.Result{}, err
	}
	b.Status.ObservedGeneration = b.Generation
	if err := r.patchStatus(ctx, b, before); err != nil {
		if apierrors.IsConflict(err) {
			// the pass worked on a stale copy: look again at the newest one, without an error
			return ctrl.Result{RequeueAfter: requeueCacheLag}, nil
		}
		return ctrl.Result{}, err
	}
	return res, nil
}

// patchStatus writes b's status, in one patch, when it differs from what the pass started with.
func (r *EtcdBackupReconciler) patchStatus(ctx context.Context, b *etcdv1beta1.EtcdBackup, before *etcdv1beta1.EtcdBackupStatus) error {
	if equality.Semantic.DeepEqual(before, &b.Status) {
		return nil
	}
	orig := b.DeepCopy()
	orig.Status = *before
	// with the resourceVersion the pass read: a pass that worked on a stale copy must not put back
	// what a newer pass wrote (a Running phase over Succeeded, an older message)
	if err := r.Status().Patch(ctx, b, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status: %w", err)
	}
	return nil
}

// event records an event on b, when the reconciler has a recorder.
func (r *EtcdBackupReconciler) event(b *etcdv1beta1.EtcdBackup, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(b, nil, eventType, reason, action, note, args...)
	}
}

// unfinishedBackupsOf returns requests for the unfinished backups of the cluster named name in ns.
func (r *EtcdBackupReconciler) unfinishedBackupsOf(ctx context.Context, ns, name string, except types.UID) []reconcile.Request {
	list := &etcdv1beta1.EtcdBackupList{}
	if err := r.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, b := range list.Items {
		if b.Spec.ClusterRef.Name == name && b.UID != except && !verdict.BackupFinished(&b) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: b.Name}})
		}
	}
	return reqs
}

// SetupWithManager registers the reconciler: it watches EtcdBackups, the Jobs they own, and wakes
// a cluster's waiting backups when the cluster or another of its backups changes.
func (r *EtcdBackupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.apiReader = mgr.GetAPIReader()
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1beta1.EtcdBackup{}).
		Owns(&batchv1.Job{}).
		Watches(&etcdv1beta1.EtcdCluster{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.unfinishedBackupsOf(ctx, o.GetNamespace(), o.GetName(), "")
		})).
		Watches(&etcdv1beta1.EtcdBackup{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			b, ok := o.(*etcdv1beta1.EtcdBackup)
			if !ok {
				return nil
			}
			return r.unfinishedBackupsOf(ctx, b.Namespace, b.Spec.ClusterRef.Name, b.UID)
		})).
		Named("etcdbackup").
		Complete(r)
}
