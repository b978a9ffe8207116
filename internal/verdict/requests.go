package verdict

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// The requests a user makes with an annotation on the EtcdCluster (AnnotationDefragment,
// AnnotationMoveLeader, AnnotationReplaceMember). A request is refused (the annotation removed with a
// RequestRefused event) only when it can never be carried out as asked; while it merely cannot be
// carried out yet (the cluster is paused, rolls, changes its membership, has a member down) it waits,
// annotation kept, and is carried out once it can.

// RefuseMoveLeader returns why moving leadership to member name of m can never be done, "" when it
// can (or may once the cluster settles): a name that is not one of the cluster's members, or a learner
// (etcd hands leadership only to a voter). It needs m to have answered.
func RefuseMoveLeader(m *model.Cluster, name string) string {
	if why := unknownMember(m, name, etcdv1beta1.AnnotationMoveLeader); why != "" {
		return why
	}
	if mem := m.Member(name); mem != nil && mem.Learner() {
		return fmt.Sprintf("%s=%s: %s is a learner, which cannot lead; ask again once it is a voter (kubectl etcd status shows its role)",
			etcdv1beta1.AnnotationMoveLeader, name, name)
	}
	return ""
}

// SoleMember reports whether m's cluster has (or asks for) a single voting member: its data has no
// other copy to replace it from.
func SoleMember(m *model.Cluster) bool { return m.Desired < 2 || m.Voters() < 2 }

// RefuseReplace returns why replacing member name of m can never be done, "" when it can (or may once
// the cluster settles): a cluster of one member (its only copy of the data would go), a name that is
// not one of the cluster's members, or a learner (it is being added, and has no data of its own yet).
// It needs m to have answered.
func RefuseReplace(m *model.Cluster, name string) string {
	key := etcdv1beta1.AnnotationReplaceMember
	if SoleMember(m) {
		return fmt.Sprintf("%s=%s: the cluster has one member, whose data would be lost with it; scale it to 3 members first, or restore a backup into a new EtcdCluster",
			key, name)
	}
	if why := unknownMember(m, name, key); why != "" {
		return why
	}
	if mem := m.Member(name); mem != nil && mem.Learner() {
		return fmt.Sprintf("%s=%s: %s is a learner being added to the cluster, with no data of its own to replace; if it does not catch up, the operator replaces it on its own",
			key, name, name)
	}
	return ""
}

// unknownMember returns why name is not a member of m's cluster, "" when it is: etcd lists it, or it is
// one of the members spec.replicas asks for (being added, it may be listed soon).
func unknownMember(m *model.Cluster, name, key string) string {
	if mem := m.Member(name); mem != nil && mem.Listed() {
		return ""
	}
	if i, ok := resources.MemberOrdinal(m.Object, name); ok && i < m.Desired {
		return ""
	}
	names := make([]string, 0, len(m.Listed()))
	for _, mem := range m.Listed() {
		names = append(names, mem.Name)
	}
	sort.Strings(names)
	return fmt.Sprintf("%s=%s: the cluster has no member %s (its members: %s)", key, name, name, strings.Join(names, ", "))
}

// ReplaceWait returns why replacing member name of m must wait, "" when it may be done now: etcd did
// not answer; the membership is changing (a learner, a member missing or to be removed, a pod or
// claim being deleted, or of a name etcd does not list), which a replacement in progress is; a
// restore, CA rotation, TLS switch or the enabling of authentication is under way; another member is
// not healthy (without the member, the healthy voters left must still be every other voter, so that a
// further failure during the replacement costs no more than it would have before); or a member other
// than name lacks its pod or claim. name itself may be down, or its claim being deleted (its pod still
// running on it): that is what a replacement is for.
func ReplaceWait(m *model.Cluster, name string) string {
	c := m.Object
	if !m.Answered() {
		return "etcd did not answer"
	}
	if why := busy(c); why != "" {
		return why
	}
	if listed := len(m.Listed()); listed != m.Desired || m.Learners() > 0 {
		return fmt.Sprintf("the membership is changing (%d members listed, %d learners, %d asked for)", listed, m.Learners(), m.Desired)
	}
	persistent := c.Spec.Storage.EmptyDir == nil
	for _, mem := range m.Members {
		switch {
		case !mem.Listed():
			return fmt.Sprintf("%s has a pod or claim but is not a member: the membership is changing", mem.Name)
		case mem.PodTerminating() || (mem.ClaimTerminating() && mem.Name != name):
			return fmt.Sprintf("the pod or claim of %s is being deleted: a replacement or restart is under way", mem.Name)
		case mem.Name == name:
			continue
		case !mem.Serving():
			return fmt.Sprintf("member %s is not healthy: replacing %s too could lose quorum", mem.Name, name)
		case !mem.HasPod() || (persistent && !mem.HasClaim()):
			return fmt.Sprintf("member %s lacks its pod or claim: it is being recreated", mem.Name)
		}
	}
	return ""
}

// busy returns what long change of c is under way, as the status recorded it, "" when none is.
func busy(c *etcdv1beta1.EtcdCluster) string {
	if r := c.Status.Recovery; r != nil && r.Phase != etcdv1beta1.RecoverySucceeded {
		return "a restore from a backup is under way"
	}
	if t := c.Status.TLS; t != nil && t.CARotation != nil {
		return "a rotation of the CA is under way"
	}
	under := map[string]string{
		etcdv1beta1.ReasonSwitchingTLS:        "a switch of spec.tls is under way",
		etcdv1beta1.ReasonRotatingCA:          "a rotation of the CA is under way",
		etcdv1beta1.ReasonEnablingAuth:        "authentication is being enabled",
		etcdv1beta1.ReasonRestoringFromBackup: "a restore from a backup is under way",
	}
	for _, cond := range c.Status.Conditions {
		if why := under[cond.Reason]; cond.Type == etcdv1beta1.ConditionProgressing && why != "" {
			return why
		}
	}
	return ""
}

// RequestedDefragmentation returns the members to defragment for a request: pending (what status
// .maintenance recorded as still to do) when the request is under way, else every voter; either way
// only members etcd lists as voters, followers by name and the leader last.
func RequestedDefragmentation(m *model.Cluster, pending []string, underway bool) []string {
	var out []string
	for _, mem := range m.Listed() {
		if mem.Voter() && (!underway || slices.Contains(pending, mem.Name)) {
			out = append(out, mem.Name)
		}
	}
	leader := ""
	if l := m.Leader(); l != nil {
		leader = l.Name
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i] == leader) != (out[j] == leader) {
			return out[j] == leader
		}
		return out[i] < out[j]
	})
	return out
}
