package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/backup/policy"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// Labels the Job controller puts on a Job's pods.
const jobControllerUIDLabel = "batch.kubernetes.io/controller-uid"

// podResultGrace is how long after its Job finished a pod's termination message may still be missing
// from the cache (pods and Jobs are watched separately) before the backup is decided without it.
const podResultGrace = 30 * time.Second

// observeJob sets b's status from its Job: Running while it runs, Succeeded with the result the pod
// wrote as its termination message, or Failed with the failure message it wrote.
func (r *EtcdBackupReconciler) observeJob(ctx context.Context, b *etcdv1beta1.EtcdBackup, job *batchv1.Job) ctrl.Result {
	complete, _ := verdict.JobCondition(job, batchv1.JobComplete)
	failed, failedMsg := verdict.JobCondition(job, batchv1.JobFailed)
	finishedRecently := time.Since(verdict.JobFinishTime(job)) < podResultGrace
	switch {
	case complete:
		msg, _, err := r.terminationMessage(ctx, job, true)
		if err != nil && finishedRecently {
			return ctrl.Result{RequeueAfter: requeueCacheLag}
		}
		if err != nil {
			r.fail(b, fmt.Sprintf("the backup Job %s completed but its result cannot be read: %v", job.Name, err))
			return ctrl.Result{}
		}
		var res policy.Result
		if err := json.Unmarshal([]byte(msg), &res); err != nil || res.SHA256 == "" {
			r.fail(b, fmt.Sprintf("the backup Job %s completed but its result is not a backup result: %q", job.Name, verdict.Truncate(msg, 200)))
			return ctrl.Result{}
		}
		r.succeed(b, job, res)
	case failed:
		msg, _, err := r.terminationMessage(ctx, job, false)
		if err != nil && finishedRecently {
			return ctrl.Result{RequeueAfter: requeueCacheLag}
		}
		if err != nil || msg == "" {
			msg = fmt.Sprintf("the backup Job %s failed: %s", job.Name, failedMsg)
		}
		r.fail(b, msg)
	default:
		if b.Status.Phase != etcdv1beta1.BackupRunning {
			b.Status.Phase = etcdv1beta1.BackupRunning
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
			if w := cs.State.Waiting; w != nil && verdict.StuckWaitingReasons[w.Reason] {
				return fmt.Sprintf("pod %s: container %s waits: %s: %s", p.Name, cs.Name, w.Reason, verdict.Truncate(w.Message, 200))
			}
		}
	}
	return ""
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
