package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// DefaultRecoveryDelay is how long a quorum loss without data must last before an automatic restore
// starts.
const DefaultRecoveryDelay = 30 * time.Second

func (r *EtcdClusterReconciler) recoveryDelay() time.Duration {
	if r.RecoveryDelay > 0 {
		return r.RecoveryDelay
	}
	return DefaultRecoveryDelay
}

// latest reports whether c is the newest version of the cluster in the API server (read uncached):
// destructive recovery steps are taken only on it, never on a stale cached copy that may not show a
// step already taken.
func (r *EtcdClusterReconciler) latest(ctx context.Context, c *etcdv1beta1.EtcdCluster) (bool, error) {
	reader := r.uncached()
	cur := &etcdv1beta1.EtcdCluster{}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(c), cur); err != nil {
		return false, fmt.Errorf("read the latest etcdcluster: %w", err)
	}
	return cur.ResourceVersion == c.ResourceVersion, nil
}

// reconcileRecovery carries an automatic restore on (status.recovery): it deletes the lost cluster's
// member pods and claims, then lets bootstrap create every member from the snapshot with a new cluster
// token, and marks the restore Succeeded once the new cluster answers. While it is deleting, turning
// spec.recovery.restoreOnQuorumLoss off or the lost cluster answering again cancels it.
func (r *EtcdClusterReconciler) reconcileRecovery(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	rec := c.Status.Recovery
	// every step of a restore is taken on the newest cluster only: a stale copy may not show the step
	// before (and would delete what the restore created, or report success twice)
	if !verdict.Recovering(c) {
		return nil, nil
	}
	if ok, err := r.latest(ctx, c); err != nil || !ok {
		return verdict.StaleCopy(), err
	}
	answering := "" // the ID of the cluster that answers, if any
	if s.m.Answered() {
		answering = etcd.FormatID(s.m.Etcd.ClusterID)
	}
	if rec.Phase == etcdv1beta1.RecoveryDeleting && answering != "" && answering != rec.PreviousClusterID {
		rec.Phase = etcdv1beta1.RecoveryRestoring // the restored cluster answers: nothing of the lost one is left
	}
	if rec.Phase == etcdv1beta1.RecoveryDeleting {
		return r.deleteLostCluster(ctx, s, answering)
	}
	if answering != "" {
		if answering != rec.PreviousClusterID {
			now := metav1.Now()
			rec.Phase, rec.CompletionTime = etcdv1beta1.RecoverySucceeded, &now
			metrics.QuorumRestores.WithLabelValues("succeeded").Inc()
			r.event(c, corev1.EventTypeNormal, "RestoredFromBackup", "Recover",
				"Recreated the cluster from EtcdBackup %s (revision %d) in %s: new cluster ID %s", rec.Backup, rec.Revision,
				now.Sub(rec.StartTime.Time).Round(time.Second), answering)
			return verdict.Acting(etcdv1beta1.ReasonRestoringFromBackup, fmt.Sprintf(
				"Recreated the cluster from EtcdBackup %s: new cluster ID %s", rec.Backup, answering)), nil
		}
		return verdict.Stalled(etcdv1beta1.ReasonRestoringFromBackup, fmt.Sprintf(
			"A member of the lost cluster %s answers while the cluster is being restored from EtcdBackup %s: delete its pod", rec.PreviousClusterID, rec.Backup)), nil
	}
	return nil, nil // bootstrap creates the members that restore the snapshot
}

// deleteLostCluster is the first step of an automatic restore: it deletes the lost cluster's member
// pods and claims and, once they are gone, records that the restore moves on to recreating the
// members. The lost cluster answering again (answering is the ID of the cluster that answers, if any)
// or spec.recovery.restoreOnQuorumLoss turned off cancels the restore.
func (r *EtcdClusterReconciler) deleteLostCluster(ctx context.Context, s *scope, answering string) (*verdict.Step, error) {
	c := s.cluster
	rec := c.Status.Recovery
	switch {
	case answering != "" && answering == rec.PreviousClusterID:
		return r.cancelRecovery(s, "the lost cluster answers again")
	case !verdict.OptedIn(c):
		return r.cancelRecovery(s, "spec.recovery.restoreOnQuorumLoss was turned off")
	}
	left, retained, err := r.deleteLostMembers(ctx, s)
	if err != nil {
		return nil, err
	}
	if len(retained) > 0 {
		return verdict.Blocked(etcdv1beta1.ReasonRestoringFromBackup, fmt.Sprintf(
			"Recreating the cluster from EtcdBackup %s waits: claims %s hold the lost cluster's data and storage.retainPolicy is Retain; copy what you need, then delete them",
			rec.Backup, strings.Join(retained, ", "))), nil
	}
	if len(left) > 0 {
		return verdict.Acting(etcdv1beta1.ReasonRestoringFromBackup, fmt.Sprintf(
			"Recreating the cluster from EtcdBackup %s: waiting for the lost cluster's %s to go (a pod stuck terminating on an unreachable node must be force-deleted)", rec.Backup, strings.Join(left, ", "))), nil
	}
	rec.Phase = etcdv1beta1.RecoveryRestoring
	// the lost cluster's identity goes with it: the members are recreated as a new cluster
	c.Status.ClusterID, c.Status.Members = "", nil
	// recorded before any member is created, so that no later pass takes it for the lost cluster's
	if st, err := r.recordStatus(ctx, c, "that the lost cluster's members are deleted"); err != nil || st != nil {
		return st, err
	}
	who := membership.CountMembers(int(c.Spec.ReplicasOrDefault()))
	r.event(c, corev1.EventTypeNormal, etcdv1beta1.ReasonRestoringFromBackup, "Recover",
		"Deleted the lost cluster's members; creating %s that restore EtcdBackup %s", who, rec.Backup)
	return verdict.Acting(etcdv1beta1.ReasonRestoringFromBackup, fmt.Sprintf("Creating %s that restore EtcdBackup %s", who, rec.Backup)), nil
}

// recordStatus writes c's status at once, with the resourceVersion this pass read, so that a recovery
// step is announced (event, metric) and acted on only once it is recorded. A conflict (a newer cluster
// exists) asks for another look soon instead of an error.
func (r *EtcdClusterReconciler) recordStatus(ctx context.Context, c *etcdv1beta1.EtcdCluster, what string) (*verdict.Step, error) {
	err := r.Status().Update(ctx, c)
	switch {
	case err == nil:
		return nil, nil
	case apierrors.IsConflict(err):
		return verdict.StaleCopy(), nil
	default:
		return nil, fmt.Errorf("record %s: %w", what, err)
	}
}

// cancelRecovery forgets an automatic restore that is still deleting the lost cluster.
func (r *EtcdClusterReconciler) cancelRecovery(s *scope, why string) (*verdict.Step, error) {
	c := s.cluster
	backupName := c.Status.Recovery.Backup
	c.Status.Recovery = nil
	r.event(c, corev1.EventTypeNormal, etcdv1beta1.ReasonRestoreCancelled, "Recover", "Cancelled the restore of EtcdBackup %s: %s; what was already deleted stays deleted", backupName, why)
	return verdict.Acting(etcdv1beta1.ReasonRestoreCancelled, fmt.Sprintf("Cancelled the restore of EtcdBackup %s: %s", backupName, why)), nil
}

// deleteLostMembers deletes every member pod and claim of the cluster and returns those not gone yet.
// With storage.retainPolicy Retain it deletes no claim and returns, sorted, those the user must delete.
func (r *EtcdClusterReconciler) deleteLostMembers(ctx context.Context, s *scope) (left, retained []string, err error) {
	c := s.cluster
	for _, m := range s.m.Pods() {
		name, p := m.Name, m.Pod
		left = append(left, "pod "+name)
		if p.DeletionTimestamp != nil {
			continue
		}
		if err := r.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, nil, fmt.Errorf("delete pod %s: %w", name, err)
		}
	}
	for _, m := range s.m.Claims() {
		name, pvc := m.Claim.Name, m.Claim
		left = append(left, "claim "+name)
		if pvc.DeletionTimestamp != nil {
			continue
		}
		if c.Spec.Storage.RetainPolicy == etcdv1beta1.RetainPolicyRetain {
			retained = append(retained, name)
			continue
		}
		if err := r.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, nil, fmt.Errorf("delete persistentvolumeclaim %s: %w", name, err)
		}
	}
	sort.Strings(left)
	sort.Strings(retained)
	return left, retained, nil
}
