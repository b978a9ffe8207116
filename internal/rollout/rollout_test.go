package rollout

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func m(name string, id uint64, upToDate bool) Member {
	return Member{Name: name, ID: id, UpToDate: upToDate, Ready: true, Healthy: true}
}

func TestNext(t *testing.T) {
	tests := []struct {
		name    string
		state   State
		kind    Kind
		member  string
		target  string
		mention string
	}{
		{"all up to date", State{Members: []Member{m("a-0", 1, true), m("a-1", 2, true), m("a-2", 3, true)}, Leader: 1}, None, "", "", ""},
		{"followers first, by name", State{Members: []Member{m("a-2", 3, false), m("a-0", 1, false), m("a-1", 2, false)}, Leader: 1}, Restart, "a-1", "", "leader goes last"},
		{"leader last: move leadership", State{Members: []Member{m("a-0", 1, false), m("a-1", 2, true), m("a-2", 3, true)}, Leader: 1}, MoveLeader, "a-0", "a-1", "moving leadership to a-1"},
		{"old leader now a follower", State{Members: []Member{m("a-0", 1, false), m("a-1", 2, true), m("a-2", 3, true)}, Leader: 2}, Restart, "a-0", "", ""},
		{"single member restarts", State{Members: []Member{m("a-0", 1, false)}, Leader: 1}, Restart, "a-0", "", "single-member"},
		{"paused: member not ready", State{Members: []Member{m("a-0", 1, false), {Name: "a-1", ID: 2, UpToDate: true, Healthy: true}, m("a-2", 3, false)}, Leader: 1}, Wait, "", "", "a-1 is not ready"},
		{"the only member down is out of date: recreate it", State{Members: []Member{m("a-0", 1, true), {Name: "a-1", ID: 2, Healthy: false}, m("a-2", 3, true)}, Leader: 1}, Restart, "a-1", "", "a-1 is down and runs an old spec"},
		{"two down: wait", State{Members: []Member{m("a-0", 1, true), {Name: "a-1", ID: 2}, {Name: "a-2", ID: 3}}, Leader: 1}, Wait, "", "", "a-1 is not ready"},
		{"paused: member not ready, says why", State{Members: []Member{m("a-0", 1, false), {Name: "a-1", ID: 2, UpToDate: true, Problem: "etcd container CrashLoopBackOff (last exit code 2, Error)"}, m("a-2", 3, false)}, Leader: 1}, Wait, "", "", "a-1 is not ready: etcd container CrashLoopBackOff (last exit code 2, Error)"},
		{"paused: member unhealthy", State{Members: []Member{m("a-0", 1, false), {Name: "a-1", ID: 2, Ready: true, UpToDate: true}, m("a-2", 3, false)}, Leader: 1}, Wait, "", "", "a-1 is not healthy"},
		{"paused: learner joining", State{Members: []Member{m("a-0", 1, false), {Name: "a-1", ID: 2, Ready: true, Healthy: true, Learner: true}}, Leader: 1}, Wait, "", "", "a-1 is a learner"},
		{"paused: no leader", State{Members: []Member{m("a-0", 1, false), m("a-1", 2, false), m("a-2", 3, false)}}, Wait, "", "", "no leader"},
		// a restart under way is waited for, neither repeated nor followed by the next one
		{"a restarted member's pod being deleted", State{Members: []Member{m("a-0", 1, false), {Name: "a-1", ID: 2, Going: true}, m("a-2", 3, false)}, Leader: 1}, AwaitMember, "a-1", "", "pod of a-1 is being deleted"},
		{"the only member down is out of date, its pod being deleted", State{Members: []Member{m("a-0", 1, true), {Name: "a-1", ID: 2, Going: true}, m("a-2", 3, true)}, Leader: 1}, AwaitMember, "a-1", "", "1 of 3 members to update"},
		{"a restarted member starting", State{Members: []Member{m("a-0", 1, false), {Name: "a-1", ID: 2, UpToDate: true, Starting: true}, m("a-2", 3, false)}, Leader: 1}, AwaitMember, "a-1", "", "a-1 is starting on a new pod"},
		{"the only member down starting on a pod of an older spec: recreate it", State{Members: []Member{m("a-0", 1, true), {Name: "a-1", ID: 2, Starting: true}, m("a-2", 3, true)}, Leader: 1}, Restart, "a-1", "", "a-1 is down and runs an old spec"},
		{"a restarted member serving, its new pod not Ready yet", State{Members: []Member{m("a-0", 1, false), {Name: "a-1", ID: 2, UpToDate: true, Healthy: true, NewPod: true}, m("a-2", 3, false)}, Leader: 1}, AwaitMember, "a-1", "", "a-1 (serves; its pod is not Ready yet) is starting on a new pod"},
		{"a member starting, another down: paused", State{Members: []Member{m("a-0", 1, false), {Name: "a-1", ID: 2, UpToDate: true, Starting: true}, {Name: "a-2", ID: 3, UpToDate: true}}, Leader: 1}, Wait, "", "", "a-2 is not ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Next(tt.state)
			if a.Kind != tt.kind || a.Member != tt.member || a.Target != tt.target {
				t.Fatalf("Next = %+v, want %s %q target %q", a, tt.kind, tt.member, tt.target)
			}
			if !strings.Contains(a.Reason, tt.mention) {
				t.Errorf("reason %q does not mention %q", a.Reason, tt.mention)
			}
		})
	}
}

// TestRolloutProperties simulates rollouts of random clusters in which members may be unhealthy at any
// step, and checks the invariants: nothing restarts unless every member is ready and healthy; a
// restarted member was out of date; the leader of a multi-member cluster is never restarted; leadership
// moves only to an up-to-date follower; and once members stay healthy the rollout ends with every
// member up to date, the leader last.
func TestRolloutProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.SampledFrom([]int{1, 3, 5, 7}).Draw(t, "members")
		var s State
		for i := range n {
			s.Members = append(s.Members, Member{Name: fmt.Sprintf("c-%d", i), ID: uint64(i + 1),
				UpToDate: rapid.Bool().Draw(t, "upToDate"), Ready: true, Healthy: true})
		}
		s.Leader = uint64(rapid.IntRange(1, n).Draw(t, "leader"))
		var restarted []string
		for step := 0; step < 4*n+4; step++ {
			// randomly disturb health on some steps
			sick := -1
			if rapid.IntRange(0, 3).Draw(t, "disturb") == 0 {
				sick = rapid.IntRange(0, n-1).Draw(t, "sick")
				s.Members[sick].Healthy = false
			}
			a := Next(s)
			allOK := true
			for _, m := range s.Members {
				allOK = allOK && m.Ready && m.Healthy && !m.Learner
			}
			switch a.Kind {
			case Restart:
				if !allOK && (sick < 0 || s.Members[sick].Name != a.Member || a.ID == s.Leader) {
					t.Fatalf("restarted %s while another member was down: %+v", a.Member, s)
				}
				if n > 1 && a.ID == s.Leader {
					t.Fatalf("restarted the leader %s of a %d-member cluster", a.Member, n)
				}
				for i := range s.Members {
					if s.Members[i].Name == a.Member {
						if s.Members[i].UpToDate {
							t.Fatalf("restarted up-to-date member %s", a.Member)
						}
						s.Members[i].UpToDate = true
					}
				}
				restarted = append(restarted, a.Member)
			case MoveLeader:
				if !allOK || a.ID != s.Leader {
					t.Fatalf("moved leadership from %s (leader %d) while allOK=%v", a.Member, s.Leader, allOK)
				}
				for _, m := range s.Members {
					if m.ID == a.TargetID && !m.UpToDate {
						t.Fatalf("moved leadership to out-of-date %s", a.Target)
					}
				}
				s.Leader = a.TargetID
			case Wait:
				if allOK && s.Leader != 0 {
					t.Fatalf("waited although every member is healthy: %s", a.Reason)
				}
			}
			if sick >= 0 {
				s.Members[sick].Healthy = true
			}
		}
		for _, m := range s.Members {
			if !m.UpToDate {
				t.Fatalf("rollout did not finish: %s out of date after %v", m.Name, restarted)
			}
		}
		if Next(s).Kind != None {
			t.Fatalf("Next after the rollout = %+v, want None", Next(s))
		}
	})
}
