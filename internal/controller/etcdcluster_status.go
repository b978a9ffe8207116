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
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// computeStatus sets the cluster's status from what the pass observed and did, without I/O.
// observedGeneration advances only when the pass succeeded.
func computeStatus(s *scope, opts resources.Options, passOK bool) {
	c := s.cluster
	st := &c.Status
	if passOK {
		st.ObservedGeneration = c.Generation
	}
	st.Selector = labels.SelectorFromSet(resources.SelectorLabels(c)).String()
	st.ClientService = resources.ClientServiceName(c)
	st.Replicas = int32(len(s.pods))

	st.Members = memberStatuses(s, opts)
	var healthyVoters, voters, learners int32
	st.Leader = ""
	versions := []string{}
	for _, m := range st.Members {
		if m.Role == etcdv1alpha1.RoleLearner {
			learners++
		}
		if m.Role == etcdv1alpha1.RoleVoter {
			voters++
			if m.Healthy {
				healthyVoters++
			}
		}
		if m.Leader {
			st.Leader = m.Name
		}
		if m.Version != "" {
			versions = append(versions, m.Version)
		}
	}
	st.ReadyReplicas = healthyVoters
	if len(versions) > 0 {
		sort.Slice(versions, func(i, j int) bool { return versionLess(versions[i], versions[j]) })
		st.CurrentVersion = versions[0]
	}
	if s.etcd != nil {
		st.ClusterID = etcd.FormatID(s.etcd.clusterID)
	}

	desired := c.Spec.ReplicasOrDefault()
	quorum := voters/2 + 1
	// One NOSPACE alarm, whichever member raised it, makes every member refuse writes: a quorum that
	// serves reads but refuses writes is not available, and not lost either.
	noSpace := s.etcd != nil && s.etcd.anyNoSpace() && s.etcd.leader != 0 && voters > 0 && servingVoters(s) >= quorum
	available := !noSpace && s.etcd != nil && s.etcd.leader != 0 && voters > 0 && healthyVoters >= quorum
	gen := c.Generation
	reason := availableReason(s, available, healthyVoters, voters, quorum)
	if noSpace {
		reason = [2]string{etcdv1alpha1.ReasonNoSpace, "etcd raised its NOSPACE alarm: the cluster serves reads but refuses writes until the alarm is disarmed (see the Progressing condition)"}
	}
	setCondition(st, gen, etcdv1alpha1.ConditionAvailable, available, reason)

	degraded := healthyVoters < desired || voters != desired
	degradedReason, degradedMsg := etcdv1alpha1.ReasonAllMembersHealthy, fmt.Sprintf("All %d members are healthy voters", desired)
	if degraded {
		degradedReason, degradedMsg = etcdv1alpha1.ReasonMembersUnhealthy, unhealthySummary(st.Members, desired)
		if failed := restoreFailures(s); len(failed) > 0 {
			degradedMsg += "; the restore of the snapshot fails: " + strings.Join(failed, "; ")
		}
	}
	setCondition(st, gen, etcdv1alpha1.ConditionDegraded, degraded, [2]string{degradedReason, degradedMsg})

	switch {
	case s.progress != nil:
		setCondition(st, gen, etcdv1alpha1.ConditionProgressing, true, [2]string{s.progress.reason, s.progress.message})
	case s.blocked != nil:
		setCondition(st, gen, etcdv1alpha1.ConditionProgressing, false, [2]string{s.blocked.reason, s.blocked.message})
	case s.stalled != nil:
		setCondition(st, gen, etcdv1alpha1.ConditionProgressing, false, [2]string{s.stalled.reason, s.stalled.message})
	default:
		setCondition(st, gen, etcdv1alpha1.ConditionProgressing, false, [2]string{etcdv1alpha1.ReasonReconciled, "The cluster matches its spec"})
	}

	if s.invalid != nil {
		setCondition(st, gen, etcdv1alpha1.ConditionValid, false, [2]string{s.invalid.reason, s.invalid.message})
	} else {
		setCondition(st, gen, etcdv1alpha1.ConditionValid, true, [2]string{etcdv1alpha1.ReasonSpecValid, "The spec can be acted on"})
	}
	if s.consistency != nil {
		setCondition(st, gen, etcdv1alpha1.ConditionDataInconsistent, s.consistency.reason == etcdv1alpha1.ReasonHashMismatch, [2]string{s.consistency.reason, s.consistency.message})
	}
	switch {
	case s.dataLoss != nil && s.dataLoss.permanent():
		setCondition(st, gen, etcdv1alpha1.ConditionQuorumDataLost, true, [2]string{etcdv1alpha1.ReasonQuorumDataLost, s.dataLoss.message(c.Spec.Storage.EmptyDir != nil)})
	case s.dataLoss != nil:
		setCondition(st, gen, etcdv1alpha1.ConditionQuorumDataLost, false, [2]string{etcdv1alpha1.ReasonDataKept,
			fmt.Sprintf("No quorum answers, but %d of the %d voting members keep their data (quorum %d): it can come back", s.dataLoss.kept(), len(s.dataLoss.voters), s.dataLoss.quorum())})
	case s.etcd != nil || recovering(c):
		if meta.FindStatusCondition(st.Conditions, etcdv1alpha1.ConditionQuorumDataLost) != nil {
			setCondition(st, gen, etcdv1alpha1.ConditionQuorumDataLost, false, [2]string{etcdv1alpha1.ReasonDataKept, "A quorum answers, or the cluster is being restored"})
		}
	}
	if s.volumes != nil {
		setCondition(st, gen, etcdv1alpha1.ConditionVolumesResized, s.volumes.reason == etcdv1alpha1.ReasonVolumesMatchSpec, [2]string{s.volumes.reason, s.volumes.message})
	}
	applyBackupStatus(s)

	switch {
	case c.DeletionTimestamp != nil:
		st.Phase = etcdv1alpha1.PhaseDeleting
	case recovering(c):
		st.Phase = etcdv1alpha1.PhaseRestoring
	case st.ClusterID == "":
		st.Phase = etcdv1alpha1.PhaseCreating
	case !available && !noSpace:
		st.Phase = etcdv1alpha1.PhaseQuorumLost
	case s.etcd != nil && (voters+learners != desired || learners > 0 || membershipStep(s.progress)):
		st.Phase = etcdv1alpha1.PhaseScaling
	case rolloutStep(s.progress) || outdatedPods(s, opts) > 0:
		st.Phase = etcdv1alpha1.PhaseUpgrading
	case degraded:
		st.Phase = etcdv1alpha1.PhaseDegraded
	default:
		st.Phase = etcdv1alpha1.PhaseRunning
	}
}

// servingVoters counts the voters that are healthy, or healthy but for a NOSPACE alarm.
func servingVoters(s *scope) int32 {
	var n int32
	for _, m := range s.etcd.members {
		if !m.IsLearner && s.etcd.serving(m.ID) {
			n++
		}
	}
	return n
}

// availableReason returns the reason and message of the Available condition.
func availableReason(s *scope, available bool, healthy, voters, quorum int32) [2]string {
	switch {
	case available:
		return [2]string{etcdv1alpha1.ReasonQuorumHealthy,
			fmt.Sprintf("%d of %d voting members are healthy (quorum %d)", healthy, voters, quorum)}
	case recovering(s.cluster):
		rec := s.cluster.Status.Recovery
		return [2]string{etcdv1alpha1.ReasonRestoringFromBackup, fmt.Sprintf(
			"Quorum was lost without data (members %s); the cluster is being recreated from EtcdBackup %s (revision %d)",
			strings.Join(rec.LostMembers, ", "), rec.Backup, rec.Revision)}
	case s.stalled != nil && s.stalled.reason == etcdv1alpha1.ReasonQuorumDataLost:
		return [2]string{etcdv1alpha1.ReasonQuorumDataLost, s.stalled.message}
	case s.cluster.Status.ClusterID == "" && s.etcd == nil:
		return [2]string{etcdv1alpha1.ReasonBootstrapping, "The initial members have not formed a cluster yet"}
	case s.etcd == nil:
		return [2]string{etcdv1alpha1.ReasonEtcdUnreachable, fmt.Sprintf("No member answered: %v", s.etcdErr)}
	default:
		return [2]string{etcdv1alpha1.ReasonQuorumLost,
			fmt.Sprintf("%d of %d voting members are healthy; quorum needs %d", healthy, voters, quorum)}
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

// memberStatuses lists the members as etcd reports them, joined with their pods; when etcd did not
// answer, the members the pods stand for, none of them healthy.
func memberStatuses(s *scope, opts resources.Options) []etcdv1alpha1.MemberStatus {
	c := s.cluster
	var out []etcdv1alpha1.MemberStatus
	if s.etcd == nil {
		for name := range s.pods {
			out = append(out, etcdv1alpha1.MemberStatus{Name: name, Role: etcdv1alpha1.RoleVoter})
		}
		// keep what is known of each member's identity from the last time etcd answered
		prev := map[string]etcdv1alpha1.MemberStatus{}
		for _, m := range c.Status.Members {
			prev[m.Name] = m
		}
		for i := range out {
			if p, ok := prev[out[i].Name]; ok {
				out[i].ID, out[i].PeerURL, out[i].ClientURL, out[i].Role = p.ID, p.PeerURL, p.ClientURL, p.Role
			}
		}
		// members etcd listed last time whose pods are gone stay listed, unhealthy, until etcd answers
		for name, p := range prev {
			if _, ok := s.pods[name]; !ok {
				out = append(out, etcdv1alpha1.MemberStatus{Name: name, ID: p.ID, PeerURL: p.PeerURL, ClientURL: p.ClientURL, Role: p.Role})
			}
		}
	} else {
		for _, m := range s.etcd.members {
			ms := etcdv1alpha1.MemberStatus{
				Name:    m.Name,
				ID:      etcd.FormatID(m.ID),
				Role:    etcdv1alpha1.RoleVoter,
				Healthy: s.etcd.healthy(m.ID),
				Leader:  m.ID == s.etcd.leader,
			}
			if m.IsLearner {
				ms.Role = etcdv1alpha1.RoleLearner
			}
			if len(m.PeerURLs) > 0 {
				ms.PeerURL = m.PeerURLs[0]
			}
			if len(m.ClientURLs) > 0 {
				ms.ClientURL = m.ClientURLs[0]
			}
			ms.Name = memberName(opts, c, m)
			if st, ok := s.etcd.status[m.ID]; ok {
				ms.Version = st.Version
				ms.DBSizeBytes = st.DBSizeBytes
			}
			out = append(out, ms)
		}
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

// versionLess compares "x.y.z" versions numerically.
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		var x, y int
		_, _ = fmt.Sscan(pa[i], &x)
		_, _ = fmt.Sscan(pb[i], &y)
		if x != y {
			return x < y
		}
	}
	return len(pa) < len(pb)
}

// membershipStep reports whether p is a membership change in progress (members being added or
// removed, or the pods and claims of removed members still going).
func membershipStep(p *progress) bool {
	if p == nil {
		return false
	}
	switch p.reason {
	case etcdv1alpha1.ReasonAddingMember, etcdv1alpha1.ReasonPromotingLearner, etcdv1alpha1.ReasonRemovingMember, etcdv1alpha1.ReasonWaiting:
		return true
	}
	return false
}

// rolloutStep reports whether p is a step of a rolling update of the members.
func rolloutStep(p *progress) bool {
	if p == nil {
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
	for _, p := range s.pods {
		if p.Annotations[etcdv1alpha1.AnnotationSpecHash] != hash {
			n++
		}
	}
	return n
}
