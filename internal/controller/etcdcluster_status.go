package controller

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/version"
)

// computeStatus sets the cluster's status from what the pass observed, reported and the step it took
// (nil: none), without I/O. observedGeneration advances only when the pass succeeded.
func computeStatus(s *scope, st *step, opts resources.Options, passOK bool) {
	c := s.cluster
	status := &c.Status
	if passOK {
		status.ObservedGeneration = c.Generation
	}
	setObserved(status, c, s.m)
	h := judgeHealth(s.m)
	setCondition(status, c.Generation, etcdv1alpha1.ConditionAvailable, h.available, availableReason(s, st, h))
	degraded := setDegraded(s, h)
	setProgressing(s, st)
	setOutcomes(s)
	applyBackupStatus(s)
	status.Phase = clusterPhase(s, st, opts, h, degraded)
}

// setObserved sets the status fields that report what the pass observed: replicas, members, leader,
// the lowest version running and the cluster ID.
func setObserved(st *etcdv1alpha1.EtcdClusterStatus, c *etcdv1alpha1.EtcdCluster, m *model.Cluster) {
	st.Selector = labels.SelectorFromSet(resources.SelectorLabels(c)).String()
	st.ClientService = resources.ClientServiceName(c)
	st.Replicas = int32(len(m.Pods()))
	st.Members = memberStatuses(m)
	st.ReadyReplicas = int32(m.HealthyVoters())
	st.Leader = ""
	if l := m.Leader(); l != nil {
		st.Leader = l.Name
	}
	versions := []string{}
	for _, ms := range st.Members {
		if ms.Version != "" {
			versions = append(versions, ms.Version)
		}
	}
	if len(versions) > 0 {
		sort.Slice(versions, func(i, j int) bool { return version.Less(versions[i], versions[j]) })
		st.CurrentVersion = versions[0]
	}
	if m.Answered() {
		st.ClusterID = etcd.FormatID(m.Etcd.ClusterID)
	}
}

// health is the verdict on the cluster's quorum.
type health struct {
	healthyVoters, voters, learners, quorum, desired int32
	// available: a leader and a quorum of healthy voters, no NOSPACE alarm.
	available bool
	// noSpace: a serving quorum refuses writes because of a NOSPACE alarm (not available, not lost).
	noSpace bool
}

// judgeHealth returns the verdict on the quorum of m.
func judgeHealth(m *model.Cluster) health {
	h := health{healthyVoters: int32(m.HealthyVoters()), voters: int32(m.Voters()), learners: int32(m.Learners()),
		quorum: int32(m.Quorum()), desired: int32(m.Desired)}
	led := m.Answered() && m.Etcd.Leader != 0 && h.voters > 0
	// One NOSPACE alarm, whichever member raised it, makes every member refuse writes: a quorum that
	// serves reads but refuses writes is not available, and not lost either.
	h.noSpace = led && m.AnyNoSpace() && int32(m.ServingVoters()) >= h.quorum
	h.available = !h.noSpace && led && h.healthyVoters >= h.quorum
	return h
}

// setDegraded sets the Degraded condition: fewer healthy voters than desired, or another number of
// voters; it returns whether the cluster is degraded.
func setDegraded(s *scope, h health) bool {
	degraded := h.healthyVoters < h.desired || h.voters != h.desired
	reason, msg := etcdv1alpha1.ReasonAllMembersHealthy, fmt.Sprintf("All %d members are healthy voters", h.desired)
	if degraded {
		reason, msg = etcdv1alpha1.ReasonMembersUnhealthy, unhealthySummary(s.cluster.Status.Members, h.desired)
		if failed := restoreFailures(s); len(failed) > 0 {
			msg += "; the restore of the snapshot fails: " + strings.Join(failed, "; ")
		}
	}
	setCondition(&s.cluster.Status, s.cluster.Generation, etcdv1alpha1.ConditionDegraded, degraded, [2]string{reason, msg})
	return degraded
}

// setProgressing sets the Progressing condition from the step the pass took or waits for (True while
// acting; False when blocked, stalled or done) and the Valid condition from what the pass reported.
func setProgressing(s *scope, step *step) {
	st, gen := &s.cluster.Status, s.cluster.Generation
	switch {
	case step != nil:
		setCondition(st, gen, etcdv1alpha1.ConditionProgressing, step.kind == acting, [2]string{step.reason, step.message})
	case s.report.foreignPDB != nil:
		setCondition(st, gen, etcdv1alpha1.ConditionProgressing, false, [2]string{s.report.foreignPDB.reason, s.report.foreignPDB.message})
	default:
		setCondition(st, gen, etcdv1alpha1.ConditionProgressing, false, [2]string{etcdv1alpha1.ReasonReconciled, "The cluster matches its spec"})
	}
	if inv := s.report.invalid; inv != nil {
		setCondition(st, gen, etcdv1alpha1.ConditionValid, false, [2]string{inv.reason, inv.message})
	} else {
		setCondition(st, gen, etcdv1alpha1.ConditionValid, true, [2]string{etcdv1alpha1.ReasonSpecValid, "The spec can be acted on"})
	}
}

// setOutcomes sets the conditions of the checks the pass made: DataInconsistent, QuorumDataLost and
// VolumesResized; a check the pass did not make leaves its condition as it was.
func setOutcomes(s *scope) {
	c := s.cluster
	st, gen := &c.Status, c.Generation
	if cons := s.report.consistency; cons != nil {
		setCondition(st, gen, etcdv1alpha1.ConditionDataInconsistent, cons.reason == etcdv1alpha1.ReasonHashMismatch, [2]string{cons.reason, cons.message})
	}
	switch d := s.report.dataLoss; {
	case d != nil && d.permanent():
		setCondition(st, gen, etcdv1alpha1.ConditionQuorumDataLost, true, [2]string{etcdv1alpha1.ReasonQuorumDataLost, d.message(c.Spec.Storage.EmptyDir != nil)})
	case d != nil:
		setCondition(st, gen, etcdv1alpha1.ConditionQuorumDataLost, false, [2]string{etcdv1alpha1.ReasonDataKept,
			fmt.Sprintf("No quorum answers, but %d of the %d voting members keep their data (quorum %d): it can come back", d.kept(), len(d.voters), d.quorum())})
	case s.m.Answered() || recovering(c):
		if meta.FindStatusCondition(st.Conditions, etcdv1alpha1.ConditionQuorumDataLost) != nil {
			setCondition(st, gen, etcdv1alpha1.ConditionQuorumDataLost, false, [2]string{etcdv1alpha1.ReasonDataKept, "A quorum answers, or the cluster is being restored"})
		}
	}
	if v := s.report.volumes; v != nil {
		setCondition(st, gen, etcdv1alpha1.ConditionVolumesResized, v.reason == etcdv1alpha1.ReasonVolumesMatchSpec, [2]string{v.reason, v.message})
	}
}

// clusterPhase returns the one-word summary of the cluster's state, the first that applies.
func clusterPhase(s *scope, st *step, opts resources.Options, h health, degraded bool) etcdv1alpha1.ClusterPhase {
	c := s.cluster
	switch {
	case c.DeletionTimestamp != nil:
		return etcdv1alpha1.PhaseDeleting
	case recovering(c):
		return etcdv1alpha1.PhaseRestoring
	case c.Status.ClusterID == "":
		return etcdv1alpha1.PhaseCreating
	case !h.available && !h.noSpace:
		return etcdv1alpha1.PhaseQuorumLost
	case s.m.Answered() && (h.voters+h.learners != h.desired || h.learners > 0 || membershipStep(st)):
		return etcdv1alpha1.PhaseScaling
	case rolloutStep(st) || outdatedPods(s, opts) > 0:
		return etcdv1alpha1.PhaseUpgrading
	case degraded:
		return etcdv1alpha1.PhaseDegraded
	default:
		return etcdv1alpha1.PhaseRunning
	}
}

// availableReason returns the reason and message of the Available condition.
func availableReason(s *scope, st *step, h health) [2]string {
	switch {
	case h.noSpace:
		return [2]string{etcdv1alpha1.ReasonNoSpace, "etcd raised its NOSPACE alarm: the cluster serves reads but refuses writes until the alarm is disarmed (see the Progressing condition)"}
	case h.available:
		return [2]string{etcdv1alpha1.ReasonQuorumHealthy,
			fmt.Sprintf("%d of %d voting members are healthy (quorum %d)", h.healthyVoters, h.voters, h.quorum)}
	case recovering(s.cluster):
		rec := s.cluster.Status.Recovery
		return [2]string{etcdv1alpha1.ReasonRestoringFromBackup, fmt.Sprintf(
			"Quorum was lost without data (members %s); the cluster is being recreated from EtcdBackup %s (revision %d)",
			strings.Join(rec.LostMembers, ", "), rec.Backup, rec.Revision)}
	case st != nil && st.kind == stalled && st.reason == etcdv1alpha1.ReasonQuorumDataLost:
		return [2]string{etcdv1alpha1.ReasonQuorumDataLost, st.message}
	case s.cluster.Status.ClusterID == "" && !s.m.Answered():
		return [2]string{etcdv1alpha1.ReasonBootstrapping, "The initial members have not formed a cluster yet"}
	case !s.m.Answered():
		return [2]string{etcdv1alpha1.ReasonEtcdUnreachable, fmt.Sprintf("No member answered: %v", s.m.EtcdErr)}
	default:
		return [2]string{etcdv1alpha1.ReasonQuorumLost,
			fmt.Sprintf("%d of %d voting members are healthy; quorum needs %d", h.healthyVoters, h.voters, h.quorum)}
	}
}

// unhealthySummary names the members that keep the cluster from being whole.
func unhealthySummary(members []etcdv1alpha1.MemberStatus, desired int32) string {
	var bad []string
	for _, m := range members {
		switch {
		case !m.Healthy:
			bad = append(bad, m.Name+" is unhealthy")
		case m.Role == etcdv1alpha1.RoleLearner:
			bad = append(bad, m.Name+" is a learner")
		}
	}
	msg := fmt.Sprintf("%d members, %d desired", len(members), desired)
	if len(bad) > 0 {
		msg += ": " + strings.Join(bad, "; ")
	}
	return msg
}

// memberStatuses lists the members as etcd reports them; when etcd did not answer, the members that have
// a pod or that the status last listed, none of them healthy, with what is known of each one's identity
// from the last time etcd answered.
func memberStatuses(m *model.Cluster) []etcdv1alpha1.MemberStatus {
	var out []etcdv1alpha1.MemberStatus
	if !m.Answered() {
		for _, mem := range m.Members {
			if mem.Pod == nil && mem.Recorded == nil {
				continue
			}
			ms := etcdv1alpha1.MemberStatus{Name: mem.Name, Role: etcdv1alpha1.RoleVoter}
			if p := mem.Recorded; p != nil {
				ms.ID, ms.PeerURL, ms.ClientURL, ms.Role = p.ID, p.PeerURL, p.ClientURL, p.Role
			}
			out = append(out, ms)
		}
		return out
	}
	for _, mem := range m.Listed() {
		ms := etcdv1alpha1.MemberStatus{Name: mem.Name, ID: etcd.FormatID(mem.ID()), Role: etcdv1alpha1.RoleVoter,
			Healthy: mem.Healthy(), Leader: mem.ID() == m.Etcd.Leader}
		if mem.Learner() {
			ms.Role = etcdv1alpha1.RoleLearner
		}
		if len(mem.Etcd.PeerURLs) > 0 {
			ms.PeerURL = mem.Etcd.PeerURLs[0]
		}
		if len(mem.Etcd.ClientURLs) > 0 {
			ms.ClientURL = mem.Etcd.ClientURLs[0]
		}
		if st := mem.Status; st != nil {
			ms.Version, ms.DBSizeBytes = st.Version, st.DBSizeBytes
		}
		out = append(out, ms)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// setCondition sets a condition; its lastTransitionTime changes only when its status does.
func setCondition(st *etcdv1alpha1.EtcdClusterStatus, generation int64, condType string, status bool, reasonMessage [2]string) {
	cs := metav1.ConditionFalse
	if status {
		cs = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: condType, Status: cs, Reason: reasonMessage[0], Message: reasonMessage[1],
		ObservedGeneration: generation,
	})
}

// statusEqual reports whether two statuses are the same, ignoring nothing: a pass writes only when
// something it observed changed.
func statusEqual(a, b *etcdv1alpha1.EtcdClusterStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// membershipStep reports whether p is a membership change in progress (members being added or
// removed, or the pods and claims of removed members still going).
func membershipStep(p *step) bool {
	if p == nil || p.kind != acting {
		return false
	}
	switch p.reason {
	case etcdv1alpha1.ReasonAddingMember, etcdv1alpha1.ReasonPromotingLearner, etcdv1alpha1.ReasonRemovingMember, etcdv1alpha1.ReasonWaiting:
		return true
	}
	return false
}

// rolloutStep reports whether p is a step of a rolling update of the members.
func rolloutStep(p *step) bool {
	if p == nil || p.kind != acting {
		return false
	}
	switch p.reason {
	case etcdv1alpha1.ReasonRollingUpdate, etcdv1alpha1.ReasonMovingLeader, etcdv1alpha1.ReasonRolloutPaused:
		return true
	}
	return false
}

// outdatedPods counts the member pods built from an older spec than the current one.
func outdatedPods(s *scope, opts resources.Options) int {
	hash, n := opts.SpecHash(s.cluster), 0
	for _, m := range s.m.Pods() {
		if m.Pod.Annotations[etcdv1alpha1.AnnotationSpecHash] != hash {
			n++
		}
	}
	return n
}
