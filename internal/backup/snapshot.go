package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	etcdutlsnapshot "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/etcdkit/etcd-operator/internal/backup/policy"
	"github.com/etcdkit/etcd-operator/internal/etcd"
)

var (
	// ErrNoHealthyMember: no endpoint answered as a healthy voting member.
	ErrNoHealthyMember = errors.New("no healthy member to take a snapshot from")
	// ErrCorruptSnapshot: a snapshot failed verification (its embedded sha256 or the database's
	// integrity check).
	ErrCorruptSnapshot = errors.New("corrupt snapshot")
)

// Role of the member a snapshot was taken from (policy's, as Result records them).
const (
	RoleFollower = policy.RoleFollower
	RoleLeader   = policy.RoleLeader
)

// SelectMember asks every endpoint for its status, concurrently, and returns the member to take a
// snapshot from: a healthy follower, or the leader when no follower qualifies. An endpoint that has
// not answered when ctx ends is passed over, so callers bound ctx to a few seconds. Healthy
// means: it answered, reports no errors or alarms, knows a leader, is a voter (not a learner), and
// is in the newest raft term any endpoint reported (a partitioned member with a stale view is
// passed over). Among healthy followers the one with the highest applied index wins, then the
// earliest in endpoints. Taking the snapshot from a follower spares the leader the disk and network
// load. The error wraps ErrNoHealthyMember and says why each endpoint did not qualify.
func SelectMember(ctx context.Context, c etcd.Client, endpoints []string) (etcd.EndpointStatus, error) {
	if len(endpoints) == 0 {
		return etcd.EndpointStatus{}, fmt.Errorf("%w: no endpoints", ErrNoHealthyMember)
	}
	answers := statuses(ctx, c, endpoints)
	var maxTerm uint64
	for _, a := range answers {
		if a.err == nil && a.st.RaftTerm > maxTerm {
			maxTerm = a.st.RaftTerm
		}
	}
	var (
		reasons  []string
		follower *etcd.EndpointStatus
		leader   *etcd.EndpointStatus
	)
	for i, a := range answers {
		switch {
		case a.err != nil:
			reasons = append(reasons, a.err.Error())
		case len(a.st.Errors) > 0:
			reasons = append(reasons, fmt.Sprintf("%s reports %s", endpoints[i], strings.Join(a.st.Errors, "; ")))
		case a.st.IsLearner:
			reasons = append(reasons, fmt.Sprintf("%s is a learner", endpoints[i]))
		case a.st.Leader == 0:
			reasons = append(reasons, fmt.Sprintf("%s has no leader", endpoints[i]))
		case a.st.RaftTerm < maxTerm:
			reasons = append(reasons, fmt.Sprintf("%s is in raft term %d, others in %d", endpoints[i], a.st.RaftTerm, maxTerm))
		case a.st.IsLeader():
			if leader == nil {
				leader = &answers[i].st
			}
		default:
			if follower == nil || a.st.RaftAppliedIndex > follower.RaftAppliedIndex {
				follower = &answers[i].st
			}
		}
	}
	switch {
	case follower != nil:
		return *follower, nil
	case leader != nil:
		return *leader, nil
	}
	return etcd.EndpointStatus{}, fmt.Errorf("%w: %s", ErrNoHealthyMember, strings.Join(reasons, "; "))
}

// SelectOne asks the one member at endpoint for its status and returns it when it may be snapshotted
// although it may have no leader (a survivor of a quorum loss, whose data is wanted as it is): it
// answered and is a voter. The error wraps ErrNoHealthyMember and says why not.
func SelectOne(ctx context.Context, c etcd.Client, endpoint string) (etcd.EndpointStatus, error) {
	st, err := c.Status(ctx, endpoint)
	switch {
	case err != nil:
		return st, fmt.Errorf("%w: %s does not answer: %w", ErrNoHealthyMember, endpoint, err)
	case st.IsLearner:
		return st, fmt.Errorf("%w: %s is a learner, whose data may lag any voter's", ErrNoHealthyMember, endpoint)
	}
	return st, nil
}

// statusAnswer is what one endpoint answered to Status.
type statusAnswer struct {
	st  etcd.EndpointStatus
	err error
}

// statuses asks every endpoint for its status concurrently and returns the answers in the order of
// endpoints, once all have answered or failed.
func statuses(ctx context.Context, c etcd.Client, endpoints []string) []statusAnswer {
	answers := make([]statusAnswer, len(endpoints))
	done := make(chan struct{}, len(endpoints))
	for i, ep := range endpoints {
		go func() {
			st, err := c.Status(ctx, ep)
			answers[i] = statusAnswer{st, err}
			done <- struct{}{}
		}()
	}
	for range endpoints {
		<-done
	}
	return answers
}

// Snapshot is a snapshot file streamed from a member and verified.
type Snapshot struct {
	// Path is the file: etcd's snapshot format, a bbolt database followed by the sha256 of the
	// database (32 bytes), as `etcdctl snapshot save` writes it.
	Path string
	// SizeBytes is the file's size in bytes.
	SizeBytes int64
	// SHA256 is the hex sha256 of the whole file.
	SHA256 string
	// MemberID is the ID of the member that produced it.
	MemberID uint64
	// Status is what verification read from the database.
	Status Status
}

// Status is what etcd's snapshot status (etcdutl snapshot status) reports about a snapshot.
type Status struct {
	// Hash is the crc32 (Castagnoli) of all buckets' keys and values, as etcdutl reports it.
	Hash uint32 `json:"hash"`
	// Revision is the newest key-value revision in the snapshot.
	Revision int64 `json:"revision"`
	// TotalKeys is the number of live keys.
	TotalKeys int `json:"totalKeys"`
	// TotalSize is the database's size in bytes (without the sha256 trailer).
	TotalSize int64 `json:"totalSize"`
	// StorageVersion is the database's storage version ("3.6.0"); empty for databases of etcd < 3.6.
	StorageVersion string `json:"storageVersion,omitempty"`
}

// Save streams a snapshot from the member cli is connected to into a new file at path (which must
// not exist), computing the sha256 of the file and checking the sha256 etcd appends to the stream
// as the bytes pass, then verifies the database with VerifyDB. cli must have exactly one endpoint:
// the snapshot is that member's point-in-time state. On error the file is removed. Errors wrap
// ErrCorruptSnapshot when the stream or the database fails verification, and ctx's error when it
// ends first.
func Save(ctx context.Context, cli *clientv3.Client, path string) (Snapshot, error) {
	if n := len(cli.Endpoints()); n != 1 {
		return Snapshot{}, fmt.Errorf("snapshot: the client must have exactly one endpoint, has %d", n)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	ok := false
	defer func() {
		_ = f.Close()
		if !ok {
			_ = os.Remove(path)
		}
	}()
	ep := cli.Endpoints()[0]
	resp, err := cli.SnapshotWithVersion(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot from %s: %w", ep, err)
	}
	defer resp.Snapshot.Close()

	th := &trailerHash{h: sha256.New()}
	n, err := io.CopyBuffer(io.MultiWriter(f, th), resp.Snapshot, make([]byte, 1<<20))
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return Snapshot{}, fmt.Errorf("snapshot from %s: stream: %w", ep, err)
	}
	sum, err := th.finish(n)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot from %s: %w", ep, err)
	}
	if err := f.Close(); err != nil {
		return Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	st, err := VerifyDB(path)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot from %s: %w", ep, err)
	}
	s := Snapshot{
		Path:      path,
		SizeBytes: n,
		SHA256:    hex.EncodeToString(sum),
		Status:    st,
	}
	if resp.Header != nil {
		s.MemberID = resp.Header.MemberId
	}
	ok = true
	return s, nil
}

// Verify checks a snapshot file: the sha256 etcd appends to snapshots must match the database
// before it, and the database must pass VerifyDB. It returns the database's status, or an error
// wrapping ErrCorruptSnapshot.
func Verify(path string) (Status, error) {
	f, err := os.Open(path)
	if err != nil {
		return Status{}, fmt.Errorf("verify snapshot: %w", err)
	}
	th := &trailerHash{h: sha256.New()}
	n, err := io.CopyBuffer(th, f, make([]byte, 1<<20))
	_ = f.Close()
	if err != nil {
		return Status{}, fmt.Errorf("verify snapshot %s: %w", path, err)
	}
	if _, err := th.finish(n); err != nil {
		return Status{}, fmt.Errorf("verify snapshot %s: %w", path, err)
	}
	return VerifyDB(path)
}

// VerifyDB runs etcd's snapshot status on the file (etcdutl's snapshot library): bbolt's
// consistency check of every page, then a pass over every key computing the hash, the newest
// revision and the number of live keys. It does not check the appended sha256 (Verify does). An
// error wraps ErrCorruptSnapshot.
func VerifyDB(path string) (st Status, err error) {
	defer func() {
		// bbolt may panic on some damaged pages instead of returning an error.
		if r := recover(); r != nil {
			err = fmt.Errorf("verify snapshot %s: %w: %v", path, ErrCorruptSnapshot, r)
		}
	}()
	ds, err := etcdutlsnapshot.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		return Status{}, fmt.Errorf("verify snapshot %s: %w: %w", path, ErrCorruptSnapshot, err)
	}
	return Status{
		Hash:           ds.Hash,
		Revision:       ds.Revision,
		TotalKeys:      ds.TotalKey,
		TotalSize:      ds.TotalSize,
		StorageVersion: ds.Version,
	}, nil
}

// trailerHash hashes everything written to it except the last sha256.Size bytes, which it keeps:
// etcd's snapshot stream ends with the sha256 of the bytes before it. One sha256 pass gives both
// that check and the sha256 of the whole stream (finish).
type trailerHash struct {
	h    hash.Hash
	tail [sha256.Size]byte
	n    int // bytes held in tail
}

func (t *trailerHash) Write(p []byte) (int, error) {
	total := len(p)
	if len(p) >= sha256.Size {
		t.h.Write(t.tail[:t.n])
		t.h.Write(p[:len(p)-sha256.Size])
		copy(t.tail[:], p[len(p)-sha256.Size:])
		t.n = sha256.Size
		return total, nil
	}
	if over := t.n + len(p) - sha256.Size; over > 0 {
		t.h.Write(t.tail[:over])
		copy(t.tail[:], t.tail[over:t.n])
		t.n -= over
	}
	copy(t.tail[t.n:], p)
	t.n += len(p)
	return total, nil
}

// finish checks that the n bytes written were a database followed by its sha256 and returns the
// sha256 of all n bytes. Like etcd, it recognises the trailer by the size: databases are a whole
// number of 512-byte sectors. Call it once, after the last Write.
func (t *trailerHash) finish(n int64) ([]byte, error) {
	if n%512 != sha256.Size || t.n != sha256.Size {
		return nil, fmt.Errorf("%w: %d bytes is not a database followed by its sha256 (truncated stream?)", ErrCorruptSnapshot, n)
	}
	// Sum does not change the state: the hash continues over the trailer for the whole file's.
	if sum := t.h.Sum(nil); !bytes.Equal(sum, t.tail[:]) {
		return nil, fmt.Errorf("%w: the database's sha256 is %x, the snapshot says %x", ErrCorruptSnapshot, sum, t.tail[:])
	}
	t.h.Write(t.tail[:])
	return t.h.Sum(nil), nil
}
