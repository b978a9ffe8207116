package verdict

import (
	"maps"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
)

func TestCompareHashes(t *testing.T) {
	h := func(hash uint32, compact int64) etcd.KVHash {
		return etcd.KVHash{Hash: hash, HashRevision: 100, CompactRevision: compact}
	}
	tests := []struct {
		name                   string
		hashes                 map[string]etcd.KVHash
		conclusive, consistent bool
		mention                string
	}{
		{"all equal", map[string]etcd.KVHash{"a-0": h(7, 50), "a-1": h(7, 50), "a-2": h(7, 50)}, true, true, "At the last check, all 3 members hashed to 00000007 at revision 100"},
		{"one differs", map[string]etcd.KVHash{"a-0": h(7, 50), "a-1": h(8, 50), "a-2": h(7, 50)}, true, false, "a-1=00000008"},
		{"compaction in between", map[string]etcd.KVHash{"a-0": h(7, 50), "a-1": h(8, 60), "a-2": h(7, 50)}, false, false, "compare again later"},
		{"a member did not answer", map[string]etcd.KVHash{"a-0": h(7, 50), "a-1": h(7, 50)}, false, false, "2 of 3 members"},
	}
	for _, tt := range tests {
		v := CompareHashes(100, tt.hashes, 3)
		if v.Conclusive != tt.conclusive || v.Consistent != tt.consistent || !strings.Contains(v.Message, tt.mention) {
			t.Errorf("%s: %+v, want conclusive=%v consistent=%v mentioning %q", tt.name, v, tt.conclusive, tt.consistent, tt.mention)
		}
	}
	// a single member is named, not counted ("all 1 members")
	if v, want := CompareHashes(100, map[string]etcd.KVHash{"a-0": h(7, 50)}, 1), "At the last check, the only member, a-0, hashed to 00000007 at revision 100"; !strings.Contains(v.Message, want) {
		t.Errorf("one member: %q, want it to say %q", v.Message, want)
	}
}

// TestDivergedMembers: when the members disagree, those whose hash differs from the one a strict
// majority of the members asked share are the diverged ones; without such a majority (a tie, or every
// member its own hash) none is, and the message says no side can be told right. The message says
// whether they are replaced: not with spec.recovery.replaceUnhealthyMemberAfter 0s.
func TestDivergedMembers(t *testing.T) {
	h := func(hash uint32) etcd.KVHash { return etcd.KVHash{Hash: hash, HashRevision: 100, CompactRevision: 50} }
	for _, tc := range []struct {
		name     string
		hashes   map[string]etcd.KVHash
		want     int
		diverged []string
	}{
		{"one of 3", map[string]etcd.KVHash{"a-0": h(7), "a-1": h(8), "a-2": h(7)}, 3, []string{"a-1"}},
		{"two of 5", map[string]etcd.KVHash{"a-0": h(7), "a-1": h(8), "a-2": h(7), "a-3": h(9), "a-4": h(7)}, 5, []string{"a-1", "a-3"}},
		{"every member its own", map[string]etcd.KVHash{"a-0": h(7), "a-1": h(8), "a-2": h(9)}, 3, nil},
		{"2 against 2 of 5, the fifth its own", map[string]etcd.KVHash{"a-0": h(7), "a-1": h(7), "a-2": h(8), "a-3": h(8), "a-4": h(9)}, 5, nil},
	} {
		v := CompareHashes(100, tc.hashes, tc.want)
		if !v.Conclusive || v.Consistent {
			t.Errorf("%s: %+v, want a conclusive disagreement", tc.name, v)
			continue
		}
		if got := slices.Sorted(maps.Keys(v.Diverged)); !slices.Equal(got, tc.diverged) {
			t.Errorf("%s: diverged %v, want %v", tc.name, got, tc.diverged)
		}
		c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
		msg := MismatchMessage(c, v)
		switch {
		case len(tc.diverged) == 1 && !strings.Contains(msg, tc.diverged[0]+" differs from the majority: replaced at once, its data copied again from the others"),
			len(tc.diverged) > 1 && !strings.Contains(msg, strings.Join(tc.diverged, ", ")+" differ from the majority: replaced at once, their data copied again from the others"):
			t.Errorf("%s: message %q does not say they are replaced", tc.name, msg)
		case len(tc.diverged) == 0 && !strings.Contains(msg, "no side can be told right"):
			t.Errorf("%s: message %q does not say no side can be told right", tc.name, msg)
		}
		c.Spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{}}
		if msg := MismatchMessage(c, v); len(tc.diverged) > 0 && !strings.Contains(msg, "not replaced (spec.recovery.replaceUnhealthyMemberAfter is 0s): replace each with `kubectl etcd replace-member a MEMBER`") {
			t.Errorf("%s, replacing off: message %q", tc.name, msg)
		}
	}
	v := CompareHashes(100, map[string]etcd.KVHash{"a-0": h(7), "a-1": h(8), "a-2": h(7)}, 3)
	if got, want := v.Diverged["a-1"], "at revision 100 its key-value hash is 00000008, where 2 of the 3 members hash to 00000007"; got != want {
		t.Errorf("what a-1 differs by: %q, want %q", got, want)
	}
}
