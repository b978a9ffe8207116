package datadir

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
)

// runMember runs a single-member etcd cluster on host (loopback) in dir, puts n keys of 1 KiB, stops
// it, and returns its member ID and cluster ID. Small WAL segments make etcd cut several WAL files.
func runMember(t *testing.T, dir, host, token string, n int) (memberID, clusterID uint64) {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "m", dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true
	cfg.SnapshotCount, cfg.SnapshotCatchUpEntries = 50, 10
	cfg.InitialClusterToken = token
	peer, _ := url.Parse("http://" + host + ":2380")
	cli, _ := url.Parse("http://" + host + ":2379")
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cli}, []url.URL{*cli}
	cfg.InitialCluster = "m=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready within 30s")
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{cli.String()}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		if _, err := c.Put(ctx, fmt.Sprintf("k%04d", i), strings.Repeat("v", 1024)); err != nil {
			t.Fatal(err)
		}
	}
	return uint64(e.Server.MemberID()), uint64(e.Server.Cluster().ID())
}

// TestIdentity: a data directory names the member and cluster that wrote it, also after etcd purged its
// first WAL files; an empty directory has no identity; Verify accepts the owner only, and says what a
// directory holds otherwise; a directory it cannot read is not called someone else's.
func TestIdentity(t *testing.T) {
	saved := wal.SegmentSizeBytes
	wal.SegmentSizeBytes = 64 * 1024
	t.Cleanup(func() { wal.SegmentSizeBytes = saved })

	a, b := t.TempDir(), t.TempDir()
	memberA, clusterA := runMember(t, a, "127.0.0.191", "cluster-a", 400)
	memberB, clusterB := runMember(t, b, "127.0.0.192", "cluster-b", 10)
	files, err := filepath.Glob(filepath.Join(a, "member", "wal", "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("WAL files %v: want several, to purge the first ones", files)
	}
	// etcd purges WAL files older than its snapshots (keeping --max-wals) every 30 s: do what it does
	for _, f := range files[:len(files)-2] {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}

	if m, c, err := Identity(a); err != nil || m != memberA || c != clusterA {
		t.Errorf("Identity(a) = %x, %x, %v; want %x, %x", m, c, err, memberA, clusterA)
	}
	if err := Verify(a, memberA, clusterA); err != nil {
		t.Errorf("Verify(a) as its own member: %v", err)
	}
	if err := Verify(b, memberA, clusterA); !errors.Is(err, ErrNotOwn) || !strings.Contains(err.Error(), fmt.Sprintf("member %016x of cluster %016x", memberB, clusterB)) {
		t.Errorf("Verify(b) as a's member = %v; want ErrNotOwn naming b's member and cluster", err)
	}
	empty := t.TempDir()
	if _, _, err := Identity(empty); !errors.Is(err, ErrEmpty) {
		t.Errorf("Identity(empty) = %v, want ErrEmpty", err)
	}
	if err := Verify(empty, memberA, clusterA); !errors.Is(err, ErrNotOwn) || !strings.Contains(err.Error(), "its data is gone") {
		t.Errorf("Verify(empty) = %v; want ErrNotOwn saying the data is gone", err)
	}
	// a directory that cannot be read is no proof that the data is gone
	unreadable := t.TempDir()
	if err := os.MkdirAll(filepath.Join(unreadable, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(unreadable, "member", "wal"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Verify(unreadable, memberA, clusterA); err == nil || errors.Is(err, ErrNotOwn) {
		t.Errorf("Verify(unreadable) = %v; want an error that is not ErrNotOwn", err)
	}
}
