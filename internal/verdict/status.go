package verdict

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/version"
)

// scope is what Status reads: the cluster, the pass's model and its report.
type scope struct {
	cluster *etcdv1beta1.EtcdCluster
	m       *model.Cluster
	report  *Report
}

// Status sets cluster c's status from the pass's model m, its report and the step it took (nil: none),
// without I/O. observedGeneration advances only when the pass succeeded (passOK). A pass that stopped
// before observing the cluster (model.ErrNotObserved) sets only Progressing, from its step: it knows
// nothing new of the members.
func Status(c *etcdv1beta1.EtcdCluster, m *model.Cluster, report *Report, st *Step, opts resources.Options, passOK bool) {
	s := &scope{cluster: c, m: m, report: report}
	status := &c.Status
	if passOK {
		status.ObservedGeneration = c.Generation
	}
	if errors.Is(m.EtcdErr, model.ErrNotObserved) {
		if st != nil {
			setCondition(status, c.Generation, etcdv1beta1.ConditionProgressing, st.Kind == KindActing, [2]string{st.Reason, st.Message})
		}
		return
	}
	setObserved(status, c, s.m)
	h := JudgeHealth(s.m)
	available, why := h.Available, availableReason(s, st, h)
	if available && !servedThroughService(s.m) {
		available, why = false, [2]string{etcdv1beta1.ReasonClientServiceNotReady, fmt.Sprintf(
			"%d of %d voting members are healthy (quorum %d), but none of their pods is Ready yet: the client Service %s routes to none of them (a pod is Ready once its readiness probe passes and the operator has marked it serving, its readiness gate %s: seconds after etcd serves)",
			h.HealthyVoters, h.Voters, h.Quorum, resources.ClientServiceName(c), resources.ServingCondition)}
	}
	setCondition(status, c.Generation, etcdv1beta1.ConditionAvailable, available, why)
	degraded := setDegraded(s, h, opts.SpecHash(c))
	setProgressing(s, st)
	setOutcomes(s)
	applyBackupStatus(s)
	applyTLSStatus(s)
	applyAuthStatus(s)
	status.Phase = clusterPhase(s, st, opts, h, degraded)
}

// setObserved sets the status fields that report what the pass observed: replicas, members, leader,
// the lowest version running and the cluster ID.
func setObserved(st *etcdv1beta1.EtcdClusterStatus, c *etcdv1beta1.EtcdCluster, m *model.Cluster) {
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
		var rev int64 // afresh: a cluster recreated from a backup may be at a lower revision
		for _, mem := range m.Listed() {
			if mem.Status != nil {
				rev = max(rev, mem.Status.Revision)
			}
		}
		st.Revision = rev
	}
}

// health is the verdict on the cluster's quorum.
type Health struct {
	// HealthyVoters, Voters, Learners, Quorum and Desired count the members (see model.Cluster) and
	// the voters the spec asks for.
	HealthyVoters, Voters, Learners, Quorum, Desired int32
	// InRaft are the voters that joined moments ago and take part in raft without serving clients yet
	// (model.Member.InRaft), by name: they count for quorum, not as healthy.
	InRaft []string
	// Joining are the voters that joined moments ago whose readiness probe has not passed yet
	// (model.Member.Joining, not InRaft), by name: whether they take part in raft is not known yet.
	Joining []string
	// Led: the members that answered agree on a leader.
	Led bool
	// Available: a leader and a quorum of healthy voters (and voters InRaft), no NOSPACE alarm.
	Available bool
	// NoSpace: a serving quorum refuses writes because of a NOSPACE alarm (not available, not lost).
	NoSpace bool
	// Corrupt names the members etcd raised the CORRUPT alarm for (a member it no longer lists by its
	// hex ID): the cluster refuses writes until the alarm is disarmed (not available, not lost).
	Corrupt []string
}

// JudgeHealth returns the verdict on the quorum of m.
func JudgeHealth(m *model.Cluster) Health {
	h := Health{HealthyVoters: int32(m.HealthyVoters()), Voters: int32(m.Voters()), Learners: int32(m.Learners()),
		Quorum: int32(m.Quorum()), Desired: int32(m.Desired)}
	h.Led = m.Answered() && m.Etcd.Leader != 0 && h.Voters > 0
	// One NOSPACE alarm, whichever member raised it, makes every member refuse writes: a quorum that
	// serves reads but refuses writes is not available, and not lost either.
	h.NoSpace = h.Led && m.AnyNoSpace() && int32(m.ServingVoters()) >= h.Quorum
	// So does one CORRUPT alarm.
	for _, id := range m.Corrupt() {
		h.Corrupt = append(h.Corrupt, memberName(m, id))
	}
	for _, mem := range m.Listed() {
		switch {
		case mem.Healthy() || !mem.Voter():
		case mem.InRaft(m.Now):
			h.InRaft = append(h.InRaft, mem.Name)
		case mem.Joining(m.Now):
			h.Joining = append(h.Joining, mem.Name)
		}
	}
	h.Available = !h.NoSpace && len(h.Corrupt) == 0 && h.Led && h.HealthyVoters+int32(len(h.InRaft)) >= h.Quorum
	return h
}

// joinPending reports whether the cluster is not Available only because voters that joined moments
// ago have not shown yet that they take part in raft: with them, the voters would make a quorum.
func (h Health) joinPending() bool {
	return !h.Available && h.Led && len(h.Joining) > 0 && !h.NoSpace && len(h.Corrupt) == 0 &&
		h.HealthyVoters+int32(len(h.InRaft)+len(h.Joining)) >= h.Quorum
}

// allHealthy says that the n members are healthy voters: "All 3 members are healthy voters", "The
// only member is a healthy voter".
func allHealthy(n int32) string {
	if n == 1 {
		return "The only member is a healthy voter"
	}
	return fmt.Sprintf("All %d members are healthy voters", n)
}

// setDegraded sets the Degraded condition: fewer healthy voters than desired, or another number of
// voters; it returns whether the cluster is degraded. hash is the current spec's
// (resources.Options.SpecHash), for the members a rolling update restarts.
func setDegraded(s *scope, h Health, hash string) bool {
	degraded := h.HealthyVoters < h.Desired || h.Voters != h.Desired
	reason, msg := etcdv1beta1.ReasonAllMembersHealthy, allHealthy(h.Desired)
	if degraded {
		reason, msg = etcdv1beta1.ReasonMembersUnhealthy, unhealthySummary(&s.cluster.Spec, s.cluster.Status.Members, h.Desired, h.Available || h.NoSpace || len(h.Corrupt) > 0, memberNotes(s.m, hash))
		if failed := RestoreFailures(s.m); len(failed) > 0 {
			msg += "; the restore of the snapshot fails: " + strings.Join(failed, "; ")
		}
	}
	if doomed := claimsDeleted(s.m); len(doomed) > 0 {
		if !degraded {
			msg = allHealthy(h.Desired) + ", but"
		} else {
			msg += "; and"
		}
		degraded, reason = true, etcdv1beta1.ReasonMembersUnhealthy
		msg += " " + strings.Join(doomed, "; ")
	}
	setCondition(&s.cluster.Status, s.cluster.Generation, etcdv1beta1.ConditionDegraded, degraded, [2]string{reason, msg})
	return degraded
}

// setProgressing sets the Progressing condition from the step the pass took or waits for (True while
// acting; False when blocked, stalled or done) and the Valid condition from what the pass reported.
func setProgressing(s *scope, step *Step) {
	st, gen := &s.cluster.Status, s.cluster.Generation
	switch {
	case step != nil:
		setCondition(st, gen, etcdv1beta1.ConditionProgressing, step.Kind == KindActing, [2]string{step.Reason, step.Message})
	case s.report.Unmanaged != nil:
		setCondition(st, gen, etcdv1beta1.ConditionProgressing, false, [2]string{s.report.Unmanaged.Reason, s.report.Unmanaged.Message})
	default:
		setCondition(st, gen, etcdv1beta1.ConditionProgressing, false, [2]string{etcdv1beta1.ReasonReconciled, "The cluster matches its spec"})
	}
	if inv := s.report.Invalid; inv != nil {
		setCondition(st, gen, etcdv1beta1.ConditionValid, false, [2]string{inv.Reason, inv.Message})
	} else {
		setCondition(st, gen, etcdv1beta1.ConditionValid, true, [2]string{etcdv1beta1.ReasonSpecValid, "The spec can be acted on"})
	}
}

// setOutcomes sets the conditions of the checks the pass made: DataInconsistent, QuorumDataLost and
// VolumesResized; a check the pass did not make leaves its condition as it was.
func setOutcomes(s *scope) {
	c := s.cluster
	st, gen := &c.Status, c.Generation
	if cons := s.report.Consistency; cons != nil {
		setCondition(st, gen, etcdv1beta1.ConditionDataInconsistent, cons.Reason == etcdv1beta1.ReasonHashMismatch, [2]string{cons.Reason, cons.Message})
	}
	switch d := s.report.DataLoss; {
	case d != nil && d.Permanent():
		setCondition(st, gen, etcdv1beta1.ConditionQuorumDataLost, true, [2]string{etcdv1beta1.ReasonQuorumDataLost, d.Message(c.Spec.Storage.EmptyDir != nil)})
	case d != nil:
		setCondition(st, gen, etcdv1beta1.ConditionQuorumDataLost, false, [2]string{etcdv1beta1.ReasonDataKept,
			fmt.Sprintf("No quorum answers, but %d of the %d voting members keep their data (quorum %d): it can come back", d.Kept(), len(d.Voters), d.Quorum())})
	case s.m.Answered() || Recovering(c):
		if meta.FindStatusCondition(st.Conditions, etcdv1beta1.ConditionQuorumDataLost) != nil {
			setCondition(st, gen, etcdv1beta1.ConditionQuorumDataLost, false, [2]string{etcdv1beta1.ReasonDataKept, "A quorum answers, or the cluster is being restored"})
		}
	}
	if v := s.report.Volumes; v != nil {
		setCondition(st, gen, etcdv1beta1.ConditionVolumesResized, v.Reason == etcdv1beta1.ReasonVolumesMatchSpec, [2]string{v.Reason, v.Message})
	}
}

// clusterPhase returns the one-word summary of the cluster's state, the first that applies.
func clusterPhase(s *scope, st *Step, opts resources.Options, h Health, degraded bool) etcdv1beta1.ClusterPhase {
	c := s.cluster
	switch {
	case c.DeletionTimestamp != nil:
		return etcdv1beta1.PhaseDeleting
	case c.Spec.Paused && (c.Status.ClusterID == "" || Recovering(c)):
		return etcdv1beta1.PhasePaused // neither created nor restored while paused
	case Recovering(c):
		return etcdv1beta1.PhaseRestoring
	case c.Status.ClusterID == "":
		return etcdv1beta1.PhaseCreating
	case Unreachable(s.m):
		return etcdv1beta1.PhaseUnreachable
	case !h.Available && !h.NoSpace && len(h.Corrupt) == 0 && (!s.m.Answered() || !h.joinPending()):
		return etcdv1beta1.PhaseQuorumLost
	case c.Spec.Paused:
		return etcdv1beta1.PhasePaused
	case s.m.Answered() && (h.Voters+h.Learners != h.Desired || h.Learners > 0 || membershipStep(st) || joining(s.m)):
		return etcdv1beta1.PhaseScaling
	case (rolloutStep(st) || outdatedPods(s, opts) > 0 || rolloutRestarting(s, opts.SpecHash(c))) && s.m.Rollback(opts.SpecHash(c)) == nil:
		// rolled back from the current spec, nothing is being upgraded: Running or Degraded, with
		// Progressing RolloutFailed
		return etcdv1beta1.PhaseUpgrading
	case !degraded && st != nil && st.Reason == etcdv1beta1.ReasonWaitingForMembers &&
		(c.Status.Phase == etcdv1beta1.PhaseUpgrading || c.Status.Phase == etcdv1beta1.PhaseScaling):
		// the last member of a rollout or a scale-up serves, and its pod is not Ready yet (AwaitHealthy):
		// the change is done once it is, when Progressing turns False too
		return c.Status.Phase
	case degraded:
		return etcdv1beta1.PhaseDegraded
	default:
		return etcdv1beta1.PhaseRunning
	}
}

// joining reports whether a member etcd lists has just joined and does not serve yet
// (model.Member.Joining): a member added and promoted moments ago, which the change that added it
// (a scale-up, a replacement) still waits for.
func joining(m *model.Cluster) bool {
	return slices.ContainsFunc(m.Listed(), func(mem *model.Member) bool { return mem.Joining(m.Now) })
}

// availableReason returns the reason and message of the Available condition.
func availableReason(s *scope, st *Step, h Health) [2]string {
	switch {
	case len(h.Corrupt) > 0:
		return [2]string{etcdv1beta1.ReasonCorrupt, fmt.Sprintf(
			"etcd raised the CORRUPT alarm for %s (its data diverged from its peers'): the cluster refuses writes; the operator replaces the member from its healthy peers, then disarms the alarm", strings.Join(h.Corrupt, ", "))}
	case h.NoSpace:
		return [2]string{etcdv1beta1.ReasonNoSpace, "etcd raised its NOSPACE alarm: the cluster serves reads but refuses writes until the alarm is disarmed (see the Progressing condition)"}
	case h.Available && len(h.InRaft) > 0:
		return [2]string{etcdv1beta1.ReasonQuorumHealthy, fmt.Sprintf(
			"%d of %d voting members are healthy, and %s joined moments ago and takes part in raft (its readiness probe passes), serving clients once etcd has published it (quorum %d)",
			h.HealthyVoters, h.Voters, strings.Join(h.InRaft, ", "), h.Quorum)}
	case h.Available:
		return [2]string{etcdv1beta1.ReasonQuorumHealthy,
			fmt.Sprintf("%d of %d voting members are healthy (quorum %d)", h.HealthyVoters, h.Voters, h.Quorum)}
	case Recovering(s.cluster):
		rec := s.cluster.Status.Recovery
		return [2]string{etcdv1beta1.ReasonRestoringFromBackup, fmt.Sprintf(
			"Quorum was lost without data (members %s); the cluster is being recreated from EtcdBackup %s (revision %d)",
			strings.Join(rec.LostMembers, ", "), rec.Backup, rec.Revision)}
	case st != nil && st.Kind == KindStalled && st.Reason == etcdv1beta1.ReasonQuorumDataLost:
		return [2]string{etcdv1beta1.ReasonQuorumDataLost, st.Message}
	case s.cluster.Status.ClusterID == "" && !s.m.Answered():
		return [2]string{etcdv1beta1.ReasonBootstrapping, "The initial members have not formed a cluster yet"}
	case Unreachable(s.m):
		return [2]string{etcdv1beta1.ReasonEtcdUnreachable, fmt.Sprintf(
			"No member answered the operator (%v), but %d member pods are Ready (their readiness probes reach etcd): the operator is cut off from the members; check the network between them (a NetworkPolicy, a firewall). Nothing is changed until it reaches them", s.m.EtcdErr, readyPods(s.m))}
	case !s.m.Answered():
		return [2]string{etcdv1beta1.ReasonQuorumLost, fmt.Sprintf("No member answered (%v); Ready member pods: %d, fewer than the quorum of %d: quorum is lost",
			s.m.EtcdErr, readyPods(s.m), s.m.Quorum())}
	case h.joinPending():
		return [2]string{etcdv1beta1.ReasonMemberJoining, fmt.Sprintf(
			"%d of %d voting members are healthy; %s joined moments ago and counts for quorum (%d) once its readiness probe passes, which shows it takes part in raft (it serves clients once etcd has published it)",
			h.HealthyVoters, h.Voters, strings.Join(h.Joining, ", "), h.Quorum)}
	case h.HealthyVoters >= h.Quorum:
		return [2]string{etcdv1beta1.ReasonQuorumLost, fmt.Sprintf(
			"%d of %d voting members are healthy, a quorum, but they report no common leader (an election is under way or the members are split)", h.HealthyVoters, h.Voters)}
	default:
		return [2]string{etcdv1beta1.ReasonQuorumLost,
			fmt.Sprintf("%d of %d voting members are healthy; quorum needs %d", h.HealthyVoters, h.Voters, h.Quorum)}
	}
}

// unhealthySummary names the members that keep the cluster from being whole; of a member that is down,
// since when, why, and when it will be replaced (quorate: the healthy voters make a quorum; without
// one nothing is replaced).
func unhealthySummary(spec *etcdv1beta1.EtcdClusterSpec, members []etcdv1beta1.MemberStatus, desired int32, quorate bool, notes map[string]memberNote) string {
	bad := downSummary(spec, members, quorate, notes)
	for _, m := range members {
		switch {
		case !m.Healthy && m.DownSince != nil: // in downSummary
		case !m.Healthy && m.Problem != "":
			bad = append(bad, m.Name+" is unhealthy ("+m.Problem+")")
		case !m.Healthy:
			bad = append(bad, m.Name+" is unhealthy")
		case m.Role == etcdv1beta1.RoleLearner:
			bad = append(bad, m.Name+" is a learner")
		}
	}
	msg := fmt.Sprintf("%s, %d desired", membership.CountMembers(len(members)), desired)
	if len(bad) > 0 {
		msg += ": " + strings.Join(bad, "; ")
	}
	return msg
}

// servedThroughService reports whether a healthy voter's pod is Ready, so that the client Service
// routes clients to a member that serves.
func servedThroughService(m *model.Cluster) bool {
	for _, mem := range m.Listed() {
		if mem.Voter() && mem.Healthy() && mem.PodReady() {
			return true
		}
	}
	return false
}

// What memberNotes says of a member that does not serve yet although nothing is wrong with it.
const (
	// memberJoining: model.Member.Joining, a new member that has joined and has not published itself.
	memberJoining = "joining"
	// memberStarting: model.Member.Starting, a member on a new pod that shows no problem.
	memberStarting = "starting"
)

// memberNote is what the pass knows of a listed member that the status does not record: state is
// memberJoining, memberStarting or ""; replaceAt is when ReplaceDue holds for it if it stays down as it
// is (see replaceAt), unless untriedSpec.
type memberNote struct {
	state     string
	replaceAt time.Time
	// untriedSpec: model.Cluster.DownOnUntriedSpec holds, the member is not replaced
	untriedSpec bool
	// rollbackAt: when the member, down on an untried spec, is rolled back to the pod it last served
	// on if it stays as it is (rollbackAt); zero when it is not to be
	rollbackAt time.Time
	// heldBy: a member's pod was rolled back from the current spec and the spec it serves on cannot be
	// built again (rollbackHolds): this member is not replaced by the policy meanwhile (ReplaceDue)
	heldBy string
	// rolling: a rolling update restarted the member onto the current spec and it does not serve yet,
	// its pod being recreated or starting without a problem (rollingRestart)
	rolling bool
	// rollingReplace: the member's pod, of an older spec, is stopping and its data on emptyDir goes
	// with it: a rolling update replaces it by a member of the current spec (rollingReplace)
	rollingReplace bool
	// podless: the member has no pod and keeps its claim: its pod is recreated on its data, and it is
	// not replaced by the policy (ReplaceDue: a new member's pod would be made from the same spec)
	podless bool
}

// memberNotes returns a memberNote for each member etcd lists, by name.
func memberNotes(m *model.Cluster, hash string) map[string]memberNote {
	out := map[string]memberNote{}
	for _, mem := range m.Listed() {
		n := memberNote{rolling: rollingRestart(mem, hash), rollingReplace: rollingReplace(m, mem, hash)}
		switch {
		case mem.Joining(m.Now):
			n.state = memberJoining
		case mem.Starting(m.Now):
			n.state = memberStarting
		}
		n.replaceAt = replaceAt(m, mem)
		n.untriedSpec = m.DownOnUntriedSpec(mem)
		n.rollbackAt = rollbackAt(m, mem)
		if rb := rollbackHolds(m, mem); rb != nil && mem.Pod != nil && replaceAtOnce(m, mem) == "" {
			n.heldBy = rb.Member
		}
		n.podless = mem.Pod == nil && mem.HasClaim() && replaceAtOnce(m, mem) == ""
		out[mem.Name] = n
	}
	return out
}

// memberStatuses lists the members as etcd reports them; when etcd did not answer, the members that have
// a pod or that the status last listed, none of them healthy, with what is known of each one's identity
// from the last time etcd answered, and as problem what its pod shows now ("no pod" without one), else
// the one recorded.
func memberStatuses(m *model.Cluster) []etcdv1beta1.MemberStatus {
	var out []etcdv1beta1.MemberStatus
	if !m.Answered() {
		for _, mem := range m.Members {
			if mem.Pod == nil && mem.Recorded == nil {
				continue
			}
			ms := etcdv1beta1.MemberStatus{Name: mem.Name, Role: etcdv1beta1.RoleVoter}
			if p := mem.Recorded; p != nil {
				ms.ID, ms.PeerURL, ms.ClientURL, ms.Role = p.ID, p.PeerURL, p.ClientURL, p.Role
				ms.DownSince, ms.Problem = p.DownSince, p.Problem
			}
			// what the pod shows now wins over what was recorded: an image that cannot be pulled, a
			// crash loop, a pod gone; a pod's state recorded earlier that no longer holds is dropped
			switch now := mem.PodProblem(); {
			case mem.Pod == nil:
				ms.Problem = model.NoPodProblem
			case now != "":
				ms.Problem = now
			case ms.Problem == model.PodTerminatingProblem || ms.Problem == model.NoPodProblem:
				ms.Problem = ""
			}
			out = append(out, ms)
		}
		return out
	}
	for _, mem := range m.Listed() {
		ms := etcdv1beta1.MemberStatus{Name: mem.Name, ID: etcd.FormatID(mem.ID()), Role: etcdv1beta1.RoleVoter,
			Healthy: mem.Healthy(), Leader: mem.ID() == m.Etcd.Leader}
		if mem.Learner() {
			ms.Role = etcdv1beta1.RoleLearner
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
		if !mem.DownSince.IsZero() {
			// the API keeps whole seconds: a finer time would differ from its own copy on every pass
			since := metav1.NewTime(mem.DownSince.Truncate(time.Second))
			ms.DownSince, ms.Problem = &since, mem.Problem()
		}
		out = append(out, ms)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// setCondition sets a condition; its lastTransitionTime changes only when its status does.
func setCondition(st *etcdv1beta1.EtcdClusterStatus, generation int64, condType string, status bool, reasonMessage [2]string) {
	cs := metav1.ConditionFalse
	if status {
		cs = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: condType, Status: cs, Reason: reasonMessage[0], Message: reasonMessage[1],
		ObservedGeneration: generation,
	})
}

// StatusEqual reports whether two statuses are the same, ignoring nothing: a pass writes only when
// something it observed changed.
func StatusEqual(a, b *etcdv1beta1.EtcdClusterStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// membershipStep reports whether p is a membership change in progress (members being added or
// removed, or the pods and claims of removed members still going).
func membershipStep(p *Step) bool {
	if p == nil || p.Kind != KindActing {
		return false
	}
	switch p.Reason {
	case etcdv1beta1.ReasonAddingMember, etcdv1beta1.ReasonPromotingLearner, etcdv1beta1.ReasonRemovingMember, etcdv1beta1.ReasonWaiting:
		return true
	}
	return false
}

// rolloutStep reports whether p is a step of a rolling update of the members.
func rolloutStep(p *Step) bool {
	if p == nil || p.Kind != KindActing {
		return false
	}
	switch p.Reason {
	case etcdv1beta1.ReasonRollingUpdate, etcdv1beta1.ReasonMovingLeader, etcdv1beta1.ReasonRolloutPaused:
		return true
	}
	return false
}

// rolloutRestarting reports whether a member that a rolling update restarted onto the spec of hash
// (its claim's AnnotationRolledOnto, which stays until it serves on that spec) does not serve yet, and
// its pod is being recreated or starts without a problem (PodProblem). Once the last member's pod is
// recreated, every pod is current (outdatedPods) and the rollout awaits nothing, yet that member is
// still starting: the rolling update is not over until it serves.
func rolloutRestarting(s *scope, hash string) bool {
	return slices.ContainsFunc(s.m.Listed(), func(m *model.Member) bool { return rollingRestart(m, hash) })
}

// rollingRestart reports whether a rolling update restarted m onto the spec of hash (its claim's
// AnnotationRolledOnto, which stays until it serves on that spec), and m does not serve yet while its
// pod is being recreated or starts without a problem (PodProblem).
func rollingRestart(m *model.Member, hash string) bool {
	return m.Claim != nil && m.Claim.Annotations[etcdv1beta1.AnnotationRolledOnto] == hash && !m.Serving() &&
		(!m.HasPod() || m.PodProblem() == "")
}

// rollingReplace reports whether mem, a member of m on emptyDir, has a pod built from an older spec
// than hash's that is stopping: its data goes with the pod, so a rolling update (which evicted it)
// replaces it by a new member of the current spec, one that copies its peers' data.
func rollingReplace(m *model.Cluster, mem *model.Member, hash string) bool {
	return m.Object.Spec.Storage.EmptyDir != nil && mem.PodTerminating() && mem.PodSpecHash() != hash
}

// outdatedPods counts the member pods built from an older spec than the current one, or that serve TLS
// otherwise than they are to now (model.Cluster.PodCurrent).
func outdatedPods(s *scope, opts resources.Options) int {
	hash, n := opts.SpecHash(s.cluster), 0
	for _, m := range s.m.Pods() {
		if !s.m.PodCurrent(m, hash) {
			n++
		}
	}
	return n
}

// SnapshotVersionProblem says why a cluster running clusterVersion cannot restore a snapshot taken
// from etcd snapshotVersion ("" when it can); see version.CheckRestore.
func SnapshotVersionProblem(snapshotVersion, clusterVersion string) string {
	if err := version.CheckRestore(snapshotVersion, clusterVersion); err != nil {
		return err.Error()
	}
	return ""
}

// PodProblems lists, as "name: problem" ("name, name: problem" for members with the same problem), what
// keeps the pods of the members from running etcd (model.Member.PodProblem: an image that cannot be
// pulled, a crash loop, an unschedulable pod), sorted; nil when no pod has one.
func PodProblems(m *model.Cluster) []string {
	who := map[string][]string{}
	for _, mem := range m.Pods() {
		if p := mem.PodProblem(); p != "" {
			who[p] = append(who[p], mem.Name)
		}
	}
	var out []string
	for p, names := range who {
		sort.Strings(names)
		out = append(out, strings.Join(names, ", ")+": "+p)
	}
	sort.Strings(out)
	return out
}

// RestoreFailures names the member pods whose restore init container failed, with what it said: a
// restore that cannot succeed (the snapshot is missing, its sha256 differs, the credentials are wrong)
// shows in the status rather than only as a crash-looping init container.
func RestoreFailures(m *model.Cluster) []string {
	var out []string
	for _, mem := range m.Pods() {
		name, p := mem.Name, mem.Pod
		for _, cs := range p.Status.InitContainerStatuses {
			if cs.Name != resources.RestoreContainerName {
				continue
			}
			if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
				continue // restored
			}
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 {
				t = cs.LastTerminationState.Terminated
			}
			if t != nil && t.ExitCode != 0 {
				msg, _, _ := strings.Cut(strings.TrimSpace(t.Message), "\n")
				if msg == "" {
					msg = fmt.Sprintf("exit code %d (%s), see its logs", t.ExitCode, t.Reason)
				}
				out = append(out, name+": "+msg)
			}
		}
	}
	sort.Strings(out)
	return out
}

// HasCondition reports whether the cluster's status already has the condition with that status and
// message (so that a warning is recorded once, not on every pass).
func HasCondition(c *etcdv1beta1.EtcdCluster, condType string, status metav1.ConditionStatus, message string) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == condType {
			return cond.Status == status && cond.Message == message
		}
	}
	return false
}

// AwaitHealthy is the step of a pass that found nothing to change while members etcd lists are not
// healthy (their containers restarting, or catching up): the cluster waits for them. While every such
// member is starting (model.Member.Starting: a pod made less than model.MemberStartGrace ago that
// shows no problem, such as the pod a rollout, a repair or a scale-up just made), has just joined
// (model.Member.Joining: added and promoted, publishing its name), or serves but its pod that young is
// not Ready yet (the client Service does not route to it until it is), the operator's own change is
// under way, which the Progressing condition says (True, reason WaitingForMembers). Otherwise
// it says that the operator has nothing to do now (False, reason MembersUnhealthy) instead of "matches
// its spec", with what it does next about each: when the member's pod is recreated and when the member
// is replaced (see RecreateDue and ReplaceDue), that it is not while it waits for its image, or that it
// is replaced once its stopping pod is gone when its data is deleted with it. A member that serves but
// for a NOSPACE alarm counts as healthy here: the NOSPACE phase speaks of it. It returns nil when every
// member is healthy. When every member it waits for serves and has been marked serving (or has no
// readiness gate), the step is Watched: the kubelet's report of the pod Ready is a pod update; it is
// looked at again no later than when the youngest such pod stops being new (MemberStartGrace), which no
// update marks.
func AwaitHealthy(m *model.Cluster) *Step {
	var down, starting []string
	kubeletOnly := true        // every member awaited waits only for the kubelet to report its pod Ready
	var untilOld time.Duration // how soon the first of those pods stops being new
	for _, mem := range m.Listed() {
		made := ""
		if mem.HasPod() {
			made = mem.Pod.CreationTimestamp.UTC().Format(time.RFC3339)
		}
		switch {
		case mem.Serving() && mem.NewPod(m.Now) && !mem.PodReady():
			// etcd serves the operator, the kubelet's probes have not passed yet: the client Service
			// routes to the member once they have (a second or two)
			starting = append(starting, mem.Name+" (serves; its pod, made at "+made+", is not Ready yet)")
			if d := mem.Pod.CreationTimestamp.Add(model.MemberStartGrace).Sub(m.Now); untilOld == 0 || d < untilOld {
				untilOld = max(d, time.Millisecond)
			}
			if gate := model.PodCondition(mem.Pod, resources.ServingCondition); resources.HasServingGate(mem.Pod) &&
				(gate == nil || gate.Status != corev1.ConditionTrue) {
				kubeletOnly = false // the operator marks it serving first
			}
		case mem.Serving():
		case mem.Starting(m.Now):
			starting = append(starting, mem.Name+" (its pod was made at "+made+")")
			kubeletOnly = false
		case mem.Joining(m.Now):
			starting = append(starting, mem.Name+" (joined; it serves once it has published its name through raft, within about 7 s)")
			kubeletOnly = false
		default:
			down = append(down, mem.Name+awaitedBecause(m, mem))
		}
	}
	sort.Strings(down)
	sort.Strings(starting)
	switch {
	case len(down) == 0 && len(starting) == 0:
		return nil
	case len(down) == 0:
		st := Acting(etcdv1beta1.ReasonWaitingForMembers, fmt.Sprintf("Waiting for %s to start, catch up and be Ready", strings.Join(starting, ", ")))
		// the pod turning Ready is a pod update: with many members starting at once the kubelet takes
		// tens of seconds to get to them, and a pass a second each found nothing new
		if st.Watched = kubeletOnly; st.Watched {
			st.After = untilOld
		}
		return st
	}
	msg := fmt.Sprintf("Waiting for %s to become healthy", strings.Join(down, ", "))
	if len(starting) > 0 {
		msg += fmt.Sprintf("; %s starting", strings.Join(starting, ", "))
	}
	return Stalled(etcdv1beta1.ReasonMembersUnhealthy, msg)
}

// awaitedBecause says, for AwaitHealthy's message, what the operator does next about mem, a member that
// is down and not starting: " (its pod is recreated at … if it is still down; replaced at …)".
func awaitedBecause(m *model.Cluster, mem *model.Member) string {
	spec := &m.Object.Spec
	if at := rollbackAt(m, mem); !at.IsZero() {
		return " (" + rollbackNote(memberNote{rollbackAt: at}) + ")"
	}
	if rb := rollbackHolds(m, mem); rb != nil && replaceAtOnce(m, mem) == "" && spec.ReplaceAfter() > 0 {
		return " (" + heldByRollbackNote(rb.Member) + ")"
	}
	switch p := mem.Pod; {
	case p != nil && p.DeletionTimestamp != nil && (mem.Claim == nil || mem.Claim.DeletionTimestamp != nil):
		// its data goes with it (a claim deleted, as replace-member does, or emptyDir): no clock to tell
		return " (its pod is stopping and its data is deleted: it is replaced once the pod is gone)"
	case mem.PullingImage():
		return " (its image is being pulled: it is neither recreated nor replaced meanwhile, a new pod would wait for the same pull)"
	case mem.WaitsForImage():
		return " (its etcd container waits for its image: it is neither recreated nor replaced, a new pod would wait the same way; if the image does not exist, fix spec.version or spec.image)"
	}
	if m.DownOnUntriedSpec(mem) {
		return " (" + untriedSpecNote + ")"
	}
	if why := replaceAtOnce(m, mem); why != "" && mem.Down() {
		// due now: the planner replaces it as soon as the other members have a quorum
		return " (" + why + ": it is replaced once the other members have a quorum)"
	}
	replaced := replaceAt(m, mem)
	if at := mem.DownSince.Add(spec.RecreateAfter()); !mem.DownSince.IsZero() && mem.HasPod() && !mem.Learner() && m.Now.Before(at) {
		s := " (its pod is recreated at " + at.UTC().Format(time.RFC3339) + " if it is still down"
		if spec.ReplaceAfter() > 0 {
			s += "; replaced at " + replaced.UTC().Format(time.RFC3339)
		}
		return s + ")"
	} else if spec.ReplaceAfter() > 0 && !mem.DownSince.IsZero() {
		return " (replaced at " + replaced.UTC().Format(time.RFC3339) + " if it is still down)"
	}
	return ""
}

// Unreachable reports whether no member answered the operator while a quorum of the member pods are
// Ready: kubelet's readiness probes reach etcd, so the operator is cut off from the members rather
// than the members from each other.
func Unreachable(m *model.Cluster) bool {
	return !m.Answered() && m.Voters() > 0 && readyPods(m) >= m.Quorum()
}

// readyPods counts the member pods that are Ready.
func readyPods(m *model.Cluster) int {
	n := 0
	for _, mem := range m.Pods() {
		if mem.PodReady() {
			n++
		}
	}
	return n
}

// memberName returns the name of the member etcd lists with that ID, or the ID in hex.
func memberName(m *model.Cluster, id uint64) string {
	for _, mem := range m.Listed() {
		if mem.ID() == id {
			return mem.Name
		}
	}
	return etcd.FormatID(id)
}

// RestartLosesData reports whether restarting a member of c deletes the cluster's only copy of its
// data: a 1-member cluster on emptyDir (an emptyDir lives and dies with its pod). Admission refuses
// such a change; a pass that finds one anyway (the webhook bypassed) does not roll the member.
func RestartLosesData(c *etcdv1beta1.EtcdCluster) bool {
	return c.Spec.Storage.EmptyDir != nil && c.Spec.ReplicasOrDefault() == 1
}

// claimsDeleted says, of each member whose claim is being deleted while its pod runs on it (persistent
// storage only), that its data goes when its pod stops and what the operator does about it (the
// controller's reconcileClaimDeleted): "the claim data-demo-1 of demo-1 is being deleted (since …):
// its data goes when its pod stops; demo-1 is replaced once every other member serves"; nothing is
// done to the only member, nor while the cluster is paused, or with replaceUnhealthyMemberAfter 0s.
func claimsDeleted(m *model.Cluster) []string {
	var out []string
	for _, mem := range m.Listed() {
		if !mem.ClaimDeletedUnderPod() {
			continue
		}
		what := mem.Name + " is replaced once every other member serves and no other change is under way"
		switch {
		case SoleMember(m):
			what = mem.Name + " is the only member, so it is not replaced (its data has no other copy): take a backup, or scale to 3 members (the new members copy its data, then it is replaced)"
		case mem.Learner():
			what = mem.Name + " is a learner being added, whose data is a copy of the voters': it is removed and its pod deleted at once, and a new learner joins on a new claim"
		case m.Object.Spec.Paused:
			what = "the cluster is paused: nothing is done"
		case m.Object.Spec.ReplaceAfter() <= 0:
			what = "spec.recovery.replaceUnhealthyMemberAfter is 0s: " + mem.Name + " is replaced once its pod stops"
		}
		out = append(out, fmt.Sprintf("the claim %s of %s is being deleted (since %s): its data goes when its pod stops; %s",
			mem.Claim.Name, mem.Name, mem.Claim.DeletionTimestamp.UTC().Format(time.RFC3339), what))
	}
	return out
}
