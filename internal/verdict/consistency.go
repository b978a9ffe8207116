package verdict

import (
	"fmt"
	"sort"
	"strings"

	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
)

// Hashes is the outcome of comparing the members' hashes.
type Hashes struct {
	// Conclusive is false when the members hashed with different compact revisions (a compaction ran
	// between the calls) or did not all answer: compare again later.
	Conclusive bool
	// Consistent is true when every member has the same hash.
	Consistent bool
	// Message says what was compared and found, for the DataInconsistent condition.
	Message string
}

// CompareHashes compares the hashes members computed at one revision, as etcd's corruption check does:
// hashes of the same revision and compact revision must be equal.
func CompareHashes(rev int64, hashes map[string]etcd.KVHash, want int) Hashes {
	if len(hashes) < want {
		return Hashes{Message: fmt.Sprintf("%d of %d members answered HashKV", len(hashes), want)}
	}
	names := make([]string, 0, len(hashes))
	for n := range hashes {
		names = append(names, n)
	}
	sort.Strings(names)
	compact := hashes[names[0]].CompactRevision
	byHash := map[uint32][]string{}
	var parts []string
	for _, n := range names {
		h := hashes[n]
		if h.CompactRevision != compact || h.HashRevision != rev {
			return Hashes{Message: "members hashed different revisions; compare again later"}
		}
		byHash[h.Hash] = append(byHash[h.Hash], n)
		parts = append(parts, fmt.Sprintf("%s=%08x", n, h.Hash))
	}
	if len(byHash) == 1 {
		return Hashes{Conclusive: true, Consistent: true,
			Message: fmt.Sprintf("At the last check, all %d members hashed to %08x at revision %d (%s)", len(names), hashes[names[0]].Hash, rev, compacted(compact))}
	}
	return Hashes{Conclusive: true, Message: fmt.Sprintf(
		"Members disagree on their data at revision %d: %s. Do not scale or upgrade; find the odd member out with `etcdctl endpoint hashkv --cluster`, then remove it and let the operator re-add it, or restore from a backup",
		rev, strings.Join(parts, ", "))}
}

// HashTarget returns the revision to compare the voters' hashes at (the lowest any of them has
// applied) and each voter's client URL; revision 0 when a member is a learner, or has not answered, or
// is unhealthy: the check waits for a settled cluster.
func HashTarget(m *model.Cluster) (int64, map[string]string) {
	var rev int64
	endpoints := map[string]string{}
	for _, mem := range m.Listed() {
		st := mem.Status
		if mem.Learner() || st == nil || !mem.Healthy() {
			return 0, nil
		}
		if rev == 0 || st.Revision < rev {
			rev = st.Revision
		}
		endpoints[mem.Name] = st.Endpoint
	}
	return rev, endpoints
}

// compacted says up to which revision the store was compacted; etcd reports -1 when it never was.
func compacted(rev int64) string {
	if rev < 0 {
		return "never compacted"
	}
	return fmt.Sprintf("compacted at %d", rev)
}
