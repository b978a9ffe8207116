// Package membership decides the one next safe change to an etcd cluster's membership. Next is a pure
// function of what was observed (etcd's member list and health, the member pods and claims, the desired
// member names); the controller carries out what it returns, one action per pass, and observes again.
//
// The invariants it keeps (each has a test):
//  1. At most one membership change in flight, at most one learner.
//  2. Nothing changes without a quorum of healthy voters (a new voter that takes part in raft and
//     does not serve yet counts for it, Member.InRaft). A member is added only when every voter is
//     healthy, or is a new member that has joined and not yet served (Member.Joining); a healthy voter
//     is removed only when the healthy voters left still make a quorum of the voters left. A member that is down may always be removed: that lowers no healthy count.
//  3. Scale-down removes, in order: voters that are down, learners, then followers (highest ordinal
//     first); never the leader, since a follower is always left to remove.
//  4. A member is removed from etcd before its pod and claim are deleted, and a pod or claim left from a
//     removed member is deleted before a member of that name is added again, so no member ever starts on
//     a removed member's data. With State.AwaitAdd, every member to be added gets a new claim and a pod
//     before it is added, under a name no other pod or claim uses; each pod holds etcd back until its
//     member is added, and is deleted like a removed member's if the member is no longer one to add.
//  5. A voter whose data is gone (no pod and no claim, and it does not answer) is removed, then added
//     back as a new learner.
//  6. A member the caller marks for replacement (Member.Replace: down longer than the cluster's policy;
//     a member whose data diverged from its peers', which the caller counts as not healthy although it
//     answers) is removed only while it is not healthy, and only with a quorum of healthy voters (as every
//     change); it comes back, like a lost voter, as a new learner under a new member ID on fresh data.
package membership

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Member is one etcd member as the planner sees it.
type Member struct {
	// ID is the etcd member ID.
	ID uint64
	// Name is the member's name: its pod's name. For a learner that has not started, etcd reports no
	// name; the caller derives it from the peer URL.
	Name string
	// IsLearner is true for a learner (a non-voting member catching up).
	IsLearner bool
	// Started is true once the member's process has joined (etcd reports its name).
	Started bool
	// Healthy is true when the member answered in this pass: a linearizable read for a voter, its
	// status for a learner.
	Healthy bool
	// Joining is true for a new member that etcd lists under its name, whose etcd started moments ago
	// and does not serve yet: etcd may take up to its publish timeout (7 s) to serve after joining,
	// while it takes part in raft (etcd-io/etcd#16436). The next member may be added meanwhile; it
	// never counts as healthy for quorum.
	Joining bool
	// InRaft is true for a Joining voter that has shown it takes part in raft (its readiness probe,
	// a linearizable read through the leader, passed): it counts for quorum, not as healthy.
	InRaft bool
	// Replace, when not empty, says why the member is to be replaced (removed, then added back as a new
	// member): down longer than the cluster allows, or its data diverged; ignored while it is healthy.
	Replace string
}

// Resources is what Kubernetes holds for one member name.
type Resources struct {
	// Pod is true when the member's pod exists and is not being deleted.
	Pod bool
	// PodTerminating is true while the pod is being deleted.
	PodTerminating bool
	// Data is true when the member's claim exists and is not being deleted (always false with emptyDir).
	Data bool
	// DataTerminating is true while the claim is being deleted.
	DataTerminating bool
	// PodStuck is true when the pod has been terminating well past its grace period: its node is gone
	// or does not answer, and nothing will finish the deletion.
	PodStuck bool
	// Awaiting is true for the pod of a name etcd does not list that was created to join (with a new
	// claim) before its member is added: it holds back etcd until etcd lists the member (State.AwaitAdd).
	// It is also true, with Pod false, for such a new claim whose pod is not there (not yet seen, or
	// gone): CreateAwaitingPod makes the pod, on that claim.
	Awaiting bool
	// Addressed is true when such a pod has its address (and so its DNS name) and waits.
	Addressed bool
	// Problem says, of an Awaiting pod, what keeps it from running, as Kubernetes reports it ("pod not
	// scheduled: Unschedulable …", an image it cannot pull), "" when nothing does (model.Member.PodProblem).
	Problem string
}

// State is what one pass observed.
type State struct {
	// Cluster is the EtcdCluster's name; member names are "<Cluster>-<ordinal>".
	Cluster string
	// Replicas is the number of voting members the spec asks for.
	Replicas int
	// Members is etcd's member list.
	Members []Member
	// Leader is the leader's member ID, 0 when there is none.
	Leader uint64
	// Resources are the pods and claims of every member name that has one.
	Resources map[string]Resources
	// AwaitAdd: every member is added only once its pod exists and has its address, so that its DNS
	// name resolves when the leader first dials it (CreateAwaitingPod; the pod holds etcd back until
	// etcd lists the member). A name the leader looks up before it exists is answered "no such host",
	// and the DNS server answers every lookup from that negative cache until it expires (5 s with
	// CoreDNS's kubernetes plugin) and caches the next "no such host" while the pod still has no
	// address: the leader cannot send the new member its snapshot, and etcd refuses its promotion, for
	// up to that long after the pod has started (measured: 4 s of a 3 -> 5 scale-up). While a member is
	// being added (a pod getting its address, a learner catching up), the pods of the members to add
	// after it are made ahead, so that their volumes are provisioned meanwhile. Without AwaitAdd each
	// member is added first and its pod made after.
	AwaitAdd bool
}

// Kind is what an Action does.
type Kind string

// The actions. Each is idempotent, so that replaying one after a crash is safe.
const (
	// None: the membership matches the spec.
	None Kind = "None"
	// Wait: nothing can be done safely now; Reason says why.
	Wait Kind = "Wait"
	// AddLearner: add Member as a learner (MemberAddAsLearner with its peer URL), then create its claim
	// and pod with --initial-cluster-state=existing.
	AddLearner Kind = "AddLearner"
	// CreatePod: create the pod (and claim) of Member, a learner that was added but has no pod.
	CreatePod Kind = "CreatePod"
	// CreateAwaitingPod: create a new claim and a pod for Member, which is to be added next: the pod
	// waits until etcd lists the member before etcd starts (State.AwaitAdd). A claim made for it
	// already (Resources.Awaiting without Pod) is used.
	CreateAwaitingPod Kind = "CreateAwaitingPod"
	// Promote: promote learner ID to a voter.
	Promote Kind = "Promote"
	// Remove: remove member ID (Member) from etcd.
	Remove Kind = "Remove"
	// DeleteResources: delete the pod and claim of Member, which is no longer an etcd member; a pod
	// stuck terminating (Resources.PodStuck) without waiting for its kubelet (grace period 0), which is
	// safe because the member was removed from etcd: its peers refuse its ID, whatever still runs.
	DeleteResources Kind = "DeleteResources"
)

// Action is the one next step.
type Action struct {
	Kind Kind
	// Member is the name the action is about.
	Member string
	// ID is the member ID of Promote and Remove.
	ID uint64
	// Before, for CreateAwaitingPod, names the members to be added before Member, in order: its
	// --initial-cluster lists them too.
	Before []string
	// Reason says why, for conditions and events.
	Reason string
	// Replacing, for Remove, is true when the member is removed to be replaced (Member.Replace): its
	// pod and claim, with its data, are deleted next. A scale-down's removal is not.
	Replacing bool
}

func (a Action) String() string {
	return fmt.Sprintf("%s %s: %s", a.Kind, a.Member, a.Reason)
}

// Next returns the one next safe action for s: nothing while quorum is lost, else the action of the
// first step of the chain below that has one. A voter that joined moments ago and takes part in raft
// without serving yet (Member.InRaft) counts for that quorum: in a scale-up from one member, the
// first new voter may not serve for 7 s, and the next member is added meanwhile.
func Next(s State) Action {
	t := tallyOf(s)
	quorum := Quorum(t.voters)
	if t.healthyVoters+t.inRaft < quorum && t.healthyVoters+t.joiningVoters >= quorum {
		// a voter promoted moments ago whose readiness probe has not passed yet: it most likely
		// takes part in raft (etcd promotes only a learner that has caught up), which its probe shows
		// within a second or two
		var joining []string
		for _, m := range sorted(s.Members) {
			if !m.IsLearner && !m.Healthy && m.Joining && !m.InRaft {
				joining = append(joining, m.Name)
			}
		}
		return Action{Kind: Wait, Member: joining[0], Reason: fmt.Sprintf("waiting for %s, which joined moments ago, to show that it takes part in raft (its readiness probe passes): %d of %d voters are healthy, %d needed",
			strings.Join(joining, ", "), t.healthyVoters, t.voters, quorum)}
	}
	if t.healthyVoters+t.inRaft < quorum {
		return Action{Kind: Wait, Reason: fmt.Sprintf("quorum lost: %d of %d voters healthy, %d needed; no membership change until it is back", t.healthyVoters, t.voters, quorum)}
	}
	for _, step := range []struct {
		next func(State, tally) (Action, bool)
		// adding: the step's Wait is for a member being added (a learner catching up, a pod getting
		// its address), during which the pods of the members to add after it may be created
		adding bool
	}{
		// members are removed before the pods and claims of those removed before them are deleted, so
		// that a scale-down by several members removes them one right after the other
		{removeLostVoter, false}, {replaceDown, false}, {scaleDown, false}, {deleteStrays, false},
		{finishLearner, true}, {waitForRemoved, false}, {scaleUp, true},
	} {
		if a, ok := step.next(s, t); ok {
			if w, unsafe := removesQuorumInRaft(s, t, a); unsafe {
				return w
			}
			if a.Kind == Wait && step.adding {
				// while a learner catches up or a pod gets its address, the pods of the members to be
				// added after it are created, so that their volumes are provisioned meanwhile
				if p, ok := prestart(s, t); ok {
					return p
				}
			}
			return a
		}
	}
	return Action{Kind: None}
}

// Removals returns a, when it is a Remove, and the Remove actions Next returns after it, each as if etcd
// had made the one before it: the members one pass removes one right after the other (a scale-down by
// several). Empty when a is no Remove.
func Removals(s State, a Action) []Action {
	var out []Action
	for n := len(s.Members); a.Kind == Remove && n > 0; n-- {
		out = append(out, a)
		id := a.ID
		s.Members = slices.DeleteFunc(slices.Clone(s.Members), func(m Member) bool { return m.ID == id })
		if s.Leader == id {
			s.Leader = 0
		}
		a = Next(s)
	}
	return out
}

// removesQuorumInRaft returns a Wait, and true, when a removes a voter that takes part in raft without
// serving yet (Member.InRaft) that the voters left need for quorum: such a voter counts for quorum
// although it is not healthy, and the steps that remove members that are not healthy would take it
// for one that is down.
func removesQuorumInRaft(s State, t tally, a Action) (Action, bool) {
	if a.Kind != Remove {
		return Action{}, false
	}
	for _, m := range s.Members {
		if m.ID != a.ID || m.IsLearner || !m.InRaft || m.Healthy {
			continue
		}
		if left := t.healthyVoters + t.inRaft - 1; left < Quorum(t.voters-1) {
			return Action{Kind: Wait, Member: m.Name, Reason: fmt.Sprintf(
				"not removing %s, which joined moments ago and takes part in raft: %d of the %d voters left would be healthy or in raft, below quorum", m.Name, left, t.voters-1)}, true
		}
	}
	return Action{}, false
}

// tally is what Next counts in a State once.
type tally struct {
	byName                map[string]Member
	voters, healthyVoters int
	// joiningVoters are the voters that are not healthy but Joining; inRaft, those of them InRaft.
	joiningVoters, inRaft int
	// learner is the first learner listed, nil when there is none.
	learner *Member
}

// tallyOf counts the voters and healthy voters of s, indexes its members by name and finds a learner.
func tallyOf(s State) tally {
	t := tally{byName: map[string]Member{}}
	for i, m := range s.Members {
		t.byName[m.Name] = m
		if m.IsLearner {
			if t.learner == nil {
				t.learner = &s.Members[i]
			}
			continue
		}
		t.voters++
		if m.Healthy {
			t.healthyVoters++
		} else if m.Joining {
			t.joiningVoters++
			if m.InRaft {
				t.inRaft++
			}
		}
	}
	return t
}

// removeLostVoter is step 1. A voter whose data is gone (no pod, no claim): remove it; it is added
// back as a new member.
func removeLostVoter(s State, _ tally) (Action, bool) {
	for _, m := range sorted(s.Members) {
		r := s.Resources[m.Name]
		if !m.IsLearner && !m.Healthy && !r.Pod && !r.PodTerminating && !r.Data && !r.DataTerminating {
			return Action{Kind: Remove, Member: m.Name, ID: m.ID, Reason: "its pod and data are gone; it will be replaced"}, true
		}
	}
	return Action{}, false
}

// replaceDown is step 2. A member marked for replacement that is still not healthy: remove it; its pod
// and claim are then deleted as strays and a new member is added in its place. Removing a member that is
// not healthy lowers no healthy count, and Next only gets here with a quorum of healthy voters.
func replaceDown(s State, _ tally) (Action, bool) {
	for _, m := range sorted(s.Members) {
		if m.Replace != "" && !m.Healthy {
			return Action{Kind: Remove, Member: m.Name, ID: m.ID, Reason: m.Replace + "; a new member takes its place", Replacing: true}, true
		}
	}
	return Action{}, false
}

// deleteStrays is step 4. Pods and claims of names that are not members (removed members, or a failed
// add): delete them, so that no member ever starts on a removed member's data; a pod of theirs stuck
// terminating is deleted without waiting for its kubelet.
func deleteStrays(s State, t tally) (Action, bool) {
	for _, name := range sortedKeys(s.Resources) {
		if _, ok := t.byName[name]; ok || awaited(s, t, name) {
			continue
		}
		r := s.Resources[name]
		if r.PodStuck {
			return Action{Kind: DeleteResources, Member: name, Reason: "not a member of the cluster, and its pod is stuck terminating (its node is gone or does not answer)"}, true
		}
		if r.Pod || r.Data {
			return Action{Kind: DeleteResources, Member: name, Reason: "not a member of the cluster"}, true
		}
	}
	return Action{}, false
}

// scaleDown is step 3. Scale down: members that are down first, then learners, followers, and the
// leader last.
func scaleDown(s State, t tally) (Action, bool) {
	if len(s.Members) <= s.Replicas {
		return Action{}, false
	}
	cands := sorted(s.Members)
	sort.SliceStable(cands, func(i, j int) bool { return removeRank(cands[i], s.Leader) < removeRank(cands[j], s.Leader) })
	m := cands[0]
	if m.Healthy && !m.IsLearner && t.healthyVoters-1 < Quorum(t.voters-1) {
		return Action{Kind: Wait, Member: m.Name, Reason: fmt.Sprintf("removing %s would leave %d healthy of %d voters, below quorum", m.Name, t.healthyVoters-1, t.voters-1)}, true
	}
	// The leader ranks last and there are at least two members here, so m is never the leader:
	// leadership is never lost to a scale-down.
	return Action{Kind: Remove, Member: m.Name, ID: m.ID, Reason: "scaling down to " + CountMembers(int(s.Replicas))}, true
}

// finishLearner is step 5. A learner in flight: give it a pod, wait for it, promote it.
func finishLearner(s State, t tally) (Action, bool) {
	l := t.learner
	if l == nil {
		return Action{}, false
	}
	r := s.Resources[l.Name]
	switch {
	case r.PodTerminating || r.DataTerminating:
		return Action{Kind: Wait, Member: l.Name, Reason: "waiting for the old pod or claim of " + l.Name + " to be deleted"}, true
	case l.Started && !r.Pod && !r.Data && l.Healthy:
		// it answered in this pass, so a pod of it runs that the observation has not seen yet: no pod
		// for it (it would start empty under its member ID), and no removal of a member that answers
		return Action{Kind: Wait, Member: l.Name, Reason: "learner " + l.Name + " answers, but its pod and data are not observed yet"}, true
	case l.Started && !r.Pod && !r.Data:
		// it ran, and its data went with its pod and claim (or with its pod, on emptyDir): a pod made
		// for it now would start empty under its member ID, which the leader takes for caught up and
		// promotes at once; it leaves, and a new learner is added on new data
		return Action{Kind: Remove, Member: l.Name, ID: l.ID, Reason: "the learner ran, and its pod and data are gone; a new learner takes its place", Replacing: true}, true
	case !r.Pod:
		return Action{Kind: CreatePod, Member: l.Name, Reason: "the learner was added but has no pod"}, true
	case l.Started:
		// etcd refuses the promotion (ErrLearnerNotReady) until the learner has caught up: asking
		// is how to find out, and costs one call.
		return Action{Kind: Promote, Member: l.Name, ID: l.ID, Reason: "the learner has started"}, true
	default:
		return Action{Kind: Wait, Member: l.Name, Reason: "waiting for learner " + l.Name + " to start and catch up"}, true
	}
}

// waitForRemoved is step 6. Pods and claims of removed members still going away: wait before adding
// a member.
func waitForRemoved(s State, t tally) (Action, bool) {
	for _, name := range sortedKeys(s.Resources) {
		if _, ok := t.byName[name]; !ok && !awaited(s, t, name) {
			return Action{Kind: Wait, Member: name, Reason: "waiting for the pod and claim of removed member " + name + " to be deleted"}, true
		}
	}
	return Action{}, false
}

// scaleUp is step 7. Scale up (or replace): add a member under the lowest free name, once every
// voter is healthy or joining (a member added just before, promoted, that etcd has not let serve yet:
// adding a learner changes no quorum, and etcd refuses the add unless its leader has been connected to
// a quorum for 5 s).
func scaleUp(s State, t tally) (Action, bool) {
	if len(s.Members) >= s.Replicas {
		return Action{}, false
	}
	name := freeName(s.Cluster, t.byName, s.Resources)
	if t.healthyVoters+t.joiningVoters < t.voters {
		var down []string
		for _, m := range sorted(s.Members) {
			if !m.Healthy && !m.Joining {
				down = append(down, m.Name)
			}
		}
		return Action{Kind: Wait, Member: name, Reason: "adding a member waits until every voter is healthy; not healthy: " + strings.Join(down, ", ")}, true
	}
	why := membersWanted(s)
	// with State.AwaitAdd the member's pod is made first (here, or ahead by prestart) and the member
	// added once that pod has its address; without it, the member is added first and its pod made after
	if r := s.Resources[name]; s.AwaitAdd {
		if !r.Pod {
			return Action{Kind: CreateAwaitingPod, Member: name, Reason: why + "; its pod waits until it is added"}, true
		}
		if !r.Addressed {
			reason := "waiting for the pod of " + name + " to get its address (and DNS name) before adding it to etcd"
			if r.Problem != "" {
				reason += "; it cannot yet: " + r.Problem
			}
			return Action{Kind: Wait, Member: name, Reason: reason}, true
		}
	}
	return Action{Kind: AddLearner, Member: name, Reason: why}, true
}

// prestart, with State.AwaitAdd, is what Next does instead of waiting for a member being added: the
// members still to be added that have no pod yet get theirs, one per pass, in the order they are added,
// so that their volumes are provisioned and their pods started together instead of one after the other;
// each is added in turn (scaleUp). Any step that changes the membership comes first, so a pod that
// cannot be created (a quota) delays no add or promotion. It does nothing while a voter is not healthy
// or a member is to be replaced: the pod a lost or replaced member's replacement needs (the first name
// to add, once the old member is removed) must not be taken, under a quota, by a member to add later.
func prestart(s State, t tally) (Action, bool) {
	if !s.AwaitAdd || t.healthyVoters+t.joiningVoters < t.voters {
		return Action{}, false
	}
	for _, m := range s.Members {
		if m.Replace != "" && !m.Healthy {
			return Action{}, false
		}
	}
	names := toAdd(s, t)
	for i, name := range names {
		if r, ok := s.Resources[name]; !ok || !r.Pod {
			return Action{Kind: CreateAwaitingPod, Member: name, Before: names[:i],
				Reason: membersWanted(s) + "; its pod waits until it is added"}, true
		}
	}
	return Action{}, false
}

// membersWanted says why a member is added: how many members etcd had, of how many the spec asks for
// (past tense: events quote it once the member is added).
func membersWanted(s State) string {
	return fmt.Sprintf("etcd had %d of the %d members the spec asks for", len(s.Members), s.Replicas)
}

// toAdd returns the names of the members still to be added, in the order they are added: the lowest
// names that no member uses and no pod or claim uses but an awaiting pod's.
func toAdd(s State, t tally) []string {
	var names []string
	taken := maps.Clone(t.byName)
	for range s.Replicas - len(s.Members) {
		name := freeName(s.Cluster, taken, s.Resources)
		names = append(names, name)
		taken[name] = Member{}
	}
	return names
}

// awaited reports whether name's resources are an awaiting pod (and its claim) of a member still to be
// added: kept, not deleted as a removed member's.
func awaited(s State, t tally, name string) bool {
	return s.AwaitAdd && s.Resources[name].Awaiting && slices.Contains(toAdd(s, t), name)
}

// freeName returns "<cluster>-<n>" for the lowest n that no member uses and no pod or claim uses but an
// awaiting pod's.
func freeName(cluster string, members map[string]Member, res map[string]Resources) string {
	for n := 0; ; n++ {
		name := cluster + "-" + strconv.Itoa(n)
		if _, ok := members[name]; ok {
			continue
		}
		if r, ok := res[name]; ok && !r.Awaiting {
			continue
		}
		return name
	}
}

// removeRank orders scale-down candidates: voters that are down, learners, followers (highest name
// first, so that the cluster keeps its lowest ordinals), then the leader.
func removeRank(m Member, leader uint64) int {
	switch {
	case !m.Healthy && !m.IsLearner && !m.InRaft:
		return 0
	case m.IsLearner:
		return 1
	case m.InRaft:
		return 2
	case m.ID == leader:
		return 4
	default:
		return 3
	}
}

// sorted returns the members by name, highest ordinal first for names of equal length.
func sorted(ms []Member) []Member {
	out := append([]Member(nil), ms...)
	sort.Slice(out, func(i, j int) bool {
		if len(out[i].Name) != len(out[j].Name) {
			return len(out[i].Name) > len(out[j].Name)
		}
		return out[i].Name > out[j].Name
	})
	return out
}

// sortedKeys returns the names of m in order.
func sortedKeys(m map[string]Resources) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CountMembers returns "1 member" or "n members".
func CountMembers(n int) string {
	if n == 1 {
		return "1 member"
	}
	return fmt.Sprintf("%d members", n)
}
