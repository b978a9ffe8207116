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
		// only members etcd listed count: a pod recorded while etcd did not answer (a removed member's
		// pod still terminating, a learner's) has no member ID and is no voter
		if m.Role != etcdv1alpha1.RoleVoter || m.ID == "" {
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

// hasData reports whether member name's data directory may still exist: its claim for persistent
// storage, its pod for storage.emptyDir. Only what is certainly gone counts as lost: an emptyDir pod
// that is terminating still has its volume, and a claim that is being deleted is kept while the
// member's pod exists (Kubernetes does not delete a claim a pod uses).
func hasData(s *scope, name string) bool {
	_, hasPod := s.pods[name]
	if s.cluster.Spec.Storage.EmptyDir != nil {
		return hasPod
	}
	pvc, ok := s.pvcs[resources.PVCName(name)]
	return ok && (pvc.DeletionTimestamp == nil || hasPod)
}

// recovering reports whether an automatic restore is under way (status.recovery not Succeeded).
func recovering(c *etcdv1alpha1.EtcdCluster) bool {
	return c.Status.Recovery != nil && c.Status.Recovery.Phase != etcdv1alpha1.RecoverySucceeded
}

// DefaultRecoveryDelay is how long a quorum loss without data must last before an automatic restore
// starts.
const DefaultRecoveryDelay = 30 * time.Second

func (r *EtcdClusterReconciler) recoveryDelay() time.Duration {
	if r.RecoveryDelay > 0 {
		return r.RecoveryDelay
	}
	return DefaultRecoveryDelay
}

// dataLostSince returns when the persisted status first reported quorum lost without data (the
// QuorumDataLost condition's lastTransitionTime), or the zero time when it does not report it.
func dataLostSince(c *etcdv1alpha1.EtcdCluster) time.Time {
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionQuorumDataLost)
	if cond == nil || cond.Status != metav1.ConditionTrue {
		return time.Time{}
	}
	return cond.LastTransitionTime.Time
}

// message says which members lost their data and why quorum cannot come back.
func (d dataLoss) message(emptyDir bool) string {
	what := "claims gone"
	if emptyDir {
		what = "emptyDir pods gone"
	}
	return fmt.Sprintf("Quorum is lost for good: members %s lost their data (%s); only %d of the %d voting members keep theirs, fewer than the quorum of %d",
		strings.Join(d.lost, ", "), what, d.kept(), len(d.voters), d.quorum())
}

// latest reports whether c is the newest version of the cluster in the API server (read uncached):
// destructive recovery steps are taken only on it, never on a stale cached copy that may not show a
// step already taken.
func (r *EtcdClusterReconciler) latest(ctx context.Context, c *etcdv1alpha1.EtcdCluster) (bool, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	cur := &etcdv1alpha1.EtcdCluster{}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(c), cur); err != nil {
		return false, fmt.Errorf("read the latest etcdcluster: %w", err)
	}
	return cur.ResourceVersion == c.ResourceVersion, nil
}

// optedIn reports whether spec.recovery.restoreOnQuorumLoss is set.
func optedIn(c *etcdv1alpha1.EtcdCluster) bool {
	return c.Spec.Recovery != nil && c.Spec.Recovery.RestoreOnQuorumLoss
}

// quorumDataLost handles a cluster whose quorum cannot come back (DESIGN §5 item 6): it reports it in
// the QuorumDataLost, Available and Progressing conditions and with a Warning event, and, only when
// spec.recovery.restoreOnQuorumLoss is set, the loss has lasted RecoveryDelay and a restorable backup
// exists, decides to recreate the cluster from the newest one. The decision is written to the status
// before anything is deleted, with the cluster's resourceVersion, so that it is taken once.
func (r *EtcdClusterReconciler) quorumDataLost(ctx context.Context, s *scope, d dataLoss) (ctrl.Result, error) {
	c := s.cluster
	msg := d.message(c.Spec.Storage.EmptyDir != nil)
	since := dataLostSince(c)
	report := func(tail string) {
		s.stalled = &progress{etcdv1alpha1.ReasonQuorumDataLost, msg + "; " + tail}
		if since.IsZero() {
			r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonQuorumDataLost, "Recover", "%s", s.stalled.message)
		}
	}
	if !optedIn(c) {
		report("nothing is changed. To recover, create a new EtcdCluster with spec.bootstrap.restore naming the newest EtcdBackup, or set spec.recovery.restoreOnQuorumLoss to let the operator recreate this one from it (writes after that backup are lost)")
		return ctrl.Result{}, nil
	}
	list := &etcdv1alpha1.EtcdBackupList{}
	if err := r.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list etcdbackups: %w", err)
	}
	b, dest, why := pickRestoreBackup(c, list.Items)
	if b == nil {
		report("spec.recovery.restoreOnQuorumLoss is set, but " + why)
		return ctrl.Result{}, nil
	}
	if c.Spec.Storage.RetainPolicy == etcdv1alpha1.RetainPolicyRetain {
		var kept []string
		for _, pvc := range s.pvcs {
			if pvc.DeletionTimestamp == nil { // a claim the user deleted goes once its pod does
				kept = append(kept, pvc.Name)
			}
		}
		if len(kept) > 0 {
			sort.Strings(kept)
			report(fmt.Sprintf("the restore of EtcdBackup %s waits: claims %s still hold the lost cluster's data and storage.retainPolicy is Retain, so the operator does not delete them; copy what you need, then delete them", b.Name, strings.Join(kept, ", ")))
			return ctrl.Result{}, nil
		}
	}
	taken := b.Status.CompletionTime.UTC().Format(time.RFC3339)
	if wait := r.recoveryDelay() - time.Since(since); since.IsZero() || wait > 0 {
		if since.IsZero() {
			wait = r.recoveryDelay()
		}
		report(fmt.Sprintf("restoring EtcdBackup %s (revision %d, taken %s) if this lasts %s more", b.Name, b.Status.Revision, taken, wait.Round(time.Second)))
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if ok, err := r.latest(ctx, c); err != nil || !ok {
		return ctrl.Result{RequeueAfter: requeueProgressing}, err // decide on the newest cluster only
	}
	c.Status.Recovery = &etcdv1alpha1.RecoveryStatus{
		Phase:                etcdv1alpha1.RecoveryDeleting,
		Backup:               b.Name,
		Key:                  b.Status.Key,
		SHA256:               b.Status.SHA256,
		Destination:          dest,
		Revision:             b.Status.Revision,
		BackupCompletionTime: b.Status.CompletionTime,
		PreviousClusterID:    c.Status.ClusterID,
		LostMembers:          d.lost,
		// whole seconds: the cluster token derives from it, and must read the same after a round trip
		StartTime: metav1.NewTime(time.Now().Truncate(time.Second)),
	}
	// recorded before anything is deleted, and only if nobody changed the cluster since this pass read it
	if res, err := r.recordStatus(ctx, c, "the decision to restore EtcdBackup "+b.Name); err != nil || !res.IsZero() {
		c.Status.Recovery = nil // not decided: the next pass judges again on the newest cluster
		return res, err
	}
	quorumRestores.WithLabelValues("started").Inc()
	r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonRestoringFromBackup, "Recover",
		"%s; recreating the cluster from EtcdBackup %s (revision %d, taken %s): writes after it are lost", msg, b.Name, b.Status.Revision, taken)
	s.progress = &progress{etcdv1alpha1.ReasonRestoringFromBackup,
		fmt.Sprintf("Recreating the cluster from EtcdBackup %s after a quorum loss without data: deleting the lost cluster's members", b.Name)}
	return ctrl.Result{}, nil
}

// reconcileRecovery carries an automatic restore on (status.recovery): it deletes the lost cluster's
// member pods and claims, then bootstraps every member from the snapshot with a new cluster token,
// and marks the restore Succeeded once the new cluster answers. While it is deleting, turning
// spec.recovery.restoreOnQuorumLoss off or the lost cluster answering again cancels it.
func (r *EtcdClusterReconciler) reconcileRecovery(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	rec := c.Status.Recovery
	// every step of a restore is taken on the newest cluster only: a stale copy may not show the step
	// before (and would delete what the restore created, or report success twice)
	if ok, err := r.latest(ctx, c); err != nil || !ok {
		return ctrl.Result{RequeueAfter: requeueProgressing}, err
	}
	answering := "" // the ID of the cluster that answers, if any
	if s.etcd != nil {
		answering = etcd.FormatID(s.etcd.clusterID)
	}
	if rec.Phase == etcdv1alpha1.RecoveryDeleting && answering != "" && answering != rec.PreviousClusterID {
		rec.Phase = etcdv1alpha1.RecoveryRestoring // the restored cluster answers: nothing of the lost one is left
	}
	if rec.Phase == etcdv1alpha1.RecoveryDeleting {
		switch {
		case answering != "" && answering == rec.PreviousClusterID:
			return r.cancelRecovery(s, "the lost cluster answers again")
		case !optedIn(c):
			return r.cancelRecovery(s, "spec.recovery.restoreOnQuorumLoss was turned off")
		}
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
		// the lost cluster's identity goes with it: the members are recreated as a new cluster
		c.Status.ClusterID, c.Status.Members = "", nil
		// recorded before any member is created, so that no later pass takes it for the lost cluster's
		if res, err := r.recordStatus(ctx, c, "that the lost cluster's members are deleted"); err != nil || !res.IsZero() {
			return res, err
		}
		r.event(c, corev1.EventTypeNormal, etcdv1alpha1.ReasonRestoringFromBackup, "Recover",
			"Deleted the lost cluster's members; creating %d members that restore EtcdBackup %s", c.Spec.ReplicasOrDefault(), rec.Backup)
		s.progress = &progress{etcdv1alpha1.ReasonRestoringFromBackup, fmt.Sprintf("Creating %d members that restore EtcdBackup %s", c.Spec.ReplicasOrDefault(), rec.Backup)}
		return ctrl.Result{RequeueAfter: requeueProgressing}, nil
	}
	if answering != "" {
		if answering != rec.PreviousClusterID {
			now := metav1.Now()
			rec.Phase, rec.CompletionTime = etcdv1alpha1.RecoverySucceeded, &now
			quorumRestores.WithLabelValues("succeeded").Inc()
			r.event(c, corev1.EventTypeNormal, "RestoredFromBackup", "Recover",
				"Recreated the cluster from EtcdBackup %s (revision %d) in %s: new cluster ID %s", rec.Backup, rec.Revision,
				now.Sub(rec.StartTime.Time).Round(time.Second), answering)
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

// recordStatus writes c's status at once, with the resourceVersion this pass read, so that a recovery
// step is announced (event, metric) and acted on only once it is recorded. A conflict (a newer cluster
// exists) asks for another look soon instead of an error.
func (r *EtcdClusterReconciler) recordStatus(ctx context.Context, c *etcdv1alpha1.EtcdCluster, what string) (ctrl.Result, error) {
	err := r.Status().Update(ctx, c)
	switch {
	case err == nil:
		return ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: requeueProgressing}, nil
	default:
		return ctrl.Result{}, fmt.Errorf("record %s: %w", what, err)
	}
}

// cancelRecovery forgets an automatic restore that is still deleting the lost cluster.
func (r *EtcdClusterReconciler) cancelRecovery(s *scope, why string) (ctrl.Result, error) {
	c := s.cluster
	backupName := c.Status.Recovery.Backup
	c.Status.Recovery = nil
	r.event(c, corev1.EventTypeNormal, etcdv1alpha1.ReasonRestoreCancelled, "Recover", "Cancelled the restore of EtcdBackup %s: %s; what was already deleted stays deleted", backupName, why)
	s.progress = &progress{etcdv1alpha1.ReasonRestoreCancelled, fmt.Sprintf("Cancelled the restore of EtcdBackup %s: %s", backupName, why)}
	return ctrl.Result{}, nil
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

// pickRestoreBackup returns, of backups, the newest (by completion time) Succeeded backup of cluster c
// created after c whose snapshot c's version can restore and whose destination is known (its own, or,
// for one that names none, c's spec.backup.destination, if that is where status.location says it
// went), with that destination; otherwise nil and why.
func pickRestoreBackup(c *etcdv1alpha1.EtcdCluster, backups []etcdv1alpha1.EtcdBackup) (*etcdv1alpha1.EtcdBackup, *etcdv1alpha1.BackupDestination, string) {
	var best *etcdv1alpha1.EtcdBackup
	var bestDest *etcdv1alpha1.BackupDestination
	var refused, earlier []string
	for i := range backups {
		b := &backups[i]
		if b.Spec.ClusterRef.Name != c.Name || b.Status.Phase != etcdv1alpha1.BackupSucceeded || b.Status.Key == "" || b.Status.CompletionTime == nil ||
			b.DeletionTimestamp != nil {
			continue
		}
		if b.CreationTimestamp.Before(&c.CreationTimestamp) {
			earlier = append(earlier, b.Name)
			continue
		}
		if err := version.CheckRestore(b.Status.EtcdVersion, c.Spec.VersionOrDefault()); err != nil {
			refused = append(refused, fmt.Sprintf("%s (%v)", b.Name, err))
			continue
		}
		dest := b.Spec.Destination
		if dest == nil && c.Spec.Backup != nil {
			dest = &c.Spec.Backup.Destination
		}
		// a backup that named no destination went to the cluster's destination of its day: use the
		// cluster's only if it still leads there
		if loc := resources.DestinationLocation(dest, b.Status.Key); dest == nil || (b.Spec.Destination == nil && loc != b.Status.Location) {
			refused = append(refused, fmt.Sprintf("%s (stored at %s, which spec.backup.destination no longer names)", b.Name, b.Status.Location))
			continue
		}
		if best == nil || b.Status.CompletionTime.After(best.Status.CompletionTime.Time) ||
			(b.Status.CompletionTime.Equal(best.Status.CompletionTime) && b.Status.Revision > best.Status.Revision) {
			best, bestDest = b, dest
		}
	}
	if best != nil {
		return best, bestDest.DeepCopy(), ""
	}
	if len(refused) > 0 {
		sort.Strings(refused)
		return nil, nil, "no successful EtcdBackup of this cluster can be restored: " + strings.Join(refused, "; ") + "; restore one by hand into a new EtcdCluster with spec.bootstrap.restore.source"
	}
	why := "no EtcdBackup of this cluster succeeded: there is nothing to restore"
	if len(earlier) > 0 {
		sort.Strings(earlier)
		why += fmt.Sprintf(" (EtcdBackups %s are of an earlier cluster of the same name: if one is what you want, restore it by hand into a new EtcdCluster with spec.bootstrap.restore)", strings.Join(earlier, ", "))
	}
	return nil, nil, why
}

// recoveryPlan returns the snapshot the members of an automatic restore restore: the one
// status.recovery names, where it was when the restore was decided, with a cluster token of its own so
// that the recreated cluster (same member names and peer URLs) gets a new cluster ID.
func (r *EtcdClusterReconciler) recoveryPlan(_ context.Context, s *scope) (*resources.RestorePlan, error) {
	c := s.cluster
	rec := c.Status.Recovery
	if rec.Destination == nil {
		s.blocked = &progress{etcdv1alpha1.ReasonInvalidSpec, fmt.Sprintf(
			"Recreating the cluster from EtcdBackup %s: status.recovery records no destination for key %s; create a new EtcdCluster with spec.bootstrap.restore.source naming where it is", rec.Backup, rec.Key)}
		return nil, nil
	}
	return &resources.RestorePlan{Destination: *rec.Destination, Key: rec.Key, SHA256: rec.SHA256,
		ClusterToken: fmt.Sprintf("%s-%s-%d", c.UID, rec.PreviousClusterID, rec.StartTime.Unix())}, nil
}
