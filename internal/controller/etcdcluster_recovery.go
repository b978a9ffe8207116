package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/version"
)

// quorumRestores counts the automatic restores after a quorum loss without data, by result
// (started, succeeded).
var quorumRestores = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "etcd_operator_quorum_loss_restores_total",
	Help: "Clusters recreated from a backup after a quorum loss without data (spec.recovery.restoreOnQuorumLoss), by result.",
}, []string{"result"})

func init() { metrics.Registry.MustRegister(quorumRestores) }

// dataLoss is the verdict on a cluster that does not answer: which of its voting members still have
// their data.
type dataLoss struct {
	// voters are the voting members etcd last listed (status.members), by name.
	voters []string
	// lost are the voters whose data is gone: their claim is missing or being deleted, or, for
	// storage.emptyDir, their pod is (an emptyDir lives and dies with its pod).
	lost []string
}

// quorum is the number of voters a quorum of the last listed voters needs.
func (d dataLoss) quorum() int { return len(d.voters)/2 + 1 }

// kept is the number of voters whose data is still there.
func (d dataLoss) kept() int { return len(d.voters) - len(d.lost) }

// permanent reports whether quorum can never come back by itself: fewer voters than a quorum keep
// their data. A voter without its data must never vote again (it would have forgotten what it
// acknowledged), so no restart of any pod can bring the quorum back.
func (d dataLoss) permanent() bool { return len(d.voters) > 0 && d.kept() < d.quorum() }

// observeDataLoss judges, from the pods and claims of the pass, which of the voters the status last
// listed have lost their data. It makes no call: it is meant for a cluster none of whose members
// answered.
func observeDataLoss(s *scope) dataLoss {
	c := s.cluster
	var d dataLoss
	for _, m := range c.Status.Members {
		if m.Role != etcdv1alpha1.RoleVoter {
			continue
		}
		d.voters = append(d.voters, m.Name)
		if !hasData(s, m.Name) {
			d.lost = append(d.lost, m.Name)
		}
	}
	sort.Strings(d.voters)
	sort.Strings(d.lost)
	return d
}

// hasData reports whether member name's data directory still exists: its claim for persistent
// storage, its pod for storage.emptyDir.
func hasData(s *scope, name string) bool {
	if s.cluster.Spec.Storage.EmptyDir != nil {
		p, ok := s.pods[name]
		return ok && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed
	}
	pvc, ok := s.pvcs[resources.PVCName(name)]
	return ok && pvc.DeletionTimestamp == nil
}

// recovering reports whether an automatic restore is under way (status.recovery not Succeeded).
func recovering(c *etcdv1alpha1.EtcdCluster) bool {
	return c.Status.Recovery != nil && c.Status.Recovery.Phase != etcdv1alpha1.RecoverySucceeded
}

// reportedDataLoss reports whether an earlier pass already found quorum lost without data (the
// Available condition says so): an automatic restore starts only on a second observation.
func reportedDataLoss(c *etcdv1alpha1.EtcdCluster) bool {
	a := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable)
	return a != nil && a.Status == metav1.ConditionFalse && a.Reason == etcdv1alpha1.ReasonQuorumDataLost
}

// quorumDataLost handles a cluster whose quorum cannot come back (DESIGN §5 item 6): it reports it in
// the Available and Progressing conditions and with a Warning event, and, only when
// spec.recovery.restoreOnQuorumLoss is set and a restorable backup exists, starts recreating the
// cluster from the newest one, on the second pass that sees the loss.
func (r *EtcdClusterReconciler) quorumDataLost(ctx context.Context, s *scope, d dataLoss) (ctrl.Result, error) {
	c := s.cluster
	what := "claims"
	if c.Spec.Storage.EmptyDir != nil {
		what = "emptyDir pods"
	}
	msg := fmt.Sprintf("Quorum is lost for good: members %s lost their data (%s gone), and the %d voting members that keep theirs are fewer than the quorum %d of %d",
		strings.Join(d.lost, ", "), what, d.kept(), d.quorum(), len(d.voters))
	first := !reportedDataLoss(c)
	report := func(tail string) {
		s.stalled = &progress{etcdv1alpha1.ReasonQuorumDataLost, msg + "; " + tail}
		if first {
			r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonQuorumDataLost, "Recover", "%s", s.stalled.message)
		}
	}
	if c.Spec.Recovery == nil || !c.Spec.Recovery.RestoreOnQuorumLoss {
		report("nothing is changed. To recover, create a new EtcdCluster with spec.bootstrap.restore naming the newest EtcdBackup, or set spec.recovery.restoreOnQuorumLoss to let the operator recreate this one from it (writes after that backup are lost)")
		return ctrl.Result{}, nil
	}
	b, why, err := r.newestRestorableBackup(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	if b == nil {
		report("spec.recovery.restoreOnQuorumLoss is set, but " + why)
		return ctrl.Result{}, nil
	}
	if c.Spec.Storage.RetainPolicy == etcdv1alpha1.RetainPolicyRetain {
		var kept []string
		for _, pvc := range s.pvcs {
			kept = append(kept, pvc.Name)
		}
		if len(kept) > 0 {
			sort.Strings(kept)
			report(fmt.Sprintf("the restore of EtcdBackup %s waits: claims %s still hold the lost cluster's data and storage.retainPolicy is Retain, so the operator does not delete them; copy what you need, then delete them", b.Name, strings.Join(kept, ", ")))
			return ctrl.Result{}, nil
		}
	}
	taken := "at an unknown time"
	if b.Status.CompletionTime != nil {
		taken = b.Status.CompletionTime.UTC().Format(time.RFC3339)
	}
	if first {
		report(fmt.Sprintf("restoring EtcdBackup %s (revision %d, taken %s) once the next pass confirms this", b.Name, b.Status.Revision, taken))
		return ctrl.Result{}, nil
	}
	c.Status.Recovery = &etcdv1alpha1.RecoveryStatus{
		Phase:                etcdv1alpha1.RecoveryDeleting,
		Backup:               b.Name,
		Key:                  b.Status.Key,
		SHA256:               b.Status.SHA256,
		Revision:             b.Status.Revision,
		BackupCompletionTime: b.Status.CompletionTime,
		PreviousClusterID:    c.Status.ClusterID,
		LostMembers:          d.lost,
		// whole seconds: the cluster token derives from it, and must read the same after a round trip
		StartTime: metav1.NewTime(time.Now().Truncate(time.Second)),
	}
	// the lost cluster's identity goes with it: the members are recreated as a new cluster
	c.Status.ClusterID, c.Status.Members = "", nil
	quorumRestores.WithLabelValues("started").Inc()
	r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonRestoringFromBackup, "Recover",
		"%s; recreating the cluster from EtcdBackup %s (revision %d, taken %s): writes after it are lost", msg, b.Name, b.Status.Revision, taken)
	// nothing is deleted before this decision is recorded in the status, at the end of this pass
	s.progress = &progress{etcdv1alpha1.ReasonRestoringFromBackup,
		fmt.Sprintf("Recreating the cluster from EtcdBackup %s after a quorum loss without data: deleting the lost cluster's members", b.Name)}
	return ctrl.Result{}, nil
}

// reconcileRecovery carries an automatic restore on (status.recovery): it deletes the lost cluster's
// member pods and claims, then bootstraps every member from the snapshot with a new cluster token,
// and marks the restore Succeeded once the new cluster answers.
func (r *EtcdClusterReconciler) reconcileRecovery(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	rec := c.Status.Recovery
	if rec.Phase == etcdv1alpha1.RecoveryDeleting {
		left, err := r.deleteLostMembers(ctx, s)
		if err != nil || s.blocked != nil {
			return ctrl.Result{}, err
		}
		if len(left) > 0 {
			s.progress = &progress{etcdv1alpha1.ReasonRestoringFromBackup, fmt.Sprintf(
				"Recreating the cluster from EtcdBackup %s: waiting for the lost cluster's %s to go (a pod stuck terminating on an unreachable node must be force-deleted)", rec.Backup, strings.Join(left, ", "))}
			return ctrl.Result{}, nil
		}
		rec.Phase = etcdv1alpha1.RecoveryRestoring
		r.event(c, corev1.EventTypeNormal, etcdv1alpha1.ReasonRestoringFromBackup, "Recover",
			"Deleted the lost cluster's members; creating %d members that restore EtcdBackup %s", c.Spec.ReplicasOrDefault(), rec.Backup)
	}
	if s.etcd != nil {
		if id := etcd.FormatID(s.etcd.clusterID); id != rec.PreviousClusterID {
			now := metav1.Now()
			rec.Phase, rec.CompletionTime = etcdv1alpha1.RecoverySucceeded, &now
			quorumRestores.WithLabelValues("succeeded").Inc()
			r.event(c, corev1.EventTypeNormal, "RestoredFromBackup", "Recover",
				"Recreated the cluster from EtcdBackup %s (revision %d) in %s: new cluster ID %s", rec.Backup, rec.Revision,
				now.Sub(rec.StartTime.Time).Round(time.Second), id)
			return r.reconcileMembership(ctx, s)
		}
		s.stalled = &progress{etcdv1alpha1.ReasonRestoringFromBackup, fmt.Sprintf(
			"A member of the lost cluster %s answers while the cluster is being restored from EtcdBackup %s: delete its pod", rec.PreviousClusterID, rec.Backup)}
		return ctrl.Result{}, nil
	}
	res, err := r.bootstrap(ctx, s)
	if s.progress != nil && s.progress.reason == etcdv1alpha1.ReasonBootstrapping {
		s.progress.reason = etcdv1alpha1.ReasonRestoringFromBackup
	}
	return res, err
}

// deleteLostMembers deletes every member pod and claim of the cluster and returns those not gone yet.
// With storage.retainPolicy Retain it deletes no claim: s.blocked says which ones the user must delete.
func (r *EtcdClusterReconciler) deleteLostMembers(ctx context.Context, s *scope) ([]string, error) {
	c := s.cluster
	var left, retained []string
	for name, p := range s.pods {
		left = append(left, "pod "+name)
		if p.DeletionTimestamp != nil {
			continue
		}
		if err := r.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("delete pod %s: %w", name, err)
		}
	}
	for name, pvc := range s.pvcs {
		left = append(left, "claim "+name)
		if pvc.DeletionTimestamp != nil {
			continue
		}
		if c.Spec.Storage.RetainPolicy == etcdv1alpha1.RetainPolicyRetain {
			retained = append(retained, name)
			continue
		}
		if err := r.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("delete persistentvolumeclaim %s: %w", name, err)
		}
	}
	sort.Strings(left)
	if len(retained) > 0 {
		sort.Strings(retained)
		s.blocked = &progress{etcdv1alpha1.ReasonRestoringFromBackup, fmt.Sprintf(
			"Recreating the cluster from EtcdBackup %s waits: claims %s hold the lost cluster's data and storage.retainPolicy is Retain; copy what you need, then delete them",
			c.Status.Recovery.Backup, strings.Join(retained, ", "))}
	}
	return left, nil
}

// newestRestorableBackup returns the newest Succeeded EtcdBackup of cluster c that the cluster's
// version can restore, or nil and why there is none. Only backups created after the EtcdCluster
// count: an earlier cluster of the same name is another cluster.
func (r *EtcdClusterReconciler) newestRestorableBackup(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (*etcdv1alpha1.EtcdBackup, string, error) {
	list := &etcdv1alpha1.EtcdBackupList{}
	if err := r.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return nil, "", fmt.Errorf("list etcdbackups: %w", err)
	}
	b, why := pickRestoreBackup(c, list.Items)
	return b, why, nil
}

// pickRestoreBackup returns, of backups, the newest (by completion time) Succeeded backup of cluster c
// created after c whose snapshot c's version can restore; otherwise nil and why.
func pickRestoreBackup(c *etcdv1alpha1.EtcdCluster, backups []etcdv1alpha1.EtcdBackup) (*etcdv1alpha1.EtcdBackup, string) {
	var best *etcdv1alpha1.EtcdBackup
	var refused []string
	for i := range backups {
		b := &backups[i]
		if b.Spec.ClusterRef.Name != c.Name || b.Status.Phase != etcdv1alpha1.BackupSucceeded || b.Status.Key == "" ||
			b.CreationTimestamp.Before(&c.CreationTimestamp) || b.Status.CompletionTime == nil {
			continue
		}
		if err := version.CheckRestore(b.Status.EtcdVersion, c.Spec.VersionOrDefault()); err != nil {
			refused = append(refused, fmt.Sprintf("%s (%v)", b.Name, err))
			continue
		}
		if best == nil || b.Status.CompletionTime.After(best.Status.CompletionTime.Time) ||
			(b.Status.CompletionTime.Equal(best.Status.CompletionTime) && b.Status.Revision > best.Status.Revision) {
			best = b
		}
	}
	if best != nil {
		return best, ""
	}
	if len(refused) > 0 {
		sort.Strings(refused)
		return nil, "no successful EtcdBackup of this cluster can be restored: " + strings.Join(refused, "; ")
	}
	return nil, "no EtcdBackup of this cluster succeeded: there is nothing to restore; create a new EtcdCluster from another snapshot with spec.bootstrap.restore.source"
}

// recoveryPlan returns the snapshot the members of an automatic restore restore: the backup's, with a
// cluster token of its own so that the recreated cluster (same member names and peer URLs) gets a new
// cluster ID. When the EtcdBackup was deleted since, its key in spec.backup.destination is used.
func (r *EtcdClusterReconciler) recoveryPlan(ctx context.Context, s *scope) (*resources.RestorePlan, error) {
	c := s.cluster
	rec := c.Status.Recovery
	plan := &resources.RestorePlan{Key: rec.Key, SHA256: rec.SHA256,
		ClusterToken: fmt.Sprintf("%s-%s-%d", c.UID, rec.PreviousClusterID, rec.StartTime.Unix())}
	b := &etcdv1alpha1.EtcdBackup{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: rec.Backup}, b)
	switch {
	case err == nil && b.Spec.Destination != nil:
		plan.Destination = *b.Spec.Destination
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get etcdbackup %s: %w", rec.Backup, err)
	case c.Spec.Backup != nil:
		plan.Destination = c.Spec.Backup.Destination
	default:
		s.blocked = &progress{etcdv1alpha1.ReasonInvalidSpec, fmt.Sprintf(
			"Recreating the cluster from EtcdBackup %s: the backup names no destination and spec.backup no longer says where backups go; set spec.backup.destination to where key %s is stored", rec.Backup, rec.Key)}
		return nil, nil
	}
	return plan, nil
}
