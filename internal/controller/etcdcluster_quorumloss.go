package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/kube"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// reconcileQuorumLoss judges a formed cluster none of whose members answered: either enough voters
// keep their data for the quorum to come back by itself (the pods of those whose data is kept are
// recreated by recreateMembers), or it is lost for good (quorumDataLost). Either way the pass stalls:
// no membership change is made without a quorum.
func (r *EtcdClusterReconciler) reconcileQuorumLoss(ctx context.Context, s *scope) (*verdict.Step, error) {
	if s.m.Answered() {
		return nil, nil
	}
	d := verdict.JudgeDataLoss(s.m)
	if d.Permanent() && verdict.DataLostSince(s.cluster).IsZero() {
		// the namespace controller deletes a namespace's pods with it: not a loss to report (nor to
		// recover from) when it is that
		if err := r.probeNamespace(ctx, s.cluster); kube.NamespaceTerminating(err) {
			return nil, err
		}
	}
	s.report.DataLoss = &d
	if d.Permanent() {
		return r.quorumDataLost(ctx, s, d)
	}
	return verdict.Stalled(etcdv1beta1.ReasonQuorumLost,
		"No member answers: pods whose data is kept are recreated; no membership change is made until a quorum answers again"), nil
}

// quorumDataLost handles a cluster whose quorum cannot come back (DESIGN §5 item 6): it reports it in
// the QuorumDataLost, Available and Progressing conditions and with a Warning event, and, only when
// spec.recovery.restoreOnQuorumLoss is set, the loss has lasted RecoveryDelay and a restorable backup
// exists, decides to recreate the cluster from the newest one. The decision is written to the status
// before anything is deleted, with the cluster's resourceVersion, so that it is taken once.
func (r *EtcdClusterReconciler) quorumDataLost(ctx context.Context, s *scope, d verdict.DataLoss) (*verdict.Step, error) {
	c := s.cluster
	msg := d.Message(c.Spec.Storage.EmptyDir != nil)
	since := verdict.DataLostSince(c)
	report := func(tail string) *verdict.Step {
		st := verdict.Stalled(etcdv1beta1.ReasonQuorumDataLost, msg+"; "+tail)
		if since.IsZero() {
			r.event(c, corev1.EventTypeWarning, etcdv1beta1.ReasonQuorumDataLost, "Recover", "%s", st.Message)
		}
		return st
	}
	if !verdict.OptedIn(c) {
		return report("nothing is changed. To recover, create a new EtcdCluster with spec.bootstrap.restore naming the newest EtcdBackup, or set spec.recovery.restoreOnQuorumLoss to let the operator copy the members that kept their data and recreate this cluster from the most up-to-date copy (writes after it are lost)"), nil
	}
	list := &etcdv1beta1.EtcdBackupList{}
	if err := r.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		return nil, fmt.Errorf("list etcdbackups: %w", err)
	}
	copies := verdict.JudgeSurvivorCopies(d.Survivors(), since, time.Now(), list.Items)
	if st, err := r.copySurvivors(ctx, s, since, copies, report); st != nil || err != nil {
		return st, err
	}
	b, dest, why := verdict.PickRestoreBackup(c, list.Items)
	if b == nil {
		return report("spec.recovery.restoreOnQuorumLoss is set, but " + why), nil
	}
	if kept := verdict.RetainedClaims(s.m); len(kept) > 0 {
		return report(fmt.Sprintf("the restore of EtcdBackup %s waits: claims %s still hold the lost cluster's data and storage.retainPolicy is Retain, so the operator does not delete them; copy what you need, then delete them", b.Name, strings.Join(kept, ", "))), nil
	}
	taken := b.Status.CompletionTime.UTC().Format(time.RFC3339)
	if wait := r.recoveryDelay() - time.Since(since); since.IsZero() || wait > 0 {
		if since.IsZero() {
			wait = r.recoveryDelay()
		}
		return report(fmt.Sprintf("restoring EtcdBackup %s (revision %d, taken %s) if this lasts %s more", b.Name, b.Status.Revision, taken, wait.Round(time.Second))).Within(wait), nil
	}
	return r.startRecovery(ctx, s, d, b, dest, msg, copies.Taken, verdict.LostRevisions(c, b, list.Items))
}

// copySurvivors has each survivor of the quorum loss that began at since (a voter that kept its data)
// copied by an EtcdBackup of its own, and retakes failed copies, before anything is deleted; it
// returns the step to wait on while a copy is missing, running or failed.
func (r *EtcdClusterReconciler) copySurvivors(ctx context.Context, s *scope, since time.Time, sc verdict.SurvivorCopies, report func(string) *verdict.Step) (*verdict.Step, error) {
	c := s.cluster
	switch {
	case sc.Done():
		return nil, nil
	case since.IsZero(): // the copies are named after the loss's start, recorded by this pass
		return report("the members that kept their data are copied first").Within(verdict.RequeueProgressing), nil
	case c.Spec.Backup == nil:
		return report(fmt.Sprintf("spec.recovery.restoreOnQuorumLoss is set, but what the members that kept their data (%s) hold cannot be copied before the cluster is recreated: there is no spec.backup.destination; set one", strings.Join(slices.Concat(sc.Missing, sc.Taken), ", "))), nil
	}
	for _, name := range sc.Missing {
		if err := r.Create(ctx, resources.BuildSurvivorSnapshot(c, name, since)); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create the copy of survivor %s: %w", name, err)
		}
		r.eventAbout(c, memberRef(c, name), corev1.EventTypeNormal, etcdv1beta1.ReasonQuorumDataLost, "Copy", "Copying member %s, which kept its data, before the cluster is recreated", name)
	}
	for _, b := range sc.Retry {
		if err := r.Delete(ctx, b, client.Preconditions{UID: &b.UID}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete the failed copy %s: %w", b.Name, err)
		}
	}
	return report(sc.Message()).Within(5 * time.Second), nil
}

// startRecovery decides, on the newest copy of the cluster only, to recreate it from backup b: the
// decision is written to status.recovery before anything is deleted, so that it is taken once.
func (r *EtcdClusterReconciler) startRecovery(ctx context.Context, s *scope, d verdict.DataLoss, b *etcdv1beta1.EtcdBackup, dest *etcdv1beta1.BackupDestination, msg string,
	survivors []string, lost int64) (*verdict.Step, error) {
	c := s.cluster
	taken := b.Status.CompletionTime.UTC().Format(time.RFC3339)
	if ok, err := r.latest(ctx, c); err != nil || !ok {
		return verdict.StaleCopy(), err // decide on the newest cluster only
	}
	c.Status.Recovery = &etcdv1beta1.RecoveryStatus{
		Phase:                etcdv1beta1.RecoveryDeleting,
		Backup:               b.Name,
		Key:                  b.Status.Key,
		SHA256:               b.Status.SHA256,
		Destination:          dest,
		Revision:             b.Status.Revision,
		BackupCompletionTime: b.Status.CompletionTime,
		PreviousClusterID:    c.Status.ClusterID,
		LostMembers:          d.Lost,
		SurvivorSnapshots:    survivors,
		LostRevisions:        &lost,
		// whole seconds: the cluster token derives from it, and must read the same after a round trip
		StartTime: metav1.NewTime(time.Now().Truncate(time.Second)),
	}
	// recorded before anything is deleted, and only if nobody changed the cluster since this pass read it
	if st, err := r.recordStatus(ctx, c, "the decision to restore EtcdBackup "+b.Name); err != nil || st != nil {
		c.Status.Recovery = nil // not decided: the next pass judges again on the newest cluster
		return st, err
	}
	metrics.QuorumRestores.WithLabelValues("started").Inc()
	r.event(c, corev1.EventTypeWarning, etcdv1beta1.ReasonRestoringFromBackup, "Recover",
		"%s; recreating the cluster from EtcdBackup %s (revision %d, taken %s; %d revisions known lost)", msg, b.Name, b.Status.Revision, taken, lost)
	return verdict.Acting(etcdv1beta1.ReasonRestoringFromBackup,
		fmt.Sprintf("Recreating the cluster from EtcdBackup %s after a quorum loss without data: deleting the lost cluster's members", b.Name)), nil
}
