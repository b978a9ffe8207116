// Package rollout decides, as a pure function of what was observed, the next step of a rolling change
// of the member pods (a new etcd version or image, new resources, scheduling or etcd options): one
// member at a time, followers first, the leader last after handing leadership to an up-to-date
// follower, and only while every member is ready, healthy and caught up.
package rollout

import (
	"fmt"
	"sort"
	"strings"
)

// Member is one etcd member as the rollout sees it.
type Member struct {
	// Name is the member's (and its pod's) name.
	Name string
	// ID is the etcd member ID.
	ID uint64
	// UpToDate is true when the member's pod was built from the current spec.
	UpToDate bool
	// Ready is true when the member's pod exists, is not being deleted and is Ready.
	Ready bool
	// Healthy is true when the member answered a linearizable read through its own endpoint, which it
	// can only do once it has applied everything the leader committed before the read: it has caught up.
	Healthy bool
	// Learner is true for a member that does not vote yet.
	Learner bool
	// Going is true when the member's pod is being deleted (a restart under way, or a repair).
	Going bool
	// Starting is true when the member's pod is new and shows no problem, its etcd not serving yet
	// (see model.Member.Starting): a restart that is coming back.
	Starting bool
	// NewPod is true when the member's pod, not being deleted, was made less than
	// model.MemberStartGrace ago (model.Member.NewPod): a member that serves on it but whose pod is not
	// Ready yet is a restart finishing (the kubelet's probe has not passed yet), not a problem.
	NewPod bool
	// Problem says in one line why the member does not serve, as model.Member.Problem reads it (a crash
	// loop, an image that cannot be pulled, etcd's error); empty when it serves or nothing is known.
	Problem string
}

// State is what the rollout needs to decide.
type State struct {
	// Members are the registered etcd members.
	Members []Member
	// Leader is the ID of the current leader, 0 when there is none.
	Leader uint64
}

// Kind is the kind of the next step.
type Kind string

// The steps of a rollout.
const (
	// None: every member runs the current spec.
	None Kind = "None"
	// Wait: a member is out of date but the rollout is paused; Reason says why.
	Wait Kind = "Wait"
	// Restart: recreate Member's pod with the current spec (on its data volume).
	Restart Kind = "Restart"
	// MoveLeader: hand leadership from the out-of-date leader Member to Target first.
	MoveLeader Kind = "MoveLeader"
	// AwaitMember: Member's pod is being deleted, or is new and starting: a restart is under way, and
	// the rollout goes on once it is back. Reason says which.
	AwaitMember Kind = "AwaitMember"
)

// Action is the next step.
type Action struct {
	Kind Kind
	// Member is the member to restart, or the leader to move leadership from.
	Member string
	// ID is Member's etcd ID.
	ID uint64
	// Target and TargetID name the member leadership moves to (MoveLeader only).
	Target   string
	TargetID uint64
	// Reason says why, for events and conditions.
	Reason string
	// Remaining is the number of out-of-date members, this one included.
	Remaining int
}

// awaitMember returns the AwaitMember step when a member's pod is being deleted, or when every member
// that is not ready and healthy is starting on a new pod built from the current spec, or serves on one
// whose readiness probe has not passed yet: the restart of
// the member is under way (the rollout's own, or a repair's), and restarting that member again, or the
// next one, would only take more down. A member starting on a pod of an older spec (the spec changed
// again, say to undo a change that cannot run) is not waited for: Next recreates it with the current
// one. n is the number of out-of-date members.
func awaitMember(members []Member, n int) (Action, bool) {
	var starting, described []string
	for _, m := range members {
		switch {
		case m.Going:
			return Action{Kind: AwaitMember, Member: m.Name, ID: m.ID, Remaining: n, Reason: fmt.Sprintf(
				"the pod of %s is being deleted; the rollout goes on once it is back with the current spec (%d of %d members to update)", m.Name, n, len(members))}, true
		case m.Starting && m.UpToDate:
			starting, described = append(starting, m.Name), append(described, m.Name)
		case m.UpToDate && m.NewPod && m.Healthy && !m.Ready && !m.Learner:
			starting, described = append(starting, m.Name), append(described, m.Name+" (serves; its pod is not Ready yet)")
		case m.Learner || !m.Ready || !m.Healthy:
			return Action{}, false
		}
	}
	if len(starting) == 0 {
		return Action{}, false
	}
	return Action{Kind: AwaitMember, Member: starting[0], Remaining: n, Reason: fmt.Sprintf(
		"%s is starting on a new pod; the rollout goes on once it is ready and healthy (%d of %d members to update)", strings.Join(described, ", "), n, len(members))}, true
}

// notReadyMembers says of each member that is a learner, not ready or not healthy which it is, and
// why when its Problem says ("demo-1 is not ready: etcd container CrashLoopBackOff …").
func notReadyMembers(members []Member) []string {
	var out []string
	for _, m := range members {
		why := ""
		if m.Problem != "" {
			why = ": " + m.Problem
		}
		switch {
		case m.Learner:
			out = append(out, m.Name+" is a learner")
		case !m.Ready:
			out = append(out, m.Name+" is not ready"+why)
		case !m.Healthy:
			out = append(out, m.Name+" is not healthy"+why)
		}
	}
	return out
}

// Next returns the single next step of the rollout. It restarts a member only when every member is
// ready and healthy (so at most one is ever down, and each restarted member has caught up before the
// next one goes), or when the only member that is down is itself out of date (recreating it takes
// nothing else down); it restarts followers before the leader, and the leader of a multi-member
// cluster only after leadership has moved to an up-to-date follower.
func Next(s State) Action {
	members := append([]Member(nil), s.Members...)
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
	var outdated []Member
	for _, m := range members {
		if !m.UpToDate {
			outdated = append(outdated, m)
		}
	}
	if len(outdated) == 0 {
		return Action{Kind: None}
	}
	n := len(outdated)
	if a, ok := awaitMember(members, n); ok {
		return a
	}
	notReady := notReadyMembers(members)
	if len(notReady) == 1 {
		// The one member that is down is itself out of date (for example its new image cannot be pulled,
		// or it crash-loops on a flag the spec no longer has): recreating it with the current spec takes
		// down no other member, and is the only way a fixed spec can reach it.
		for _, m := range outdated {
			if !m.Learner && m.ID != s.Leader && (!m.Ready || !m.Healthy) {
				return Action{Kind: Restart, Member: m.Name, ID: m.ID, Remaining: n,
					Reason: fmt.Sprintf("%s is down and runs an old spec: recreating it with the current one (%d of %d members to update)", m.Name, n, len(members))}
			}
		}
	}
	if len(notReady) > 0 {
		return Action{Kind: Wait, Remaining: n, Reason: fmt.Sprintf(
			"%d of %d members to update; paused until every member is ready and healthy (%s)", n, len(members), strings.Join(notReady, ", "))}
	}
	if s.Leader == 0 {
		return Action{Kind: Wait, Remaining: n, Reason: fmt.Sprintf("%d of %d members to update; paused: the cluster has no leader", n, len(members))}
	}
	for _, m := range outdated {
		if m.ID != s.Leader {
			return Action{Kind: Restart, Member: m.Name, ID: m.ID, Remaining: n,
				Reason: fmt.Sprintf("follower %s runs an old spec (%d of %d members to update; the leader goes last)", m.Name, n, len(members))}
		}
	}
	leader := outdated[0] // only the leader is left
	if len(members) == 1 {
		return Action{Kind: Restart, Member: leader.Name, ID: leader.ID, Remaining: 1,
			Reason: fmt.Sprintf("the only member %s runs an old spec (a single-member cluster is unavailable while it restarts)", leader.Name)}
	}
	for _, m := range members {
		if m.ID != s.Leader && m.UpToDate {
			return Action{Kind: MoveLeader, Member: leader.Name, ID: leader.ID, Target: m.Name, TargetID: m.ID, Remaining: 1,
				Reason: fmt.Sprintf("the leader %s is the last member to update; moving leadership to %s first", leader.Name, m.Name)}
		}
	}
	// unreachable: every other member is an up-to-date, healthy follower at this point
	return Action{Kind: Wait, Remaining: 1, Reason: "no up-to-date follower to move leadership to"}
}
