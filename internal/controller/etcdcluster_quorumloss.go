package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/version"
)

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
func (d dataLoss) quorum() int { return membership.Quorum(len(d.voters)) }

// kept is the number of voters whose data is still there.
func (d dataLoss) kept() int { return len(d.voters) - len(d.lost) }

// permanent reports whether quorum can never come back by itself: fewer voters than a quorum keep
// their data. A voter without its data must never vote again (it would have forgotten what it
// acknowledged), so no restart of any pod can bring the quorum back.
func (d dataLoss) permanent() bool { return len(d.voters) > 0 && d.kept() < d.quorum() }

// judgeDataLoss judges, from the pods and claims of the pass, which of the voters the status last
// listed have lost their data. It is meant for a cluster none of whose members answered: only members
// etcd listed count (a pod recorded while etcd did not answer, such as a removed member's pod still
// terminating or a learner's, has no member ID and is no voter).
func judgeDataLoss(m *model.Cluster) dataLoss {
	var d dataLoss
	emptyDir := m.Object.Spec.Storage.EmptyDir != nil
	for _, mem := range m.Members {
		if !mem.Voter() {
			continue
		}
		d.voters = append(d.voters, mem.Name)
		if !hasData(mem, emptyDir) {
			d.lost = append(d.lost, mem.Name)
		}
	}
	return d
}

// hasData reports whether a member's data directory may still exist: its claim for persistent
// storage, its pod for storage.emptyDir. Only what is certainly gone counts as lost: an emptyDir pod
// that is terminating still has its volume, and a claim that is being deleted is kept while the
// member's pod exists (Kubernetes does not delete a claim a pod uses).
func hasData(m *model.Member, emptyDir bool) bool {
	if emptyDir {
		return m.Pod != nil
	}
	return m.HasClaim() || (m.Claim != nil && m.Pod != nil)
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

// optedIn reports whether spec.recovery.restoreOnQuorumLoss is set.
func optedIn(c *etcdv1alpha1.EtcdCluster) bool {
	return c.Spec.Recovery != nil && c.Spec.Recovery.RestoreOnQuorumLoss
}

// reconcileQuorumLoss judges a formed cluster none of whose members answered: either enough voters
// keep their data for the quorum to come back by itself (the pods of those whose data is kept are
// recreated by recreateMembers), or it is lost for good (quorumDataLost). Either way the pass stalls:
// no membership change is made without a quorum.
func (r *EtcdClusterReconciler) reconcileQuorumLoss(ctx context.Context, s *scope) (*step, error) {
	if s.m.Answered() {
		return nil, nil
	}
	d := judgeDataLoss(s.m)
	s.report.dataLoss = &d
	if d.permanent() {
		return r.quorumDataLost(ctx, s, d)
	}
	return stalledStep(etcdv1alpha1.ReasonQuorumLost,
		"No member answers: pods whose data is kept are recreated; no membership change is made until a quorum answers again"), nil
}

// quorumDataLost handles a cluster whose quorum cannot come back (DESIGN §5 item 6): it reports it in
// the QuorumDataLost, Available and Progressing conditions and with a Warning event, and, only when
// spec.recovery.restoreOnQuorumLoss is set, the loss has lasted RecoveryDelay and a restorable backup
// exists, decides to recreate the cluster from the newest one. The decision is written to the status
// before anything is deleted, with the cluster's resourceVersion, so that it is taken once.
func (r *EtcdClusterReconciler) quorumDataLost(ctx context.Context, s *scope, d dataLoss) (*step, error) {
	c := s.cluster
	msg := d.message(c.Spec.Storage.EmptyDir != nil)
	since := dataLostSince(c)
	report := func(tail string) *step {
		st := stalledStep(etcdv1alpha1.ReasonQuorumDataLost, msg+"; "+tail)
		if since.IsZero() {
			r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonQuorumDataLost, "Recover", "%s", st.message)
		}
		return st
	}
	if !optedIn(c) {
		return report("nothing is changed. To recover, create a new EtcdCluster with spec.bootstrap.restore naming the newest EtcdBackup, or set spec.recovery.restoreOnQuorumLoss to let the operator recreate this one from it (writes after that backup are lost)"), nil
	}
	list := &etcdv1alpha1.EtcdBackupList{}
	if err := r.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return nil, fmt.Errorf("list etcdbackups: %w", err)
	}
	b, dest, why := pickRestoreBackup(c, list.Items)
	if b == nil {
		return report("spec.recovery.restoreOnQuorumLoss is set, but " + why), nil
	}
	if kept := retainedClaims(s.m); len(kept) > 0 {
		return report(fmt.Sprintf("the restore of EtcdBackup %s waits: claims %s still hold the lost cluster's data and storage.retainPolicy is Retain, so the operator does not delete them; copy what you need, then delete them", b.Name, strings.Join(kept, ", "))), nil
	}
	taken := b.Status.CompletionTime.UTC().Format(time.RFC3339)
	if wait := r.recoveryDelay() - time.Since(since); since.IsZero() || wait > 0 {
		if since.IsZero() {
			wait = r.recoveryDelay()
		}
		st := report(fmt.Sprintf("restoring EtcdBackup %s (revision %d, taken %s) if this lasts %s more", b.Name, b.Status.Revision, taken, wait.Round(time.Second)))
		st.after = wait
		return st, nil
	}
	return r.startRecovery(ctx, s, d, b, dest, msg)
}

// retainedClaims names the claims the operator may not delete before a restore because
// storage.retainPolicy is Retain (a claim the user deleted goes once its pod does); none under Delete.
func retainedClaims(m *model.Cluster) []string {
	var kept []string
	if m.Object.Spec.Storage.RetainPolicy != etcdv1alpha1.RetainPolicyRetain {
		return nil
	}
	for _, mem := range m.Claims() {
		if mem.HasClaim() {
			kept = append(kept, mem.Claim.Name)
		}
	}
	return kept
}

// startRecovery decides, on the newest copy of the cluster only, to recreate it from backup b: the
// decision is written to status.recovery before anything is deleted, so that it is taken once.
func (r *EtcdClusterReconciler) startRecovery(ctx context.Context, s *scope, d dataLoss, b *etcdv1alpha1.EtcdBackup, dest *etcdv1alpha1.BackupDestination, msg string) (*step, error) {
	c := s.cluster
	taken := b.Status.CompletionTime.UTC().Format(time.RFC3339)
	if ok, err := r.latest(ctx, c); err != nil || !ok {
		return staleCopy(), err // decide on the newest cluster only
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
	if st, err := r.recordStatus(ctx, c, "the decision to restore EtcdBackup "+b.Name); err != nil || st != nil {
		c.Status.Recovery = nil // not decided: the next pass judges again on the newest cluster
		return st, err
	}
	quorumRestores.WithLabelValues("started").Inc()
	r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonRestoringFromBackup, "Recover",
		"%s; recreating the cluster from EtcdBackup %s (revision %d, taken %s): writes after it are lost", msg, b.Name, b.Status.Revision, taken)
	return actingStep(etcdv1alpha1.ReasonRestoringFromBackup,
		fmt.Sprintf("Recreating the cluster from EtcdBackup %s after a quorum loss without data: deleting the lost cluster's members", b.Name)), nil
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
