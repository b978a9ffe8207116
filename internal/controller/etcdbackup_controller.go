package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/backup"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// Delays and bounds of the EtcdBackup reconciler.
const (
	// requeueBackupPending is how soon a Pending backup looks again at what it waits for (the
	// cluster's and other backups' changes also wake it).
	requeueBackupPending = 10 * time.Second
	// requeueSnapshotDelete is how often a deleted backup checks its delete-snapshot Job.
	requeueSnapshotDelete = 5 * time.Second
	// deleteSnapshotGiveUp is how long a deleted backup waits for its stored snapshot to be deleted
	// before it lets go with a Warning event naming what is left.
	deleteSnapshotGiveUp = 15 * time.Minute
)

// Labels the Job controller puts on a Job's pods.
const jobControllerUIDLabel = "batch.kubernetes.io/controller-uid"

// Reasons of EtcdBackup conditions and events.
const (
	reasonSnapshotStored = "SnapshotStored"
	reasonBackupFailed   = "BackupFailed"
	reasonBackupRunning  = "BackupRunning"
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
}

// +kubebuilder:rbac:groups=etcd.etcdkit.dev,resources=etcdbackups,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=etcd.etcdkit.dev,resources=etcdbackups/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=etcd.etcdkit.dev,resources=etcdbackups/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete

// Reconcile moves one EtcdBackup along Pending → Running → Succeeded or Failed.
func (r *EtcdBackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &etcdv1alpha1.EtcdBackup{}
	if err := r.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		return r.reconcileBackupDelete(ctx, b)
	}
	if controllerutil.AddFinalizer(b, etcdv1alpha1.BackupFinalizer) {
		if err := r.Update(ctx, b); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
		return ctrl.Result{}, nil // the update brings a new event
	}
	if backupFinished(b) {
		return ctrl.Result{}, nil
	}
	before := b.Status.DeepCopy()
	res, err := r.step(ctx, b)
	b.Status.ObservedGeneration = b.Generation
	if !equality.Semantic.DeepEqual(before, &b.Status) {
		orig := b.DeepCopy()
		orig.Status = *before
		if perr := r.Status().Patch(ctx, b, client.MergeFrom(orig)); perr != nil && !apierrors.IsNotFound(perr) {
			err = errors.Join(err, fmt.Errorf("patch status: %w", perr))
		}
	}
	return res, err
}

// backupFinished reports whether b reached Succeeded or Failed.
func backupFinished(b *etcdv1alpha1.EtcdBackup) bool {
	return b.Status.Phase == etcdv1alpha1.BackupSucceeded || b.Status.Phase == etcdv1alpha1.BackupFailed
}

// step creates b's Job once b may run, or reads the result of the Job it has.
func (r *EtcdBackupReconciler) step(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (ctrl.Result, error) {
	job := &batchv1.Job{}
	err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: resources.BackupJobName(b)}, job)
	switch {
	case err == nil && !metav1.IsControlledBy(job, b):
		setPending(b, fmt.Sprintf("Job %s exists and does not belong to this EtcdBackup: delete it, or create the backup under another name", job.Name))
		return ctrl.Result{RequeueAfter: requeueBlocked}, nil
	case err == nil:
		return r.observeJob(ctx, b, job), nil
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("get job: %w", err)
	}
	if b.Status.Phase == etcdv1alpha1.BackupRunning {
		r.fail(b, fmt.Sprintf("the backup Job %s was deleted before it finished; create another EtcdBackup", resources.BackupJobName(b)))
		return ctrl.Result{}, nil
	}
	if b.Labels[etcdv1alpha1.LabelFinalSnapshot] == "true" {
		// the final snapshot of a cluster that is gone can never be taken: say so instead of waiting
		err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterRef.Name}, &etcdv1alpha1.EtcdCluster{})
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
		setPending(b, wait)
		return ctrl.Result{RequeueAfter: requeueBackupPending}, nil
	}
	job = r.Options.BuildBackupJob(c, b, dest)
	if err := r.Create(ctx, job); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		return ctrl.Result{}, fmt.Errorf("create job %s: %w", job.Name, err)
	}
	now := metav1.Now()
	b.Status.Phase = etcdv1alpha1.BackupRunning
	b.Status.StartTime = &now
	b.Status.Message = fmt.Sprintf("Job %s is taking the snapshot, to %s", job.Name, resources.DestinationLocation(dest, mustKey(b)))
	setBackupCondition(b, etcdv1alpha1.BackupConditionComplete, false, reasonBackupRunning, b.Status.Message)
	r.event(b, corev1.EventTypeNormal, "Started", "Backup", "Created Job %s to back up EtcdCluster %s", job.Name, c.Name)
	return ctrl.Result{}, nil
}

// mustKey is b's key in its destination, "" when b's names cannot form one.
func mustKey(b *etcdv1alpha1.EtcdBackup) string {
	k, _ := backup.Key(b.Namespace, b.Spec.ClusterRef.Name, b.Name)
	return k
}

// setPending records what b waits for.
func setPending(b *etcdv1alpha1.EtcdBackup, why string) {
	b.Status.Phase = etcdv1alpha1.BackupPending
	b.Status.Message = why
}

// backupDestination is b's destination: its own, else its cluster's spec.backup.destination; nil
// when neither names one.
func backupDestination(b *etcdv1alpha1.EtcdBackup, c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.BackupDestination {
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

// mayRun returns b's cluster and destination when b may start now, or why it waits: its cluster is
// missing or not Available, it has no destination, the operator's image is unknown, or another
// backup of the same cluster runs or was created earlier (backups of one cluster run one at a time,
// in creation order).
func (r *EtcdBackupReconciler) mayRun(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (*etcdv1alpha1.EtcdCluster, *etcdv1alpha1.BackupDestination, string, error) {
	c := &etcdv1alpha1.EtcdCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterRef.Name}, c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Sprintf("EtcdCluster %s does not exist in namespace %s", b.Spec.ClusterRef.Name, b.Namespace), nil
		}
		return nil, nil, "", fmt.Errorf("get cluster: %w", err)
	}
	if _, err := backup.Key(b.Namespace, c.Name, b.Name); err != nil {
		return nil, nil, fmt.Sprintf("the backup cannot be stored under its name: %v", err), nil
	}
	dest := backupDestination(b, c)
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
	// a cluster that refuses writes (NOSPACE) still serves snapshots, and one is most wanted then
	if a := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable); a == nil || (a.Status != metav1.ConditionTrue && a.Reason != etcdv1alpha1.ReasonNoSpace) {
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
func (r *EtcdBackupReconciler) blockingBackup(ctx context.Context, b *etcdv1alpha1.EtcdBackup, c *etcdv1alpha1.EtcdCluster) (string, error) {
	list := &etcdv1alpha1.EtcdBackupList{}
	if err := r.List(ctx, list, client.InNamespace(b.Namespace)); err != nil {
		return "", fmt.Errorf("list backups: %w", err)
	}
	var earlier []*etcdv1alpha1.EtcdBackup
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID == b.UID || o.Spec.ClusterRef.Name != b.Spec.ClusterRef.Name || backupFinished(o) || !o.DeletionTimestamp.IsZero() {
			continue
		}
		if o.Status.Phase == etcdv1alpha1.BackupRunning {
			return fmt.Sprintf("waiting for backup %s of the same cluster, which is running: backups of one cluster run one at a time", o.Name), nil
		}
		if createdBefore(o, b) && backupDestination(o, c) != nil {
			earlier = append(earlier, o)
		}
	}
	jobs := &batchv1.JobList{}
	if err := r.List(ctx, jobs, client.InNamespace(b.Namespace), client.MatchingLabels{
		etcdv1alpha1.LabelCluster: resources.ShortName(c.Name, 63), "app.kubernetes.io/name": "etcd-backup",
	}); err != nil {
		return "", fmt.Errorf("list jobs: %w", err)
	}
	for _, j := range jobs.Items {
		if !jobFinished(&j) && !metav1.IsControlledBy(&j, b) && j.DeletionTimestamp.IsZero() {
			return fmt.Sprintf("waiting for Job %s of the same cluster to finish: backups of one cluster run one at a time", j.Name), nil
		}
	}
	if len(earlier) > 0 {
		first := slices.MinFunc(earlier, func(x, y *etcdv1alpha1.EtcdBackup) int {
			if createdBefore(x, y) {
				return -1
			}
			return 1
		})
		return fmt.Sprintf("waiting for backup %s of the same cluster, created earlier: backups of one cluster run one at a time, in creation order", first.Name), nil
	}
	return "", nil
}

// createdBefore orders backups by creation time, then name.
func createdBefore(x, y *etcdv1alpha1.EtcdBackup) bool {
	if c := x.CreationTimestamp.Compare(y.CreationTimestamp.Time); c != 0 {
		return c < 0
	}
	return cmp.Less(x.Name, y.Name)
}

// jobCondition reports whether the Job has condition t True, and its message.
func jobCondition(j *batchv1.Job, t batchv1.JobConditionType) (bool, string) {
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

// jobFinished reports whether a Job completed or failed.
func jobFinished(j *batchv1.Job) bool {
	done, _ := jobCondition(j, batchv1.JobComplete)
	failed, _ := jobCondition(j, batchv1.JobFailed)
	return done || failed
}

// podResultGrace is how long after its Job finished a pod's termination message may still be missing
// from the cache (pods and Jobs are watched separately) before the backup is decided without it.
const podResultGrace = 30 * time.Second

// observeJob sets b's status from its Job: Running while it runs, Succeeded with the result the pod
// wrote as its termination message, or Failed with the failure message it wrote.
func (r *EtcdBackupReconciler) observeJob(ctx context.Context, b *etcdv1alpha1.EtcdBackup, job *batchv1.Job) ctrl.Result {
	complete, _ := jobCondition(job, batchv1.JobComplete)
	failed, failedMsg := jobCondition(job, batchv1.JobFailed)
	finishedRecently := time.Since(jobFinishTime(job)) < podResultGrace
	switch {
	case complete:
		msg, _, err := r.terminationMessage(ctx, job, true)
		if err != nil && finishedRecently {
			return ctrl.Result{RequeueAfter: time.Second}
		}
		if err != nil {
			r.fail(b, fmt.Sprintf("the backup Job %s completed but its result cannot be read: %v", job.Name, err))
			return ctrl.Result{}
		}
		var res backup.Result
		if err := json.Unmarshal([]byte(msg), &res); err != nil || res.SHA256 == "" {
			r.fail(b, fmt.Sprintf("the backup Job %s completed but its result is not a backup result: %q", job.Name, truncate(msg, 200)))
			return ctrl.Result{}
		}
		r.succeed(b, job, res)
	case failed:
		msg, _, err := r.terminationMessage(ctx, job, false)
		if err != nil && finishedRecently {
			return ctrl.Result{RequeueAfter: time.Second}
		}
		if err != nil || msg == "" {
			msg = fmt.Sprintf("the backup Job %s failed: %s", job.Name, failedMsg)
		}
		r.fail(b, msg)
	default:
		if b.Status.Phase != etcdv1alpha1.BackupRunning {
			b.Status.Phase = etcdv1alpha1.BackupRunning
			start := job.CreationTimestamp
			b.Status.StartTime = &start
		}
		msg := fmt.Sprintf("Job %s is taking the snapshot", job.Name)
		if job.Status.Failed > 0 {
			msg += fmt.Sprintf(" (%d pod(s) failed and were replaced)", job.Status.Failed)
		}
		if stuck := r.stuckJobPod(ctx, job); stuck != "" {
			// a pod that cannot start changes nothing the Job reports: look again while it waits
			b.Status.Message = msg + "; " + stuck + ": fix that, or delete this EtcdBackup"
			return ctrl.Result{RequeueAfter: requeueBackupPending}
		}
		if !strings.HasPrefix(b.Status.Message, msg) || strings.Contains(b.Status.Message, "; ") {
			b.Status.Message = msg
		}
		return ctrl.Result{RequeueAfter: requeueBackupPending}
	}
	return ctrl.Result{}
}

// stuckJobPod says why a pod of the job cannot start, "" when none is stuck: it cannot be scheduled
// (a missing claim, no node with room), or a container waits on its image or its configuration.
func (r *EtcdBackupReconciler) stuckJobPod(ctx context.Context, job *batchv1.Job) string {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{jobControllerUIDLabel: string(job.UID)}); err != nil {
		return ""
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodPending || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return fmt.Sprintf("pod %s cannot be scheduled: %s", p.Name, c.Message)
			}
		}
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil && stuckWaitingReasons[w.Reason] {
				return fmt.Sprintf("pod %s: container %s waits: %s: %s", p.Name, cs.Name, w.Reason, truncate(w.Message, 200))
			}
		}
	}
	return ""
}

// stuckWaitingReasons are the reasons kubelet gives for a container that will not start without
// someone fixing something.
var stuckWaitingReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true,
}

// jobFinishTime is when the Job completed or failed (its finishing condition's transition).
func jobFinishTime(j *batchv1.Job) time.Time {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// terminationMessage returns the termination message of the backup container of the job's newest
// pod that ended (with exit code 0 when succeeded, else non-zero), and that pod's name.
func (r *EtcdBackupReconciler) terminationMessage(ctx context.Context, job *batchv1.Job, succeeded bool) (string, string, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{jobControllerUIDLabel: string(job.UID)}); err != nil {
		return "", "", fmt.Errorf("list pods: %w", err)
	}
	var best *corev1.ContainerStateTerminated
	var bestPod string
	for i := range pods.Items {
		for _, cs := range pods.Items[i].Status.ContainerStatuses {
			t := cs.State.Terminated
			if cs.Name != resources.BackupContainerName || t == nil || (t.ExitCode == 0) != succeeded {
				continue
			}
			if best == nil || t.FinishedAt.After(best.FinishedAt.Time) {
				best, bestPod = t, pods.Items[i].Name
			}
		}
	}
	if best == nil {
		return "", "", fmt.Errorf("no pod of Job %s has ended (its pods were deleted?)", job.Name)
	}
	msg := strings.TrimSpace(best.Message)
	if msg == "" && !succeeded {
		msg = fmt.Sprintf("backup failed: pod %s exited with code %d (%s) without a message: see its logs", bestPod, best.ExitCode, best.Reason)
	}
	return msg, bestPod, nil
}

// succeed records a complete backup.
func (r *EtcdBackupReconciler) succeed(b *etcdv1alpha1.EtcdBackup, job *batchv1.Job, res backup.Result) {
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
	setBackupCondition(b, etcdv1alpha1.BackupConditionComplete, true, reasonSnapshotStored, st.Message)
	setBackupCondition(b, etcdv1alpha1.BackupConditionFailed, false, reasonSnapshotStored, "The backup succeeded")
	r.event(b, corev1.EventTypeNormal, "Succeeded", "Backup", "%s", st.Message)
	if d := res.CompletionTime.Sub(res.StartTime); d >= 0 {
		backupDuration.WithLabelValues(b.Namespace, b.Spec.ClusterRef.Name).Observe(d.Seconds())
	}
}

// jobLocation is where the Job stored the backup: "pvc://<claim>/<subPath>/<key>" for a claim, the
// result's own location ("s3://<bucket>/<prefix>/<key>") otherwise.
func jobLocation(job *batchv1.Job, res backup.Result) string {
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

// fail records a failed backup, with an event; it is not retried.
func (r *EtcdBackupReconciler) fail(b *etcdv1alpha1.EtcdBackup, msg string) {
	now := metav1.Now()
	b.Status.Phase = etcdv1alpha1.BackupFailed
	b.Status.CompletionTime = &now
	b.Status.Message = msg
	setBackupCondition(b, etcdv1alpha1.BackupConditionFailed, true, reasonBackupFailed, msg)
	setBackupCondition(b, etcdv1alpha1.BackupConditionComplete, false, reasonBackupFailed, "The backup failed")
	r.event(b, corev1.EventTypeWarning, reasonBackupFailed, "Backup", "%s", msg)
	backupFailures.WithLabelValues(b.Namespace, b.Spec.ClusterRef.Name).Inc()
}

// setBackupCondition sets a condition of b; its lastTransitionTime changes only with its status.
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

// reconcileBackupDelete removes the finalizer of a deleted backup, after deleting its stored snapshot
// when the etcd.etcdkit.dev/delete-snapshot annotation asks for it. It never holds the EtcdBackup
// longer than deleteSnapshotGiveUp.
func (r *EtcdBackupReconciler) reconcileBackupDelete(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b, etcdv1alpha1.BackupFinalizer) {
		return ctrl.Result{}, nil
	}
	if b.Annotations[etcdv1alpha1.AnnotationDeleteSnapshot] == "true" && b.Status.Phase == etcdv1alpha1.BackupSucceeded && b.Status.Key != "" {
		res, done, err := r.deleteSnapshot(ctx, b)
		if err != nil || !done {
			return res, err
		}
	}
	controllerutil.RemoveFinalizer(b, etcdv1alpha1.BackupFinalizer)
	if err := r.Update(ctx, b); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// deleteSnapshot runs the Job that deletes b's stored snapshot and manifest; done once it finished,
// failed, or cannot run (then a Warning event names what is left behind).
func (r *EtcdBackupReconciler) deleteSnapshot(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (ctrl.Result, bool, error) {
	leftBehind := func(why string, args ...any) (ctrl.Result, bool, error) {
		r.event(b, corev1.EventTypeWarning, "SnapshotNotDeleted", "DeleteSnapshot", "%s: %s is left in place; delete it and its manifest (.json) by hand",
			fmt.Sprintf(why, args...), b.Status.Location)
		return ctrl.Result{}, true, nil
	}
	if time.Since(b.DeletionTimestamp.Time) > deleteSnapshotGiveUp {
		return leftBehind("not deleted within %s", deleteSnapshotGiveUp)
	}
	c := &etcdv1alpha1.EtcdCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterRef.Name}, c); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, false, fmt.Errorf("get cluster: %w", err)
		}
		c = nil
	}
	dest := backupDestination(b, c)
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
	if ok, _ := jobCondition(job, batchv1.JobComplete); ok {
		r.event(b, corev1.EventTypeNormal, "SnapshotDeleted", "DeleteSnapshot", "Deleted %s and its manifest", b.Status.Location)
		return ctrl.Result{}, true, nil
	}
	if ok, why := jobCondition(job, batchv1.JobFailed); ok {
		if msg, _, err := r.terminationMessage(ctx, job, false); err == nil && msg != "" {
			why = msg
		}
		return leftBehind("Job %s failed: %s", job.Name, why)
	}
	return ctrl.Result{RequeueAfter: requeueSnapshotDelete}, false, nil
}

func (r *EtcdBackupReconciler) event(b *etcdv1alpha1.EtcdBackup, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(b, nil, eventType, reason, action, note, args...)
	}
}

// unfinishedBackupsOf returns requests for the unfinished backups of the cluster named name in ns.
func (r *EtcdBackupReconciler) unfinishedBackupsOf(ctx context.Context, ns, name string, except types.UID) []reconcile.Request {
	list := &etcdv1alpha1.EtcdBackupList{}
	if err := r.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, b := range list.Items {
		if b.Spec.ClusterRef.Name == name && b.UID != except && !backupFinished(&b) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: b.Name}})
		}
	}
	return reqs
}

// SetupWithManager registers the reconciler: it watches EtcdBackups, the Jobs they own, and wakes
// a cluster's waiting backups when the cluster or another of its backups changes.
func (r *EtcdBackupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdBackup{}).
		Owns(&batchv1.Job{}).
		Watches(&etcdv1alpha1.EtcdCluster{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.unfinishedBackupsOf(ctx, o.GetNamespace(), o.GetName(), "")
		})).
		Watches(&etcdv1alpha1.EtcdBackup{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			b, ok := o.(*etcdv1alpha1.EtcdBackup)
			if !ok {
				return nil
			}
			return r.unfinishedBackupsOf(ctx, b.Namespace, b.Spec.ClusterRef.Name, b.UID)
		})).
		Named("etcdbackup").
		Complete(r)
}
