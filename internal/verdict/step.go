// Package verdict holds the judgements the reconcilers make, as pure functions. For an EtcdCluster,
// over one observed model (package model): the quorum's health, a quorum lost for good and the backup
// that restores it, volume expansion, the NOSPACE alarm, the members' hash comparison, whether backups
// keep failing, and the status all of it adds up to. For an EtcdBackup: its destination, its order
// among the cluster's backups, what its Job says, and its status. The reconcilers observe, ask a
// verdict and carry out what it says; nothing here makes a call.
package verdict

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// Progress is a condition's reason and message.
type Progress struct{ Reason, Message string }

// StepKind says what a step waits for; the Progressing condition and the requeue follow it.
type StepKind int

const (
	// KindActing: the pass changed something, or waits for what it started (Progressing True).
	KindActing StepKind = iota
	// KindBlocked: nothing is done until the user acts (Progressing False).
	KindBlocked
	// KindStalled: nothing can be done until the cluster itself recovers, such as a lost quorum
	// (Progressing False).
	KindStalled
)

// Step is what a phase of a pass did or waits for. A phase that returns one ends the pass: the next
// pass observes the outcome before anything else is done.
type Step struct {
	Kind StepKind
	Progress
	// After is how soon to look again when sooner than the kind's usual requeue; 0 for the kind's.
	After time.Duration
	// Watched is set on an acting step that waits only for a pod update (the kubelet reporting a
	// container started, the pod's address): the controller watches the member pods, so that update
	// wakes a pass, and the requeue is a safety net, RequeueWatched, instead of RequeueProgressing.
	Watched bool
}

// Acting, Blocked and Stalled build a step of that kind.
func Acting(reason, message string) *Step {
	return &Step{Kind: KindActing, Progress: Progress{Reason: reason, Message: message}}
}
func Blocked(reason, message string) *Step {
	return &Step{Kind: KindBlocked, Progress: Progress{Reason: reason, Message: message}}
}
func Stalled(reason, message string) *Step {
	return &Step{Kind: KindStalled, Progress: Progress{Reason: reason, Message: message}}
}

// Report holds the outcomes of the checks a pass made, for conditions other than Progressing. A field
// is nil when the check was not made in this pass; its condition then keeps what it said.
type Report struct {
	// Invalid says why the spec cannot be acted on (the Valid condition).
	Invalid *Progress
	// Consistency is the outcome of a hash comparison (the DataInconsistent condition).
	Consistency *Progress
	// Volumes is the state of the members' claims against spec.storage.size (the VolumesResized
	// condition).
	Volumes *Progress
	// Unmanaged says why an object the cluster needs beside its members cannot be kept: a
	// PodDisruptionBudget or NetworkPolicy of its name that is not the cluster's, or a NetworkPolicy the
	// operator cannot build. Shown in Progressing when the pass took no step; it stops nothing else.
	Unmanaged *Progress
	// DataLoss is the verdict on the members' data when no quorum answered (the QuorumDataLost
	// condition).
	DataLoss *DataLoss
	// Backup is what the backup phase observed (status.lastBackup, BackupFailing).
	Backup *BackupObservation
	// TLS is what the cluster's certificates are (status.tls, CertificatesExpiring); nil without TLS.
	// NoTLS is true when the pass found that neither the spec nor any member pod uses TLS (status.tls
	// and CertificatesExpiring go).
	TLS   *TLSObservation
	NoTLS bool
	// Auth is what the pass found of etcd authentication (status.auth); nil without spec.auth.
	Auth *AuthObservation
	// CheckAfter is how soon a hash comparison that the members' change brought forward (a member's
	// etcd started, a member joined or left) is due: it waits for the minimum spacing after the last
	// one. Zero when none waits.
	CheckAfter time.Duration
}

// Expanding reports whether the report says that claims are growing.
func (r *Report) Expanding() bool {
	return r.Volumes != nil && r.Volumes.Reason == etcdv1beta1.ReasonExpandingVolumes
}

// Soonest returns the shortest of the positive durations ds, 0 when none is positive: when to look
// again at a cluster that several reasons ask to revisit.
func Soonest(ds ...time.Duration) time.Duration {
	var out time.Duration
	for _, d := range ds {
		if d > 0 && (out == 0 || d < out) {
			out = d
		}
	}
	return out
}

// Within sets when to look again at the cluster after st (After) and returns st.
func (st *Step) Within(d time.Duration) *Step {
	st.After = d
	return st
}

// StaleCopy is the step of a pass that found its copy of the cluster stale before a recovery step: it
// looks again at the newest copy within a second (its status patch is refused as stale anyway).
func StaleCopy() *Step {
	return Acting(etcdv1beta1.ReasonRestoringFromBackup, "Reading the newest copy of the cluster before the next recovery step").Within(time.Second)
}

// Requeue delays of the EtcdCluster reconciler.
const (
	// RequeueProgressing is how soon a pass looks again while members are starting or joining.
	RequeueProgressing = time.Second
	// RequeueWatched is how soon a pass looks again after a Watched step: the pod update it waits for
	// wakes the cluster sooner. While many clusters start at once (the kubelet takes tens of seconds to
	// start a hundred pods), passes every RequeueProgressing that find nothing new kept the operator's
	// workers busy, and the clusters that had something to do waited seconds in the work queue.
	RequeueWatched = 5 * time.Second
	// RequeueChanged is how soon a pass looks again after it promoted a learner: the next member of a
	// scale-up can often be added at once, and nothing the operator watches says so. After a removal
	// the next pass waits RequeueProgressing, which gives the removed member time to stop.
	RequeueChanged = 100 * time.Millisecond
	// RequeueRetry is how soon a pass tries again a membership change etcd refused for now because a
	// learner has not caught up (ErrLearnerNotReady) or a member has been connected for less than 5 s
	// (ErrUnhealthyCluster, etcd's strict reconfiguration check): both end at a moment nothing the
	// operator watches tells, and each try is one call to the leader.
	RequeueRetry = 200 * time.Millisecond
	// RequeueUnhealthy is how soon a pass looks again while the cluster is degraded or unreachable. A
	// member that has just started (a new voter, a recreated pod) answers within seconds; the probe
	// wakes the cluster when a member's answer changes, but not always when one that timed out answers.
	RequeueUnhealthy = 2 * time.Second
	// RequeueBlocked is how soon a pass looks again at a cluster blocked by something outside it (a
	// foreign Service or claim the user has to delete), whose removal brings no event.
	RequeueBlocked = 30 * time.Second
	// RequeueRefused is how soon a pass looks again at a cluster whose new member's pod admission
	// refused (a ResourceQuota full): a quota raised, or freed by a pod of another workload, brings no
	// event either, and the new member is part of a scale-up the user waits on.
	RequeueRefused = 5 * time.Second
)

// Requeue returns when to look again at cluster c after a pass that took step st (nil: none) and
// found report: the soonest of what the step asks, the next scheduled backup, and, for a settled
// cluster, healthCheck (its health check interval), sooner while it is degraded or its volumes grow.
func Requeue(c *etcdv1beta1.EtcdCluster, report *Report, st *Step, healthCheck time.Duration) time.Duration {
	var after time.Duration
	switch {
	case st != nil && st.Kind == KindBlocked:
		after = RequeueBlocked
	case st != nil && st.Kind == KindActing && st.Watched:
		after = RequeueWatched
	case st != nil && st.Kind == KindActing:
		after = RequeueProgressing
	case !meta.IsStatusConditionFalse(c.Status.Conditions, etcdv1beta1.ConditionDegraded), report.Expanding():
		after = RequeueUnhealthy
	case report.Unmanaged != nil:
		after = RequeueBlocked
	default:
		after = healthCheck
	}
	var backup, step time.Duration
	if report.Backup != nil {
		backup = report.Backup.Requeue // when the next scheduled backup is due
	}
	if st != nil {
		step = st.After
	}
	return Soonest(after, backup, step, report.CheckAfter)
}
