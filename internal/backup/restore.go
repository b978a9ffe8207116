package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	etcdutlsnapshot "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

var (
	// ErrChecksumMismatch: a downloaded snapshot's sha256 is not the expected one.
	ErrChecksumMismatch = errors.New("sha256 mismatch")
	// ErrDataDirNotEmpty: the data directory to restore into holds data that was not restored from
	// the same snapshot for the same member.
	ErrDataDirNotEmpty = errors.New("data directory not empty")
)

// RestoreMarkerName is the file RestoreDataDir writes into <data-dir>/member/ to record which
// snapshot the data directory was restored from; its presence makes a repeated restore a no-op.
const RestoreMarkerName = "etcd-operator-restore.json"

// stagingName is the directory inside the data directory where Restore and RestoreDataDir work;
// it is removed when they finish, and a leftover one (a restore that was killed) is discarded.
const stagingName = ".etcd-operator-restore"

// Fetch downloads the snapshot at key into the file dst (replacing it), computing its sha256 while
// downloading. wantSHA256 is the expected hex sha256; when empty, the one recorded in the backup's
// manifest is used, and a backup without a manifest is refused (error wrapping ErrNotFound). On a
// mismatch dst is not created and the error wraps ErrChecksumMismatch. dst appears only once the
// download is complete and verified (temporary file in its directory, fsync, rename). It returns
// the verified sha256.
func Fetch(ctx context.Context, s Store, key, wantSHA256, dst string) (string, error) {
	want, err := expectedSHA256(ctx, s, key, wantSHA256)
	if err != nil {
		return "", err
	}
	rc, err := s.Get(ctx, key)
	if err != nil {
		return "", fmt.Errorf("fetch: %w", err)
	}
	defer rc.Close()
	f, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("fetch: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	if _, err := io.CopyBuffer(io.MultiWriter(f, h), ctxReader{ctx, rc}, make([]byte, 1<<20)); err != nil {
		return "", fmt.Errorf("fetch %s: %w", s.Location(key), err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != want {
		return "", fmt.Errorf("fetch %s: %w: got %s, want %s", s.Location(key), ErrChecksumMismatch, got, want)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("fetch: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("fetch: %w", err)
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		return "", fmt.Errorf("fetch: %w", err)
	}
	ok = true
	return got, nil
}

// expectedSHA256 is want normalised, or the manifest's sha256 when want is empty.
func expectedSHA256(ctx context.Context, s Store, key, want string) (string, error) {
	if want != "" {
		want = strings.ToLower(strings.TrimSpace(want))
		if b, err := hex.DecodeString(want); err != nil || len(b) != sha256.Size {
			return "", fmt.Errorf("fetch: %q is not a hex sha256", want)
		}
		return want, nil
	}
	m, err := ReadManifest(ctx, s, key)
	if err != nil {
		return "", fmt.Errorf("fetch %s: no sha256 given and %w", s.Location(key), err)
	}
	return m.SHA256, nil
}

// RestoreConfig says how to create one member's data directory from a snapshot. The fields other
// than SnapshotPath, SnapshotSHA256 and Logger are that member's etcd flags of the same names, which
// it must then be started with.
type RestoreConfig struct {
	// SnapshotPath is the snapshot file (etcd's format, as Save and `etcdctl snapshot save` write).
	SnapshotPath string
	// SnapshotSHA256 is the file's hex sha256 as the caller verified it (Fetch); it is recorded in
	// the marker, not recomputed. etcdutl checks the sha256 etcd embeds in the file in any case.
	SnapshotSHA256 string
	// DataDir is the member's --data-dir.
	DataDir string
	// Name is the member's --name; it must appear in InitialCluster.
	Name string
	// InitialCluster is the new cluster's --initial-cluster, "name=peerURL,...".
	InitialCluster string
	// InitialClusterToken is the new cluster's --initial-cluster-token. Member and cluster IDs are
	// derived from the peer URLs and this token: a token other than the source cluster's gives the
	// new cluster a new cluster ID.
	InitialClusterToken string
	// PeerURLs are the member's --initial-advertise-peer-urls.
	PeerURLs []string
	// RevisionBump, when > 0, raises the newest revision by that much and marks the old ones
	// compacted, so that watchers of the old cluster (e.g. kube-apiserver's caches) see no revision
	// go backwards and re-list.
	RevisionBump uint64
	// Logger receives etcdutl's messages; nil for none.
	Logger *zap.Logger
}

// RestoreMarker is the content of the marker file (RestoreMarkerName).
type RestoreMarker struct {
	SnapshotSHA256      string    `json:"snapshotSHA256"`
	Name                string    `json:"name"`
	InitialCluster      string    `json:"initialCluster"`
	InitialClusterToken string    `json:"initialClusterToken"`
	PeerURLs            []string  `json:"peerURLs"`
	RevisionBump        uint64    `json:"revisionBump,omitempty"`
	RestoredAt          time.Time `json:"restoredAt"`
}

func (c RestoreConfig) marker() RestoreMarker {
	return RestoreMarker{
		SnapshotSHA256:      strings.ToLower(c.SnapshotSHA256),
		Name:                c.Name,
		InitialCluster:      c.InitialCluster,
		InitialClusterToken: c.InitialClusterToken,
		PeerURLs:            slices.Clone(c.PeerURLs),
		RevisionBump:        c.RevisionBump,
	}
}

// same reports whether m records a restore with the same inputs as want.
func (m RestoreMarker) same(want RestoreMarker) bool {
	return m.SnapshotSHA256 == want.SnapshotSHA256 && m.Name == want.Name && m.InitialCluster == want.InitialCluster &&
		m.InitialClusterToken == want.InitialClusterToken && slices.Equal(m.PeerURLs, want.PeerURLs) && m.RevisionBump == want.RevisionBump
}

// checkDataDir returns done=true when dataDir was already restored with the same inputs as want,
// nil when dataDir is missing or empty (a leftover staging directory, and the lost+found of a
// volume's root, do not count), and an error wrapping ErrDataDirNotEmpty otherwise.
func checkDataDir(dataDir string, want RestoreMarker) (done bool, err error) {
	entries, err := os.ReadDir(dataDir)
	if isNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	entries = slices.DeleteFunc(entries, func(e os.DirEntry) bool { return e.Name() == stagingName || e.Name() == "lost+found" })
	if len(entries) == 0 {
		return false, nil
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "member", RestoreMarkerName))
	if isNotExist(err) {
		return false, fmt.Errorf("restore: %w: %s holds data that was not restored by etcd-operator", ErrDataDirNotEmpty, dataDir)
	}
	if err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	var m RestoreMarker
	if err := json.Unmarshal(b, &m); err != nil {
		return false, fmt.Errorf("restore: %w: %s has an unreadable restore marker: %w", ErrDataDirNotEmpty, dataDir, err)
	}
	if !m.same(want) {
		return false, fmt.Errorf("restore: %w: %s was restored at %s from snapshot %s as member %q of token %q, not from %s as member %q of token %q",
			ErrDataDirNotEmpty, dataDir, m.RestoredAt.Format(time.RFC3339), m.SnapshotSHA256, m.Name, m.InitialClusterToken,
			want.SnapshotSHA256, want.Name, want.InitialClusterToken)
	}
	return true, nil
}

// RestoreDataDir creates cfg.DataDir from the snapshot with etcdutl's restore library, as member
// cfg.Name of a new cluster, and records the restore in <DataDir>/member/etcd-operator-restore.json.
// It is idempotent: when DataDir was already restored with the same snapshot sha256, name, initial
// cluster, token, peer URLs and revision bump, it does nothing and returns restored=false. It refuses
// (ErrDataDirNotEmpty) any other non-empty DataDir. It is safe to kill at any point: the restore
// is built in a staging directory inside DataDir and moved into place with one rename of
// <staging>/member to <DataDir>/member; a leftover staging directory is discarded by the next run.
// A corrupt snapshot (its embedded sha256 does not match) fails with an error wrapping
// ErrCorruptSnapshot.
func RestoreDataDir(cfg RestoreConfig) (restored bool, err error) {
	if cfg.DataDir == "" || cfg.Name == "" || cfg.InitialCluster == "" || cfg.InitialClusterToken == "" || len(cfg.PeerURLs) == 0 {
		return false, errors.New("restore: data dir, name, initial cluster, token and peer URLs are all required")
	}
	want := cfg.marker()
	if already, err := checkDataDir(cfg.DataDir, want); err != nil || already {
		return false, err
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	staging := filepath.Join(cfg.DataDir, stagingName)
	out := filepath.Join(staging, "data")
	if err := os.RemoveAll(out); err != nil {
		return false, fmt.Errorf("restore: discard an earlier attempt: %w", err)
	}
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	err = etcdutlsnapshot.NewV3(log).Restore(etcdutlsnapshot.RestoreConfig{
		SnapshotPath:        cfg.SnapshotPath,
		Name:                cfg.Name,
		OutputDataDir:       out,
		PeerURLs:            cfg.PeerURLs,
		InitialCluster:      cfg.InitialCluster,
		InitialClusterToken: cfg.InitialClusterToken,
		RevisionBump:        cfg.RevisionBump,
		MarkCompacted:       cfg.RevisionBump > 0,
	})
	if err != nil {
		if msg := err.Error(); strings.Contains(msg, "sha256") || strings.Contains(msg, "hash") {
			err = fmt.Errorf("%w: %w", ErrCorruptSnapshot, err)
		}
		return false, fmt.Errorf("restore %s from %s: %w", cfg.DataDir, cfg.SnapshotPath, err)
	}
	want.RestoredAt = time.Now().UTC()
	b, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		return false, err
	}
	if err := writeFileSync(filepath.Join(out, "member", RestoreMarkerName), append(b, '\n')); err != nil {
		return false, fmt.Errorf("restore: marker: %w", err)
	}
	if err := os.Rename(filepath.Join(out, "member"), filepath.Join(cfg.DataDir, "member")); err != nil {
		return false, fmt.Errorf("restore: move into place: %w", err)
	}
	if err := syncDir(cfg.DataDir); err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	if err := os.RemoveAll(staging); err != nil {
		return false, fmt.Errorf("restore: remove staging directory: %w", err)
	}
	return true, nil
}

// Restore creates cfg.DataDir from the backup at key in s: it downloads the snapshot into a staging
// directory inside DataDir (so it needs room for the snapshot and the restored database on that
// volume), verifies its sha256 against wantSHA256 (or, when empty, the manifest's; Fetch), and
// calls RestoreDataDir. cfg.SnapshotPath and cfg.SnapshotSHA256 are set by Restore. When DataDir
// was already restored from that snapshot with the same settings, it downloads nothing and
// returns restored=false; a non-empty DataDir restored otherwise is refused before downloading (error
// wrapping ErrDataDirNotEmpty). Errors also wrap ErrChecksumMismatch, ErrCorruptSnapshot,
// ErrNotFound and the store's errors.
func Restore(ctx context.Context, s Store, key, wantSHA256 string, cfg RestoreConfig) (restored bool, err error) {
	want, err := expectedSHA256(ctx, s, key, wantSHA256)
	if err != nil {
		return false, err
	}
	cfg.SnapshotSHA256 = want
	if already, err := checkDataDir(cfg.DataDir, cfg.marker()); err != nil || already {
		return false, err
	}
	staging := filepath.Join(cfg.DataDir, stagingName)
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return false, fmt.Errorf("restore: %w", err)
	}
	cfg.SnapshotPath = filepath.Join(staging, "snapshot.db")
	if _, err := Fetch(ctx, s, key, want, cfg.SnapshotPath); err != nil {
		_ = os.RemoveAll(staging)
		return false, err
	}
	restored, err = RestoreDataDir(cfg)
	if err != nil {
		_ = os.RemoveAll(staging)
	}
	return restored, err
}

// writeFileSync writes a new file and fsyncs it.
func writeFileSync(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
