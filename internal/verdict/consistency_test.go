package verdict

import (
	"strings"
	"testing"

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
}
