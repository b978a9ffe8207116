// Package backup takes, stores and restores etcd snapshots.
//
// A backup (Take) streams a snapshot from one healthy member (a follower when there is one),
// computing its sha256 while streaming and checking the sha256 etcd appends to it, verifies the
// database with etcd's snapshot status, and stores it under a deterministic key (policy.Key) in a
// Store: an S3 bucket or a directory. A small JSON manifest with the Result is stored next to it
// (policy.ManifestKey), after the snapshot: a manifest means the snapshot at its key is complete and
// verified. A failed backup leaves neither.
//
// A restore (Restore) downloads a snapshot, verifies its sha256 and creates a member's data
// directory from it with etcdutl's restore library, as a member of a new cluster; every member of
// the new cluster restores the same snapshot before etcd starts.
//
// What needs no storage or etcd — backup keys, the Result record, schedules and retention — is in
// package policy, which the controller and the webhooks import without pulling in this one.
package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdkit/etcd-operator/internal/backup/policy"
	"github.com/etcdkit/etcd-operator/internal/etcd"
)

// maxManifestBytes bounds how much of a manifest is read.
const maxManifestBytes = 64 << 10

// Result describes a complete backup: policy.Result, the manifest's content and what
// `etcd-operator backup` prints.
type Result = policy.Result

// TakeOptions are the inputs of Take.
type TakeOptions struct {
	// Etcd says how to reach the cluster: the member to snapshot is chosen among Etcd.Endpoints
	// (SelectMember).
	Etcd etcd.Config
	// Store and Key are where the snapshot goes (Key: see Key).
	Store Store
	Key   string
	// TempDir is where the snapshot is staged before upload; it needs room for the whole
	// database. Empty means os.TempDir().
	TempDir string
	// StatusTimeout bounds how long each member may take to report its status when the member to
	// snapshot is chosen; a member that does not answer in time is passed over. Zero means
	// DefaultStatusTimeout.
	StatusTimeout time.Duration
	// Member, when set, is the one endpoint (of Etcd.Endpoints) to snapshot, taken although it may
	// have no leader (SelectOne): a survivor of a quorum loss.
	Member string
	// Logger receives progress messages; nil for none.
	Logger *zap.Logger
}

// DefaultStatusTimeout is TakeOptions.StatusTimeout's default.
const DefaultStatusTimeout = 5 * time.Second

// Take makes a backup: it picks a member (SelectMember), streams its snapshot to a file in TempDir
// while computing its sha256 (Save), verifies it, uploads it to Key with its sha256 as metadata,
// then writes the manifest (ManifestKey) holding the Result. Take is idempotent per key: when the
// manifest already exists, Take returns it and takes no new snapshot (a retried Job does not
// replace a complete backup). The manifest is read first, so wrong storage credentials fail before
// any snapshot is taken. When Take fails, it adds nothing at Key or at the manifest's key (a
// snapshot uploaded before the manifest failed is deleted again), and the error wraps ErrNoHealthyMember,
// ErrCorruptSnapshot, ErrAccessDenied, ErrBucketNotFound, ErrUnreachable or ctx's error when one of
// those was the cause.
func Take(ctx context.Context, o TakeOptions) (Result, error) {
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	start := time.Now().UTC()
	if prev, done, err := previous(ctx, o, log); done || err != nil {
		return prev, err
	}

	c, err := etcd.New(ctx, o.Etcd)
	if err != nil {
		return Result{}, fmt.Errorf("backup: %w", err)
	}
	defer c.Close()
	member, err := selectMember(ctx, c, o)
	if err != nil {
		return Result{}, fmt.Errorf("backup: %w", err)
	}
	role := roleOf(member)
	log.Info("taking a snapshot", zap.String("endpoint", member.Endpoint), zap.String("member", etcd.FormatID(member.MemberID)),
		zap.String("role", role), zap.Int64("dbSizeBytes", member.DBSizeBytes))

	dir, err := os.MkdirTemp(o.TempDir, "etcd-backup-")
	if err != nil {
		return Result{}, fmt.Errorf("backup: staging directory: %w", err)
	}
	defer os.RemoveAll(dir)
	cli, err := memberClient(o.Etcd, member.Endpoint)
	if err != nil {
		return Result{}, fmt.Errorf("backup: client for %s: %w", member.Endpoint, err)
	}
	defer cli.Close()
	snap, err := Save(ctx, cli, filepath.Join(dir, "snapshot.db"))
	if err != nil {
		return Result{}, fmt.Errorf("backup: %w", err)
	}
	log.Info("snapshot verified", zap.Int64("sizeBytes", snap.SizeBytes), zap.String("sha256", snap.SHA256),
		zap.Int64("revision", snap.Status.Revision), zap.Int("totalKeys", snap.Status.TotalKeys), zap.String("storageVersion", snap.Status.StorageVersion))

	location, err := upload(ctx, o, snap)
	if err != nil {
		return Result{}, err
	}
	res := newResult(o.Key, location, snap, member, start)
	if err := storeManifest(ctx, o, res); err != nil {
		return Result{}, fmt.Errorf("backup: %w", err)
	}
	log.Info("backup complete", zap.String("location", location))
	return res, nil
}

// previous checks o's key and store, and returns the Result of the manifest at o's key with done set
// when the backup is already complete. An error other than the manifest's absence is returned.
func previous(ctx context.Context, o TakeOptions, log *zap.Logger) (prev Result, done bool, err error) {
	if err := checkKey(o.Key); err != nil {
		return Result{}, false, err
	}
	if o.Store == nil {
		return Result{}, false, errors.New("backup: no store")
	}
	switch prev, err := ReadManifest(ctx, o.Store, o.Key); {
	case err == nil:
		log.Info("backup already complete: its manifest exists; not taking another snapshot", zap.String("location", prev.Location))
		return prev, true, nil
	case !errors.Is(err, ErrNotFound):
		return Result{}, false, fmt.Errorf("backup %s: %w", o.Store.Location(o.Key), err)
	}
	return Result{}, false, nil
}

// upload stores the snapshot file at o's key and returns its location.
func upload(ctx context.Context, o TakeOptions, snap Snapshot) (string, error) {
	f, err := os.Open(snap.Path)
	if err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	location, err := o.Store.Put(ctx, o.Key, f, snap.SizeBytes, PutOptions{SHA256: snap.SHA256})
	if err != nil {
		return "", fmt.Errorf("backup: upload: %w", err)
	}
	return location, nil
}

// storeManifest writes res as the manifest of the snapshot at o's key. When that fails, it removes
// the snapshot: without its manifest it is not a backup.
func storeManifest(ctx context.Context, o TakeOptions, res Result) error {
	err := writeManifest(ctx, o.Store, res)
	if err == nil {
		return nil
	}
	// Removed even if ctx has ended.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if derr := o.Store.Delete(dctx, o.Key); derr != nil {
		err = errors.Join(err, fmt.Errorf("and could not remove the snapshot without manifest: %w", derr))
	}
	return err
}

// selectMember is SelectMember over o's endpoints, bounded by o's status timeout.
func selectMember(ctx context.Context, c etcd.Client, o TakeOptions) (etcd.EndpointStatus, error) {
	statusTimeout := o.StatusTimeout
	if statusTimeout <= 0 {
		statusTimeout = DefaultStatusTimeout
	}
	sctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	if o.Member != "" {
		return SelectOne(sctx, c, o.Member)
	}
	return SelectMember(sctx, c, o.Etcd.Endpoints)
}

// roleOf is RoleLeader for the leader, RoleFollower for any other member.
func roleOf(member etcd.EndpointStatus) string {
	if member.IsLeader() {
		return RoleLeader
	}
	return RoleFollower
}

// memberClient returns a client of the one member at endpoint, with cfg's credentials.
func memberClient(cfg etcd.Config, endpoint string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: dialTimeout(cfg),
		TLS:         cfg.TLS,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      zap.NewNop(),
	})
}

// newResult describes the snapshot snap of member, stored at location under key, completed now.
func newResult(key, location string, snap Snapshot, member etcd.EndpointStatus, start time.Time) Result {
	memberID := member.MemberID
	if snap.MemberID != 0 {
		memberID = snap.MemberID
	}
	return Result{
		Key:            key,
		Location:       location,
		SizeBytes:      snap.SizeBytes,
		SHA256:         snap.SHA256,
		Revision:       snap.Status.Revision,
		TotalKeys:      snap.Status.TotalKeys,
		Hash:           snap.Status.Hash,
		EtcdVersion:    member.Version,
		StorageVersion: snap.Status.StorageVersion,
		Member:         etcd.FormatID(memberID),
		Endpoint:       member.Endpoint,
		Role:           roleOf(member),
		StartTime:      start,
		CompletionTime: time.Now().UTC(),
	}
}

// dialTimeout is cfg's dial timeout or etcd.DefaultDialTimeout.
func dialTimeout(cfg etcd.Config) time.Duration {
	if cfg.DialTimeout > 0 {
		return cfg.DialTimeout
	}
	return etcd.DefaultDialTimeout
}

// writeManifest stores r as the manifest of r.Key.
func writeManifest(ctx context.Context, s Store, r Result) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := s.Put(ctx, policy.ManifestKey(r.Key), bytes.NewReader(b), int64(len(b)), PutOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	return nil
}

// ReadManifest returns the Result stored in the manifest of the snapshot at key. The error wraps
// ErrNotFound when there is no manifest (no complete backup at key).
func ReadManifest(ctx context.Context, s Store, key string) (Result, error) {
	rc, err := s.Get(ctx, policy.ManifestKey(key))
	if err != nil {
		return Result{}, fmt.Errorf("manifest: %w", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes))
	if err != nil {
		return Result{}, fmt.Errorf("read manifest %s: %w", s.Location(policy.ManifestKey(key)), err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return Result{}, fmt.Errorf("manifest %s: %w", s.Location(policy.ManifestKey(key)), err)
	}
	if r.Key != key || r.SHA256 == "" {
		return Result{}, fmt.Errorf("manifest %s: not the manifest of %s (key %q, sha256 %q)", s.Location(policy.ManifestKey(key)), key, r.Key, r.SHA256)
	}
	return r, nil
}

// Delete removes the backup at key: its manifest first, then the snapshot, so that a manifest
// never names a missing snapshot. Missing objects are not an error.
func Delete(ctx context.Context, s Store, key string) error {
	if err := s.Delete(ctx, policy.ManifestKey(key)); err != nil {
		return err
	}
	return s.Delete(ctx, key)
}

// isNotExist reports whether err says a file does not exist.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
