package backup

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	clientsnapshot "go.etcd.io/etcd/client/v3/snapshot"
	etcdutlsnapshot "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	bench.close()
	os.Exit(code)
}

// benchFixture is one etcd member with a database of a few hundred MiB, created once per test
// binary for the benchmarks (EO_BENCH_DB_MIB, default 200, sets the size of the values written).
type benchFixture struct {
	once     sync.Once
	err      error
	dir      string
	etcd     *embed.Etcd
	endpoint string
	dbBytes  int64
	keys     int
	snapshot Snapshot // a snapshot of it, for the restore benchmarks
}

var bench benchFixture

func (f *benchFixture) close() {
	if f.etcd != nil {
		f.etcd.Close()
	}
	if f.dir != "" {
		_ = os.RemoveAll(f.dir)
	}
}

// get returns the fixture, creating it on first use.
func (f *benchFixture) get(b *testing.B) *benchFixture {
	b.Helper()
	f.once.Do(func() { f.err = f.create() })
	if f.err != nil {
		b.Fatal(f.err)
	}
	return f
}

func (f *benchFixture) create() error {
	mib := 200
	if v := os.Getenv("EO_BENCH_DB_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("EO_BENCH_DB_MIB=%q: want a positive number", v)
		}
		mib = n
	}
	var err error
	if f.dir, err = os.MkdirTemp("", "etcd-backup-bench-"); err != nil {
		return err
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "bench", filepath.Join(f.dir, "data")
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true
	cfg.QuotaBackendBytes = 8 << 30
	peer, _ := url.Parse("http://" + benchHost + ":2380")
	cli, _ := url.Parse("http://" + benchHost + ":2379")
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cli}, []url.URL{*cli}
	cfg.InitialCluster = "bench=" + peer.String()
	if f.etcd, err = embed.StartEtcd(cfg); err != nil {
		return err
	}
	select {
	case <-f.etcd.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		return fmt.Errorf("bench member not ready within 30s")
	}
	f.endpoint = cli.String()

	// 4 KiB values, as many as make the requested size, written by 16 clients in parallel.
	const valueSize = 4 << 10
	f.keys = mib << 20 / valueSize
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{f.endpoint}, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	const workers = 16
	for w := range workers {
		g.Go(func() error {
			rng := rand.New(rand.NewChaCha8([32]byte{byte(w)}))
			val := make([]byte, valueSize)
			for i := w; i < f.keys; i += workers {
				for j := range val {
					val[j] = byte(rng.Uint32())
				}
				if _, err := c.Put(gctx, fmt.Sprintf("/registry/bench/%08d", i), string(val)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("fill the bench database: %w", err)
	}
	st, err := c.Status(ctx, f.endpoint)
	if err != nil {
		return err
	}
	f.dbBytes = st.DbSize
	sc, err := clientv3.New(clientv3.Config{Endpoints: []string{f.endpoint}, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer sc.Close()
	f.snapshot, err = Save(ctx, sc, filepath.Join(f.dir, "fixture-snapshot.db"))
	return err
}

// mbps is bytes per duration in MB/s (10^6 bytes).
func mbps(bytes int64, d time.Duration) float64 { return float64(bytes) / 1e6 / d.Seconds() }

// etcdctlSave does what `etcdctl snapshot save` does (it calls this function), then what
// `etcdutl snapshot status` does, and returns the time of each.
func etcdctlSave(b *testing.B, endpoint, path string) (save, status time.Duration) {
	b.Helper()
	start := time.Now()
	if _, err := clientsnapshot.SaveWithVersion(context.Background(), zap.NewNop(),
		clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second}, path); err != nil {
		b.Fatal(err)
	}
	save = time.Since(start)
	start = time.Now()
	if _, err := etcdutlsnapshot.NewV3(zap.NewNop()).Status(path); err != nil {
		b.Fatal(err)
	}
	status = time.Since(start)
	if err := os.Remove(path); err != nil {
		b.Fatal(err)
	}
	return save, status
}

// BenchmarkBackup compares a backup with `etcdctl snapshot save` of the same database (200 MiB of
// values, a ~315 MB snapshot): each iteration runs both, one after the other, so that load from
// elsewhere hits both alike. Metrics: MB/s of each, the time ratio x-etcdctl-save (1: as fast as
// etcdctl snapshot save) and x-etcdctl-save+status (against etcdctl snapshot save followed by
// etcdutl snapshot status, the same verification done by hand). Sub-benchmarks: save-verify is
// Save alone (stream with sha256, etcd's snapshot status), dir and s3 are Take to a directory and
// to versitygw on loopback (Save, then store with fsync or upload, then the manifest).
func BenchmarkBackup(b *testing.B) {
	f := bench.get(b)
	b.Logf("database: %d MiB, %d keys; snapshot %d MiB", f.dbBytes>>20, f.keys, f.snapshot.SizeBytes>>20)
	scratch := b.TempDir()

	run := func(b *testing.B, backupOnce func(i int) int64) {
		var base, status, ours time.Duration
		var size int64
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			sv, st := etcdctlSave(b, f.endpoint, filepath.Join(scratch, "etcdctl.db"))
			base, status = base+sv, status+st
			b.StartTimer()
			start := time.Now()
			size = backupOnce(i)
			ours += time.Since(start)
		}
		b.SetBytes(size)
		b.ReportMetric(mbps(size*int64(b.N), base), "etcdctl-MB/s")
		b.ReportMetric(ours.Seconds()/base.Seconds(), "x-etcdctl-save")
		b.ReportMetric(ours.Seconds()/(base+status).Seconds(), "x-etcdctl-save+status")
	}

	b.Run("save-verify", func(b *testing.B) {
		run(b, func(i int) int64 {
			c, err := clientv3.New(clientv3.Config{Endpoints: []string{f.endpoint}, Logger: zap.NewNop()})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			p := filepath.Join(scratch, "ours.db")
			snap, err := Save(context.Background(), c, p)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			_ = os.Remove(p)
			b.StartTimer()
			return snap.SizeBytes
		})
	})

	take := func(b *testing.B, s Store) {
		staging := b.TempDir()
		run(b, func(i int) int64 {
			key := fmt.Sprintf("bench/backup/b%d.db", i)
			res, err := Take(context.Background(), TakeOptions{Etcd: etcd.Config{Endpoints: []string{f.endpoint}}, Store: s, Key: key, TempDir: staging})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := Delete(context.Background(), s, key); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			return res.SizeBytes
		})
	}
	b.Run("dir", func(b *testing.B) {
		s, err := NewDirStore(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		take(b, s)
	})
	b.Run("s3", func(b *testing.B) {
		take(b, newS3Store(b, testenv.StartS3(b), "etcd"))
	})
}

// BenchmarkRestore restores a member's data directory from the ~315 MB snapshot of that database:
// local-file is RestoreDataDir from a file (etcdutl's restore: copy, verify the embedded sha256,
// rewrite membership, write the WAL), s3 is Restore from versitygw (download with sha256, then the
// same).
func BenchmarkRestore(b *testing.B) {
	f := bench.get(b)
	cfg := func(dir string) RestoreConfig {
		return RestoreConfig{
			DataDir: filepath.Join(dir, "data"), Name: "r-0", InitialCluster: "r-0=http://127.0.0.1:2380",
			InitialClusterToken: "bench", PeerURLs: []string{"http://127.0.0.1:2380"},
		}
	}
	report := func(b *testing.B, total time.Duration) {
		b.SetBytes(f.snapshot.SizeBytes)
		b.ReportMetric(total.Seconds()/float64(b.N), "s/restore")
	}
	b.Run("local-file", func(b *testing.B) {
		var total time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			c := cfg(b.TempDir())
			c.SnapshotPath, c.SnapshotSHA256 = f.snapshot.Path, f.snapshot.SHA256
			b.StartTimer()
			start := time.Now()
			if _, err := RestoreDataDir(c); err != nil {
				b.Fatal(err)
			}
			total += time.Since(start)
			b.StopTimer()
			_ = os.RemoveAll(c.DataDir)
			b.StartTimer()
		}
		report(b, total)
	})
	b.Run("s3", func(b *testing.B) {
		s := newS3Store(b, testenv.StartS3(b), "etcd")
		fh, err := os.Open(f.snapshot.Path)
		if err != nil {
			b.Fatal(err)
		}
		defer fh.Close()
		if _, err := s.Put(context.Background(), "bench/restore.db", fh, f.snapshot.SizeBytes, PutOptions{SHA256: f.snapshot.SHA256}); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		var total time.Duration
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			c := cfg(b.TempDir())
			b.StartTimer()
			start := time.Now()
			if _, err := Restore(context.Background(), s, "bench/restore.db", f.snapshot.SHA256, c); err != nil {
				b.Fatal(err)
			}
			total += time.Since(start)
			b.StopTimer()
			_ = os.RemoveAll(c.DataDir)
			b.StartTimer()
		}
		report(b, total)
	})
}
