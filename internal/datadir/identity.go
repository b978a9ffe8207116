// Package datadir checks that an etcd data directory belongs to the member about to start on it, before
// etcd starts: etcd itself starts on any directory it finds (an emptied one under a kept volume, another
// member's, another cluster's) and then panics or, worse, joins under the wrong identity.
package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
)

// ErrNotOwn is wrapped by Verify's error when the data directory is not the expected member's: empty,
// another member's or another cluster's. Starting etcd on it would lose or corrupt data;
// the member has to be replaced.
var ErrNotOwn = errors.New("the data directory is not the member's own")

// Identity returns the member ID and cluster ID the data directory dataDir (etcd's --data-dir) belongs
// to, from the metadata etcd writes at the start of every WAL file (read-only; etcd must not run on it).
// It returns ErrEmpty when the directory holds no WAL file, and another error when it cannot be read
// (permissions, a WAL that does not decode).
func Identity(dataDir string) (memberID, clusterID uint64, err error) {
	walDir := filepath.Join(dataDir, "member", "wal")
	names, err := filepath.Glob(filepath.Join(walDir, "*.wal"))
	if err != nil {
		return 0, 0, err
	}
	if len(names) == 0 {
		// tell an empty directory from one that cannot be read: only the first is data loss
		if _, err := os.Stat(dataDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, 0, err
		}
		if _, err := os.ReadDir(walDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, 0, err
		}
		return 0, 0, ErrEmpty
	}
	lg := zap.NewNop()
	snaps, err := wal.ValidSnapshotEntries(lg, walDir)
	if err != nil {
		return 0, 0, fmt.Errorf("read the WAL's snapshot entries in %s: %w", walDir, err)
	}
	if len(snaps) == 0 {
		return 0, 0, fmt.Errorf("the WAL in %s has no snapshot entry", walDir)
	}
	w, err := wal.OpenForRead(lg, walDir, snaps[len(snaps)-1])
	if err != nil {
		return 0, 0, fmt.Errorf("open the WAL in %s: %w", walDir, err)
	}
	defer func() { _ = w.Close() }()
	raw, _, _, err := w.ReadAll()
	if err != nil && raw == nil {
		return 0, 0, fmt.Errorf("read the WAL in %s: %w", walDir, err)
	}
	var md pb.Metadata
	if err := md.Unmarshal(raw); err != nil {
		return 0, 0, fmt.Errorf("decode the WAL metadata in %s: %w", walDir, err)
	}
	return md.NodeID, md.ClusterID, nil
}

// ErrEmpty is Identity's error for a data directory that holds no WAL (never used, or emptied).
var ErrEmpty = errors.New("the data directory holds no etcd data")

// Verify returns nil when dataDir belongs to member memberID of cluster clusterID; an error wrapping
// ErrNotOwn that says what the directory holds (IDs in hex, as etcd prints them) when it is empty or
// another member's; and Identity's error when it cannot tell.
func Verify(dataDir string, memberID, clusterID uint64) error {
	gotMember, gotCluster, err := Identity(dataDir)
	switch {
	case errors.Is(err, ErrEmpty):
		return fmt.Errorf("%w: member %016x of cluster %016x had started on this volume, and %s is now empty: its data is gone", ErrNotOwn, memberID, clusterID, dataDir)
	case err != nil:
		return err // not proof that the data is gone: etcd will say what it makes of the directory
	case gotMember != memberID || gotCluster != clusterID:
		return fmt.Errorf("%w: %s holds the data of member %016x of cluster %016x, not of member %016x of cluster %016x", ErrNotOwn, dataDir, gotMember, gotCluster, memberID, clusterID)
	}
	return nil
}
