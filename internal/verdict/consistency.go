package verdict

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
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
	// Diverged names, when the members disagree, each member whose hash differs from the one a strict
	// majority of the want members share, with what it differs by (for AnnotationDataDiverged); empty
	// when no hash has such a majority (then no side can be told right).
	Diverged map[string]string
}

// CompareHashes compares the hashes members computed at one revision, as etcd's corruption check does:
// hashes of the same revision and compact revision must be equal. want is how many members were asked.
// When they disagree and one hash is shared by a strict majority of want, the members that differ
// from it are the ones whose data diverged (Diverged), as etcd's compaction hash check decides.
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
		who := fmt.Sprintf("all %d members", len(names))
		if len(names) == 1 {
			who = "the only member, " + names[0] + ","
		}
		return Hashes{Conclusive: true, Consistent: true,
			Message: fmt.Sprintf("At the last check, %s hashed to %08x at revision %d (%s)", who, hashes[names[0]].Hash, rev, compacted(compact))}
	}
	out := Hashes{Conclusive: true, Message: fmt.Sprintf("Members disagree on their data at revision %d: %s", rev, strings.Join(parts, ", "))}
	for hash, agree := range byHash {
		if 2*len(agree) <= want {
			continue
		}
		out.Diverged = map[string]string{}
		for _, n := range names {
			if h := hashes[n].Hash; h != hash {
				out.Diverged[n] = fmt.Sprintf("at revision %d its key-value hash is %08x, where %d of the %d members hash to %08x", rev, h, len(agree), want, hash)
			}
		}
	}
	return out
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

// MismatchMessage returns the DataInconsistent message of v, a comparison whose members disagree, in
// cluster c: which members differ from the majority and are replaced at once, or, with
// spec.recovery.replaceUnhealthyMemberAfter 0s, which ones to replace by hand, or, when no hash has a
// majority, what to do.
func MismatchMessage(c *etcdv1beta1.EtcdCluster, v Hashes) string {
	names := strings.Join(slices.Sorted(maps.Keys(v.Diverged)), ", ")
	differ, is, its := "differ", "are", "their data"
	if len(v.Diverged) == 1 {
		differ, is, its = "differs", "is", "its data"
	}
	switch {
	case names != "" && c.Spec.ReplaceAfter() > 0:
		return v.Message + ". " + names + " " + differ + " from the majority: replaced at once, " + its + " copied again from the others"
	case names != "":
		return v.Message + ". " + names + " " + differ + " from the majority and " + is + " not replaced (spec.recovery.replaceUnhealthyMemberAfter is 0s): replace each with `kubectl etcd replace-member " + c.Name + " MEMBER`"
	}
	return v.Message + ". No hash is shared by a majority of the members, so no side can be told right: do not scale or upgrade; compare with `etcdctl endpoint hashkv --cluster`, and restore from a backup"
}
