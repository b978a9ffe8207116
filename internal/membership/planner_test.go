package membership

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// cluster "demo": v = healthy voter, d = voter that is down, j = voter that is joining (new, not
// serving yet), r = a joining voter that takes part in raft (InRaft), l = learner not started, L = learner started; ids are ordinal+1. Every member has its
// pod and claim unless listed in gone.
func state(replicas int, leader int, spec string, gone ...string) State {
	s := State{Cluster: "demo", Replicas: replicas, Resources: map[string]Resources{}}
	for i, c := range strings.Split(spec, "") {
		if c == "_" {
			continue
		}
		name := fmt.Sprintf("demo-%d", i)
		m := Member{ID: uint64(i + 1), Name: name, Started: c != "l", Healthy: c == "v" || c == "L", IsLearner: c == "l" || c == "L", Joining: c == "j" || c == "r", InRaft: c == "r"}
		s.Members = append(s.Members, m)
		s.Resources[name] = Resources{Pod: true, Data: true}
	}
	if leader >= 0 {
		s.Leader = uint64(leader + 1)
	}
	for _, g := range gone {
		delete(s.Resources, g)
	}
	return s
}

// awaiting turns on State.AwaitAdd.
func awaiting(s State) State { s.AwaitAdd = true; return s }

func TestNext(t *testing.T) {
	withRes := func(s State, name string, r Resources) State { s.Resources[name] = r; return s }
	// silent: member name does not answer (a learner whose pod is gone cannot)
	silent := func(s State, name string) State {
		for i := range s.Members {
			if s.Members[i].Name == name {
				s.Members[i].Healthy = false
			}
		}
		return s
	}
	tests := []struct {
		name   string
		s      State
		kind   Kind
		member string
	}{
		{"steady", state(3, 0, "vvv"), None, ""},
		{"scale up 3->5 adds the lowest free name as learner", state(5, 0, "vvv"), AddLearner, "demo-3"},
		{"C08: a learner without a pod gets one", state(3, 0, "vl", "demo-1"), CreatePod, "demo-1"},
		{"a learner that ran, whose pod and data are gone, is removed, not started empty under its ID", silent(state(5, 0, "vvvL", "demo-3"), "demo-3"), Remove, "demo-3"},
		{"one that still answers (its pod not observed yet) is waited for: neither removed nor given a pod", state(5, 0, "vvvL", "demo-3"), Wait, "demo-3"},
		{"one whose claim is kept gets its pod back", withRes(state(5, 0, "vvvL"), "demo-3", Resources{Data: true}), CreatePod, "demo-3"},
		{"C08: a learner not started yet is waited for, not promoted", withRes(state(3, 0, "vl"), "demo-1", Resources{Pod: true, Data: true}), Wait, "demo-1"},
		{"C08: a started learner is promoted", state(3, 0, "vL"), Promote, "demo-1"},
		{"C08: one learner at a time: no add while one is in flight", state(5, 0, "vvvL"), Promote, "demo-3"},
		{"C06: no add while a voter is down", state(5, 0, "vvd"), Wait, "demo-3"},
		{"a voter joining (promoted, not serving yet) does not hold back the next add", state(5, 0, "vvvj"), AddLearner, "demo-4"},
		{"await add: nor the pod of the next member", awaiting(state(5, 0, "vvvj")), CreateAwaitingPod, "demo-4"},
		{"a joining voter never counts for quorum", state(5, -1, "vddj"), Wait, ""},
		{"1->3: a joining voter not known to take part in raft yet is waited for", state(3, 1, "jv"), Wait, "demo-0"},
		{"1->3: one that takes part in raft counts for quorum, and the next member is added", state(3, 1, "rv"), AddLearner, "demo-2"},
		{"1->3: and the next learner promoted", state(3, 1, "rvL"), Promote, "demo-2"},
		{"scale down removes a voter in raft that does not serve, when the quorum left allows", state(1, 1, "rv"), Remove, "demo-0"},
		{"a voter that is down goes before one in raft", state(2, 0, "vdr"), Remove, "demo-1"},
		{"a voter in raft whose data is gone is removed like one that is down", state(3, 0, "vrr", "demo-2"), Remove, "demo-2"},
		{"never a voter in raft that the quorum left needs, even marked for replacement", func() State { s := state(3, 0, "vdr"); s.Members[2].Replace = "down too long"; return s }(), Wait, "demo-2"},
		{"C02: a voter without pod and data is removed", state(3, 0, "vdv", "demo-1"), Remove, "demo-1"},
		{"a member that answers is not taken for one whose data is gone", state(3, 0, "vvv", "demo-1"), None, ""},
		{"C02: then re-added under its name", state(3, 0, "v_v"), AddLearner, "demo-1"},
		{"a voter with data but no pod is left for the pod to come back", withRes(state(3, 0, "vdv"), "demo-1", Resources{Data: true}), None, ""},
		{"C01: scale down removes the member that is down first", state(3, 0, "vdvvv"), Remove, "demo-1"},
		{"scale down removes the highest follower", state(3, 0, "vvvvv"), Remove, "demo-4"},
		{"scale down removes learners before followers", state(3, 0, "vvvL"), Remove, "demo-3"},
		{"scale down keeps the leader, even at the highest ordinal", state(1, 1, "vv"), Remove, "demo-0"},
		{"scale down 3->1 removes followers, keeps the leader", state(1, 0, "vvv"), Remove, "demo-2"},
		{"C03: a removed member's pod and claim are deleted", withRes(state(1, 0, "v"), "demo-1", Resources{Pod: true, Data: true}), DeleteResources, "demo-1"},
		{"C03: a member is not added while its old claim is going", withRes(state(3, 0, "v"), "demo-1", Resources{DataTerminating: true}), Wait, "demo-1"},
		{"quorum lost: nothing is done", state(3, -1, "vdd"), Wait, ""},
		{"quorum lost with data gone: nothing is done", state(3, -1, "vdd", "demo-1", "demo-2"), Wait, ""},
		{"scale down that would break quorum waits", state(3, 0, "vvddv"), Remove, "demo-3"},
		{"scale down removes the next member before deleting the last one's pod and claim", withRes(state(3, 0, "vvvv"), "demo-4", Resources{Pod: true, Data: true}), Remove, "demo-3"},
		{"then deletes the removed members' pods and claims", withRes(withRes(state(3, 0, "vvv"), "demo-4", Resources{Pod: true, Data: true}), "demo-3", Resources{Pod: true, Data: true}), DeleteResources, "demo-3"},
		{"await add: the first member to add gets its pod before it is added", awaiting(state(5, 0, "vvv")), CreateAwaitingPod, "demo-3"},
		{"await add off: the first member to add is added first, its pod made after", state(5, 0, "vvv"), AddLearner, "demo-3"},
		{"await add: the member is added once its pod has its address", withRes(awaiting(state(4, 0, "vvv")), "demo-3", Resources{Pod: true, Data: true, Awaiting: true, Addressed: true}), AddLearner, "demo-3"},
		{"await add: not before", withRes(awaiting(state(4, 0, "vvv")), "demo-3", Resources{Pod: true, Data: true, Awaiting: true}), Wait, "demo-3"},
		{"await add: the awaiting pod is kept while a voter is down", withRes(awaiting(state(4, 0, "vvd")), "demo-3", Resources{Pod: true, Data: true, Awaiting: true, Addressed: true}), Wait, "demo-3"},
		{"await add: the pods of every member to add are created first", withRes(awaiting(state(5, 0, "vvv")), "demo-3", Resources{Pod: true, Data: true, Awaiting: true}), CreateAwaitingPod, "demo-4"},
		{"await add: also while a learner catches up", awaiting(state(5, 0, "vvvl")), CreateAwaitingPod, "demo-4"},
		{"await add: an awaiting pod no longer wanted is deleted", withRes(awaiting(state(3, 0, "vvv")), "demo-3", Resources{Pod: true, Data: true, Awaiting: true, Addressed: true}), DeleteResources, "demo-3"},
		{"await add: an awaiting pod of a name that is not next is deleted", withRes(awaiting(state(4, 0, "v_vv")), "demo-4", Resources{Pod: true, Data: true, Awaiting: true, Addressed: true}), DeleteResources, "demo-4"},
		{"await add: no pod for a later member while a lost voter's pod goes (its replacement comes first)", withRes(awaiting(state(5, 0, "vdv")), "demo-1", Resources{PodTerminating: true}), Wait, "demo-3"},
		{"await add: no pod for a later member while a removed member's pod goes", withRes(awaiting(state(3, 0, "v_v")), "demo-1", Resources{PodTerminating: true}), Wait, "demo-1"},
		{"await add: the lost voter's replacement gets its pod first", awaiting(state(5, 0, "v_v")), CreateAwaitingPod, "demo-1"},
		{"await add: and is added first", withRes(awaiting(state(5, 0, "v_v")), "demo-1", Resources{Pod: true, Data: true, Awaiting: true, Addressed: true}), AddLearner, "demo-1"},
		{"await add: while it catches up, the next member's pod is made", withRes(awaiting(state(5, 0, "v_vl")), "demo-3", Resources{Pod: true, Data: true}), CreateAwaitingPod, "demo-1"},
		{"await add: the claim made for the next member whose pod is not seen gets its pod", withRes(awaiting(state(4, 0, "vvv")), "demo-3", Resources{Data: true, Awaiting: true}), CreateAwaitingPod, "demo-3"},
		{"await add: so does a later member's, while a learner catches up", withRes(awaiting(state(5, 0, "vvvl")), "demo-4", Resources{Data: true, Awaiting: true}), CreateAwaitingPod, "demo-4"},
		{"await add: a claim made for a member no longer to be added is deleted", withRes(awaiting(state(3, 0, "vvv")), "demo-3", Resources{Data: true, Awaiting: true}), DeleteResources, "demo-3"},
		{"await add off: a pod that waits is a stray", withRes(state(5, 0, "vvv"), "demo-3", Resources{Pod: true, Data: true, Awaiting: true, Addressed: true}), DeleteResources, "demo-3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Next(tt.s)
			if a.Kind != tt.kind || a.Member != tt.member {
				t.Errorf("Next = %v; want %s %s", a, tt.kind, tt.member)
			}
			if a.Kind == Wait && a.Reason == "" {
				t.Errorf("Wait without a reason")
			}
		})
	}
}

// genState draws an arbitrary observed state: up to 9 members with any health and roles, a voter as
// leader or none, and any pods and claims for up to 10 names.
func genState(t *rapid.T) State {
	s := State{Cluster: "demo", Replicas: rapid.SampledFrom([]int{1, 3, 5, 7, 9}).Draw(t, "replicas"), Resources: map[string]Resources{},
		AwaitAdd: rapid.Bool().Draw(t, "awaitAdd")}
	n := rapid.IntRange(0, 9).Draw(t, "members")
	used := map[int]bool{}
	for i := 0; i < n; i++ {
		ord := rapid.IntRange(0, 9).Draw(t, "ordinal")
		if used[ord] {
			continue
		}
		used[ord] = true
		learner := rapid.Bool().Draw(t, "learner")
		started := !learner || rapid.Bool().Draw(t, "started")
		healthy := started && rapid.Bool().Draw(t, "healthy")
		s.Members = append(s.Members, Member{ID: uint64(ord + 1), Name: fmt.Sprintf("demo-%d", ord), IsLearner: learner, Started: started,
			Healthy: healthy, Joining: started && !healthy && rapid.Bool().Draw(t, "joining"),
			Replace: rapid.SampledFrom([]string{"", "down too long"}).Draw(t, "replace")})
		if m := &s.Members[len(s.Members)-1]; m.Joining && !m.IsLearner {
			m.InRaft = rapid.Bool().Draw(t, "inRaft")
		}
	}
	for ord := 0; ord < 10; ord++ {
		if rapid.Bool().Draw(t, "hasResources") {
			s.Resources[fmt.Sprintf("demo-%d", ord)] = Resources{
				Pod: rapid.Bool().Draw(t, "pod"), PodTerminating: rapid.Bool().Draw(t, "podTerm"),
				Data: rapid.Bool().Draw(t, "data"), DataTerminating: rapid.Bool().Draw(t, "dataTerm"),
			}
			if rapid.Bool().Draw(t, "awaiting") { // a pod created to wait for its add, with its new claim
				s.Resources[fmt.Sprintf("demo-%d", ord)] = Resources{Pod: true, Data: true, Awaiting: true, Addressed: rapid.Bool().Draw(t, "addressed")}
				if rapid.Bool().Draw(t, "claimOnly") { // its claim made, its pod not (yet) seen
					s.Resources[fmt.Sprintf("demo-%d", ord)] = Resources{Data: true, Awaiting: true}
				}
			}
		}
	}
	var voters []uint64 // only a voter leads
	for _, m := range s.Members {
		if !m.IsLearner {
			voters = append(voters, m.ID)
		}
	}
	if len(voters) > 0 && rapid.Bool().Draw(t, "hasLeader") {
		s.Leader = rapid.SampledFrom(voters).Draw(t, "leader")
	}
	return s
}

func counts(s State) (voters, healthy, learners int) {
	voters, healthy, learners, _ = countsJoining(s)
	return
}

// countsJoining is counts with the voters that are not healthy but joining.
func countsJoining(s State) (voters, healthy, learners, joining int) {
	voters, healthy, learners, joining, _ = countsInRaft(s)
	return
}

// countsInRaft is countsJoining with the joining voters that take part in raft.
func countsInRaft(s State) (voters, healthy, learners, joining, inRaft int) {
	for _, m := range s.Members {
		if !m.IsLearner && !m.Healthy && m.Joining {
			joining++
			if m.InRaft {
				inRaft++
			}
		}
		switch {
		case m.IsLearner:
			learners++
		case m.Healthy:
			voters++
			healthy++
		default:
			voters++
		}
	}
	return
}

// TestNextNeverBreaksQuorum: from any observed state, the action never adds a member unless every
// voter is healthy or joining and no learner is in flight, never removes a healthy voter below a
// quorum of healthy voters, never removes the leader, never promotes a non-learner, never deletes a
// member's pod or claim, and does nothing at all without a quorum of voters that are healthy or take
// part in raft (InRaft).
func TestNextNeverBreaksQuorum(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genState(t)
		a := Next(s)
		voters, healthy, learners, joining, inRaft := countsInRaft(s)
		byName := map[string]Member{}
		byID := map[uint64]Member{}
		for _, m := range s.Members {
			byName[m.Name] = m
			byID[m.ID] = m
		}
		if healthy+inRaft < voters/2+1 && a.Kind != Wait {
			t.Fatalf("quorum lost (%d/%d, %d more in raft) but %v", healthy, voters, inRaft, a)
		}
		switch a.Kind {
		case AddLearner:
			if learners > 0 || healthy+joining != voters {
				t.Fatalf("%v with %d learners, %d/%d healthy voters, %d joining", a, learners, healthy, voters, joining)
			}
			if _, ok := byName[a.Member]; ok {
				t.Fatalf("%v: already a member", a)
			}
			if r, ok := s.Resources[a.Member]; ok && (!s.AwaitAdd || !r.Awaiting || !r.Addressed) {
				t.Fatalf("%v: a pod or claim of that name exists that is not an addressed awaiting pod (a removed member's data?)", a)
			}
			if r := s.Resources[a.Member]; s.AwaitAdd && !r.Addressed {
				t.Fatalf("%v with await add: the member's pod does not have its address (its DNS name would be cached as not found)", a)
			}
		case CreateAwaitingPod:
			if !s.AwaitAdd || len(s.Members)+len(a.Before) >= s.Replicas {
				t.Fatalf("%v with await add %v, %d members, %d replicas", a, s.AwaitAdd, len(s.Members), s.Replicas)
			}
			if healthy+joining != voters {
				t.Fatalf("%v with %d of %d voters healthy, %d joining: the pod a replacement needs may be taken", a, healthy, voters, joining)
			}
			for _, b := range a.Before {
				if r, ok := s.Resources[b]; !ok || !r.Awaiting {
					t.Fatalf("%v before %s, to be added first, has its pod", a, b)
				}
			}
			if _, ok := byName[a.Member]; ok {
				t.Fatalf("%v: already a member", a)
			}
			if r, ok := s.Resources[a.Member]; ok && (!r.Awaiting || r.Pod) {
				t.Fatalf("%v: a pod, or a claim not made for it, of that name exists", a)
			}
		case Remove:
			m, ok := byID[a.ID]
			if !ok {
				t.Fatalf("%v: no such member", a)
			}
			if m.ID == s.Leader && m.Healthy {
				t.Fatalf("%v removes the leader", a)
			}
			if m.Replace != "" && m.Healthy && len(s.Members) <= s.Replicas {
				t.Fatalf("%v replaces a member that is healthy", a)
			}
			if m.Healthy && !m.IsLearner && len(s.Members) <= s.Replicas {
				t.Fatalf("%v removes a healthy voter the spec still wants", a)
			}
			if !m.IsLearner && m.Healthy && healthy-1 < (voters-1)/2+1 {
				t.Fatalf("%v leaves %d healthy of %d voters", a, healthy-1, voters-1)
			}
			if !m.IsLearner && m.InRaft && !m.Healthy && healthy+inRaft >= voters/2+1 && healthy+inRaft-1 < (voters-1)/2+1 {
				t.Fatalf("%v removes a voter in raft that the %d healthy and %d in raft of %d voters need for quorum", a, healthy, inRaft, voters)
			}
		case Promote:
			if m := byID[a.ID]; !m.IsLearner || !m.Started || !s.Resources[m.Name].Pod {
				t.Fatalf("%v: not a started learner: %+v", a, m)
			}
		case CreatePod:
			if m, r := byName[a.Member], s.Resources[a.Member]; m.Started && !r.Data {
				t.Fatalf("%v: the learner ran and its data is gone; a pod would start it empty under its member ID", a)
			}
		case DeleteResources:
			if _, ok := byName[a.Member]; ok {
				t.Fatalf("%v deletes the pod or claim of a member", a)
			}
		}
	})
}

// simulate applies a in an ideal world: every call succeeds, a learner with a pod starts and catches
// up on the next pass, pods and claims being deleted go.
func simulate(s State, a Action, nextID *uint64) State {
	res := map[string]Resources{}
	for k, v := range s.Resources {
		if v.PodTerminating || v.DataTerminating {
			continue // gone by the next pass
		}
		res[k] = v
	}
	s.Resources = res
	var members []Member
	for _, m := range s.Members {
		if m.IsLearner && !m.Started && res[m.Name].Pod {
			m.Started, m.Healthy = true, true
		}
		members = append(members, m)
	}
	s.Members = members
	switch a.Kind {
	case AddLearner:
		*nextID++
		s.Members = append(s.Members, Member{ID: *nextID, Name: a.Member, IsLearner: true})
		s.Resources[a.Member] = Resources{Pod: true, Data: true}
	case CreatePod:
		s.Resources[a.Member] = Resources{Pod: true, Data: true}
	case CreateAwaitingPod:
		s.Resources[a.Member] = Resources{Pod: true, Data: true, Awaiting: true, Addressed: true}
	case Promote:
		for i := range s.Members {
			if s.Members[i].ID == a.ID {
				s.Members[i].IsLearner = false
			}
		}
	case Remove:
		var keep []Member
		for _, m := range s.Members {
			if m.ID != a.ID {
				keep = append(keep, m)
			}
		}
		s.Members = keep
		if s.Leader == a.ID {
			s.Leader = 0
		}
	case DeleteResources:
		s.Resources[a.Member] = Resources{PodTerminating: true, DataTerminating: true}
	}
	if s.Leader == 0 {
		for _, m := range s.Members {
			if !m.IsLearner && m.Healthy {
				s.Leader = m.ID
				break
			}
		}
	}
	return s
}

// TestNextConverges: from a healthy cluster of any size, any new replicas count is reached through
// single safe steps, never more than one learner, quorum kept at every step, the leader kept.
func TestNextConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		from := rapid.SampledFrom([]int{1, 3, 5, 7, 9}).Draw(t, "from")
		to := rapid.SampledFrom([]int{1, 3, 5, 7, 9}).Draw(t, "to")
		s := state(to, rapid.IntRange(0, from-1).Draw(t, "leader"), strings.Repeat("v", from))
		s.AwaitAdd = rapid.Bool().Draw(t, "awaitAdd")
		nextID := uint64(100)
		leader := s.Leader
		for step := 0; step < 60; step++ {
			a := Next(s)
			if a.Kind == None {
				voters, healthy, learners := counts(s)
				if voters != to || healthy != to || learners != 0 {
					t.Fatalf("done with %d voters (%d healthy), %d learners; want %d", voters, healthy, learners, to)
				}
				return
			}
			s = simulate(s, a, &nextID)
			if s.Leader != leader {
				t.Fatalf("step %d (%v): leadership changed from %d to %d", step, a, leader, s.Leader)
			}
			voters, healthy, learners := counts(s)
			if learners > 1 {
				t.Fatalf("step %d (%v): %d learners", step, a, learners)
			}
			if healthy < voters/2+1 {
				t.Fatalf("step %d (%v): quorum lost, %d/%d", step, a, healthy, voters)
			}
		}
		t.Fatalf("no convergence from %d to %d in 60 steps; last state %+v", from, to, s)
	})
}

// TestNextReplacesDownMembers: from a cluster of n voters of which up to a minority are present but down
// and marked for replacement (their pods exist, they never answer), the planner removes each, deletes its
// pod and claim, and adds a new member in its place, one change at a time: it ends with n healthy
// voters, none of the down members' IDs, no member ID used twice, never more than one learner and
// never fewer healthy voters than quorum.
func TestNextReplacesDownMembers(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.SampledFrom([]int{3, 5, 7}).Draw(t, "n")
		s := state(n, 0, strings.Repeat("v", n))
		down := map[uint64]bool{}
		for _, i := range rapid.SliceOfNDistinct(rapid.IntRange(1, n-1), 0, (n-1)/2, rapid.ID[int]).Draw(t, "down") {
			s.Members[i].Healthy, s.Members[i].Replace = false, "down too long"
			down[s.Members[i].ID] = true
		}
		nextID := uint64(100)
		seen := map[uint64]bool{}
		for step := 0; step < 80; step++ {
			a := Next(s)
			if a.Kind == None {
				voters, healthy, learners := counts(s)
				if voters != n || healthy != n || learners != 0 {
					t.Fatalf("done with %d voters (%d healthy), %d learners; want %d", voters, healthy, learners, n)
				}
				for _, m := range s.Members {
					if down[m.ID] {
						t.Fatalf("down member %s (ID %d) is still a member", m.Name, m.ID)
					}
				}
				return
			}
			if a.Kind == Wait && a.Member == "" {
				t.Fatalf("step %d: waits for quorum: %v", step, a)
			}
			// a removal says it replaces exactly when it removes a member marked for replacement
			if a.Kind == Remove && a.Replacing != down[a.ID] {
				t.Fatalf("step %d: %v has Replacing %v, member marked down: %v", step, a, a.Replacing, down[a.ID])
			}
			s = simulate(s, a, &nextID)
			for _, m := range s.Members {
				if a.Kind == AddLearner && m.Name == a.Member && seen[m.ID] {
					t.Fatalf("step %d: member ID %d used twice", step, m.ID)
				}
				seen[m.ID] = true
			}
			voters, healthy, learners := counts(s)
			if learners > 1 || healthy < voters/2+1 {
				t.Fatalf("step %d (%v): %d learners, %d of %d voters healthy", step, a, learners, healthy, voters)
			}
		}
		t.Fatalf("no convergence in 80 steps; last state %+v", s)
	})
}

// TestNextWithLearnersThatNeverStart: in a world where the learners of some names never start (their
// pods crash-loop or cannot be scheduled) and some voters go down for good, the planner, step after
// step, never has more than one learner in flight, never leaves fewer healthy voters than a quorum,
// never reuses a member ID, and never adds a member whose name still has a pod or claim (data that
// is not the new member's).
func TestNextWithLearnersThatNeverStart(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		from := rapid.SampledFrom([]int{3, 5}).Draw(t, "from")
		to := rapid.SampledFrom([]int{3, 5, 7}).Draw(t, "to")
		s := state(to, 0, strings.Repeat("v", from))
		stuck := map[string]bool{}
		for i := range 9 {
			if rapid.Bool().Draw(t, fmt.Sprintf("stuck-%d", i)) {
				stuck[fmt.Sprintf("demo-%d", i)] = true
			}
		}
		nextID := uint64(100)
		seen := map[uint64]bool{}
		for _, m := range s.Members {
			seen[m.ID] = true
		}
		for step := 0; step < 40; step++ {
			if rapid.IntRange(0, 9).Draw(t, fmt.Sprintf("fault-%d", step)) == 0 {
				// a voter other than the leader goes down for good and is marked for replacement
				i := rapid.IntRange(0, len(s.Members)-1).Draw(t, fmt.Sprintf("down-%d", step))
				if m := &s.Members[i]; m.ID != s.Leader && !m.IsLearner {
					m.Healthy, m.Replace = false, "down too long"
				}
			}
			a := Next(s)
			if a.Kind == AddLearner {
				if res, ok := s.Resources[a.Member]; ok && (res.Pod || res.Data) {
					t.Fatalf("step %d: %v while the name still has a pod or claim %+v", step, a, res)
				}
			}
			s = simulate(s, a, &nextID)
			for i := range s.Members { // this world's learners of stuck names never start
				if m := &s.Members[i]; m.IsLearner && stuck[m.Name] {
					m.Started, m.Healthy = false, false
				}
			}
			voters, healthy, learners := counts(s)
			if learners > 1 {
				t.Fatalf("step %d (%v): %d learners", step, a, learners)
			}
			if healthy < voters/2+1 && a.Kind != Wait && a.Kind != None {
				t.Fatalf("step %d (%v): acted without a quorum, %d/%d", step, a, healthy, voters)
			}
			if a.Kind == AddLearner {
				id := s.Members[len(s.Members)-1].ID
				if seen[id] {
					t.Fatalf("step %d: member ID %d used twice", step, id)
				}
				seen[id] = true
			}
		}
	})
}

// TestNextDeletesStuckPodOfRemovedMember: the pod of a removed member that is stuck terminating (its
// node is gone) is deleted again, at once, instead of waited for; one that is only terminating is
// waited for.
func TestNextDeletesStuckPodOfRemovedMember(t *testing.T) {
	s := state(3, 0, "vv")
	s.Resources["demo-2"] = Resources{PodTerminating: true, PodStuck: true, DataTerminating: true}
	if a := Next(s); a.Kind != DeleteResources || a.Member != "demo-2" || !strings.Contains(a.Reason, "stuck terminating") {
		t.Errorf("stuck pod of a removed member: %v, want DeleteResources of demo-2", a)
	}
	s.Resources["demo-2"] = Resources{PodTerminating: true, DataTerminating: true}
	if a := Next(s); a.Kind != Wait || a.Member != "demo-2" {
		t.Errorf("terminating pod of a removed member: %v, want Wait for demo-2", a)
	}
}

// TestCountMembers: one member is "1 member", any other count "n members".
func TestCountMembers(t *testing.T) {
	for n, want := range map[int]string{0: "0 members", 1: "1 member", 3: "3 members"} {
		if got := CountMembers(n); got != want {
			t.Errorf("CountMembers(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestWaitForAddressSaysWhy: a member to add whose pod cannot get an address (it cannot be scheduled)
// waits, and the reason quotes what keeps the pod from running.
func TestWaitForAddressSaysWhy(t *testing.T) {
	withRes := func(s State, name string, r Resources) State { s.Resources[name] = r; return s }
	problem := "pod not scheduled: Unschedulable 0/1 nodes are available: 1 Insufficient cpu."
	a := Next(withRes(awaiting(state(4, 0, "vvv")), "demo-3", Resources{Pod: true, Data: true, Awaiting: true, Problem: problem}))
	if a.Kind != Wait || a.Member != "demo-3" || !strings.HasSuffix(a.Reason, "; it cannot yet: "+problem) {
		t.Errorf("Next = %+v: want a wait for demo-3 that quotes %q", a, problem)
	}
	a = Next(withRes(awaiting(state(4, 0, "vvv")), "demo-3", Resources{Pod: true, Data: true, Awaiting: true}))
	if a.Kind != Wait || strings.Contains(a.Reason, "cannot yet") {
		t.Errorf("Next = %+v: want a wait with nothing quoted while the pod has no problem", a)
	}
}

// TestRemovalSaysReplacing: the removal of a member marked for replacement says so (its data is
// deleted next, which the operator reports as a warning), a scale-down's removal does not.
func TestRemovalSaysReplacing(t *testing.T) {
	replace := state(3, 0, "vdv")
	replace.Members[1].Replace = "down too long"
	for _, tc := range []struct {
		name string
		s    State
		want bool
	}{
		{"replacement", replace, true},
		{"scale-down", state(3, 0, "vvvvv"), false},
	} {
		a := Next(tc.s)
		if a.Kind != Remove || a.Replacing != tc.want {
			t.Errorf("%s: %v with Replacing %v, want a Remove with Replacing %v", tc.name, a, a.Replacing, tc.want)
		}
	}
}

func TestRemovals(t *testing.T) {
	names := func(as []Action) string {
		var out []string
		for _, a := range as {
			if a.Kind != Remove {
				t.Errorf("%v in the removals", a)
			}
			out = append(out, a.Member)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name string
		s    State
		want string
	}{
		{"5 -> 3: both followers of the highest ordinals, the leader stays", state(3, 4, "vvvvv"), "demo-3,demo-2"},
		{"5 -> 1: every follower", state(1, 0, "vvvvv"), "demo-4,demo-3,demo-2,demo-1"},
		{"a member that is down goes first", state(3, 0, "vvdvv"), "demo-2,demo-4"},
		{"steady: none", state(3, 0, "vvv"), ""},
		{"a scale-up: none", state(5, 0, "vvv"), ""},
		{"3 -> 1 with one voter down: the down one first, then the follower", state(1, 0, "vdv"), "demo-1,demo-2"},
		{"quorum lost: none", state(1, 0, "vdd"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(Removals(tc.s, Next(tc.s))); got != tc.want {
				t.Errorf("Removals: %q, want %q", got, tc.want)
			}
		})
	}
}
