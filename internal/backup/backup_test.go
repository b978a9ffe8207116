package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcdkit/etcd-operator/internal/backup/policy"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// Loopback addresses of this package's etcd members (each member listens on <host>:2379/2380).
// Other packages' tests use other 127.0.0.x addresses with the same ports, so two test runs on one
// machine collide: `make test` takes a lock for that.
var (
	sourceHosts   = []string{"127.0.0.101", "127.0.0.102", "127.0.0.103"}
	restoredHosts = []string{"127.0.0.111", "127.0.0.112", "127.0.0.113"}
	corruptHost   = "127.0.0.104"
	failuresHost  = "127.0.0.105"
	benchHost     = "127.0.0.141"
)

const testKeys = 500 // written by fill; every 50th is then deleted

// cluster is an embedded etcd cluster and a client on all its members.
type cluster struct {
	members   []*testenv.EtcdMember
	endpoints []string
	cli       *clientv3.Client
}

func startCluster(t testing.TB, prefix string, hosts []string) *cluster {
	t.Helper()
	var names []string
	for i := range hosts {
		names = append(names, fmt.Sprintf("%s-%d", prefix, i))
	}
	c := &cluster{members: testenv.StartEtcd(t, names, hosts)}
	for _, m := range c.members {
		c.endpoints = append(c.endpoints, m.ClientURL())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	c.cli = cli
	return c
}

// fill writes testKeys keys k/0000... and deletes every 50th; it returns the revision after that
// and the number of live keys.
func (c *cluster) fill(t testing.TB) (rev int64, live int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < testKeys; i++ {
		if _, err := c.cli.Put(ctx, fmt.Sprintf("k/%04d", i), strings.Repeat(fmt.Sprint(i), 20)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < testKeys; i += 50 {
		if _, err := c.cli.Delete(ctx, fmt.Sprintf("k/%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := c.cli.Get(ctx, "k/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision, int(resp.Count)
}

// clusterID asks the cluster for its ID.
func clusterID(t testing.TB, cli *clientv3.Client) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.ClusterId
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkResult checks a backup's result against the cluster and what the store holds.
func checkResult(t *testing.T, s Store, res Result, key string, rev int64, live int, storageVersion, leaderEndpoint string) {
	t.Helper()
	if res.Key != key || res.Location != s.Location(key) {
		t.Errorf("key %q at %q, want %q at %q", res.Key, res.Location, key, s.Location(key))
	}
	if res.Revision != rev || res.TotalKeys != live {
		t.Errorf("revision %d with %d keys, want %d with %d", res.Revision, res.TotalKeys, rev, live)
	}
	if res.EtcdVersion != "3.6.16" || res.StorageVersion != storageVersion || res.Hash == 0 {
		t.Errorf("etcd version %q, storage version %q, hash %d: want 3.6.16, %q, set", res.EtcdVersion, res.StorageVersion, res.Hash, storageVersion)
	}
	if res.Role != RoleFollower || res.Endpoint == leaderEndpoint || res.Member == "" {
		t.Errorf("taken from %s (%s, member %s); want a follower, the leader is %s", res.Endpoint, res.Role, res.Member, leaderEndpoint)
	}
	if res.StartTime.IsZero() || res.CompletionTime.Before(res.StartTime) {
		t.Errorf("times %s .. %s", res.StartTime, res.CompletionTime)
	}
	data := readAll(t, s, key)
	if int64(len(data)) != res.SizeBytes || sha256Hex(data) != res.SHA256 {
		t.Errorf("stored object: %d bytes, sha256 %s; result says %d bytes, %s", len(data), sha256Hex(data), res.SizeBytes, res.SHA256)
	}
	f := filepath.Join(t.TempDir(), "downloaded.db")
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := Verify(f)
	if err != nil {
		t.Fatalf("the stored snapshot does not verify: %v", err)
	}
	if st.Revision != rev || st.TotalKeys != live || st.Hash != res.Hash || st.StorageVersion != res.StorageVersion {
		t.Errorf("stored snapshot status %+v, result %+v", st, res)
	}
	m, err := ReadManifest(context.Background(), s, key)
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if m.SHA256 != res.SHA256 || m.Revision != res.Revision || !m.CompletionTime.Equal(res.CompletionTime) || m.Location != res.Location {
		t.Errorf("manifest %+v, result %+v", m, res)
	}
}

// waitStorageVersion waits until every member reports want as its recorded storage version. etcd 3.6
// records the storage version asynchronously, following the cluster version (a new cluster may record
// 3.5.0 first, then 3.6.0), so a snapshot taken too early holds an older one.
func (c *cluster) waitStorageVersion(t testing.TB, want string) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, "every member reports storage version "+want, func(ctx context.Context) error {
		for _, ep := range c.endpoints {
			st, err := c.cli.Status(ctx, ep)
			if err != nil {
				return err
			}
			if st.StorageVersion != want {
				return fmt.Errorf("member %s reports storage version %q", ep, st.StorageVersion)
			}
		}
		return nil
	})
}

// leaderEndpoint returns the client URL of the cluster's leader.
func (c *cluster) leaderEndpoint(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ep := range c.endpoints {
		st, err := c.cli.Status(ctx, ep)
		if err != nil {
			t.Fatal(err)
		}
		if st.Leader == st.Header.MemberId {
			return ep
		}
	}
	t.Fatal("no leader")
	return ""
}

func TestBackupAndRestore(t *testing.T) {
	src := startCluster(t, "src", sourceHosts)
	rev, live := src.fill(t)
	if live != testKeys-testKeys/50 {
		t.Fatalf("%d live keys", live)
	}
	leader := src.leaderEndpoint(t)
	srcID := clusterID(t, src.cli)
	const storageVersion = "3.6.0" // what etcd 3.6.16 records
	src.waitStorageVersion(t, storageVersion)
	srv := testenv.StartS3(t)
	s3store := newS3Store(t, srv, "etcd")
	dirstore, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	staging := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	key, err := policy.Key("apps", "demo", "nightly-1")
	if err != nil || key != "apps/demo/nightly-1.db" {
		t.Fatalf("key %q, %v", key, err)
	}
	var s3res Result

	t.Run("to S3", func(t *testing.T) {
		res, err := Take(ctx, TakeOptions{Etcd: etcd.Config{Endpoints: src.endpoints}, Store: s3store, Key: key, TempDir: staging})
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, s3store, res, key, rev, live, storageVersion, leader)
		if res.Location != "s3://backups/etcd/apps/demo/nightly-1.db" {
			t.Errorf("location %s", res.Location)
		}
		if got, err := s3store.SHA256Metadata(ctx, key); err != nil || got != res.SHA256 {
			t.Errorf("sha256 metadata %q (%v), want %s", got, err, res.SHA256)
		}
		if _, err := srv.Client.StatObject(ctx, srv.Bucket, "etcd/apps/demo/nightly-1.db.json", minio.StatObjectOptions{}); err != nil {
			t.Errorf("manifest object: %v", err)
		}
		s3res = res
	})

	t.Run("to a directory", func(t *testing.T) {
		res, err := Take(ctx, TakeOptions{Etcd: etcd.Config{Endpoints: src.endpoints}, Store: dirstore, Key: key, TempDir: staging})
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, dirstore, res, key, rev, live, storageVersion, leader)
		for _, f := range []string{"apps/demo/nightly-1.db", "apps/demo/nightly-1.db.json"} {
			if _, err := os.Stat(filepath.Join(dirstore.root, f)); err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("again is a no-op", func(t *testing.T) {
		if _, err := src.cli.Put(ctx, "k/after", "x"); err != nil {
			t.Fatal(err)
		}
		res, err := Take(ctx, TakeOptions{Etcd: etcd.Config{Endpoints: src.endpoints}, Store: s3store, Key: key, TempDir: staging})
		if err != nil {
			t.Fatal(err)
		}
		if res.SHA256 != s3res.SHA256 || res.Revision != rev || !res.StartTime.Equal(s3res.StartTime) {
			t.Errorf("second Take: %+v, want the first one's result %+v", res, s3res)
		}
	})

	if entries, err := os.ReadDir(staging); err != nil || len(entries) != 0 {
		t.Errorf("staging directory not cleaned up: %v %v", entries, err)
	}

	t.Run("restore a new cluster", func(t *testing.T) {
		token := "restored-" + t.Name()
		var initial []string
		for i, h := range restoredHosts {
			initial = append(initial, fmt.Sprintf("r-%d=http://%s:2380", i, h))
		}
		dirs := make([]string, len(restoredHosts))
		cfgs := make([]RestoreConfig, len(restoredHosts))
		for i, h := range restoredHosts {
			dirs[i] = filepath.Join(t.TempDir(), "data")
			cfgs[i] = RestoreConfig{
				DataDir: dirs[i], Name: fmt.Sprintf("r-%d", i), InitialCluster: strings.Join(initial, ","),
				InitialClusterToken: token, PeerURLs: []string{"http://" + h + ":2380"},
			}
		}
		// A leftover of a killed restore, or a volume's lost+found, does not get in the way.
		if err := os.MkdirAll(filepath.Join(dirs[0], stagingName, "data", "member"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dirs[1], "lost+found"), 0o700); err != nil {
			t.Fatal(err)
		}
		// Every member restores the same snapshot, concurrently, as init containers would.
		var wg sync.WaitGroup
		errs := make([]error, len(cfgs))
		for i := range cfgs {
			wg.Go(func() {
				var restored bool
				restored, errs[i] = Restore(ctx, s3store, key, "", cfgs[i])
				if errs[i] == nil && !restored {
					errs[i] = errors.New("Restore says it did nothing")
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, stagingName)); !os.IsNotExist(err) {
				t.Errorf("staging directory left in %s: %v", d, err)
			}
		}

		// Restoring again is a no-op, also once etcd runs on the directory.
		members := make([]*embed.Etcd, len(cfgs))
		for i := range cfgs {
			members[i] = startRestored(t, cfgs[i])
		}
		waitReady(t, members)
		if restored, err := Restore(ctx, s3store, key, "", cfgs[1]); err != nil || restored {
			t.Errorf("second restore: restored=%v, %v; want a no-op", restored, err)
		}
		other := cfgs[1]
		other.InitialClusterToken = "another"
		if _, err := Restore(ctx, s3store, key, "", other); !errors.Is(err, ErrDataDirNotEmpty) {
			t.Errorf("restore with another token over a restored dir: %v, want ErrDataDirNotEmpty", err)
		}

		var eps []string
		for _, h := range restoredHosts {
			eps = append(eps, "http://"+h+":2379")
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		resp, err := cli.Get(ctx, "k/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != live {
			t.Errorf("restored cluster has %d keys, want %d", len(resp.Kvs), live)
		}
		for _, kv := range resp.Kvs {
			var i int
			if _, err := fmt.Sscanf(string(kv.Key), "k/%d", &i); err != nil {
				t.Fatalf("restored key %s: %v", kv.Key, err)
			}
			if want := strings.Repeat(fmt.Sprint(i), 20); string(kv.Value) != want || i%50 == 0 {
				t.Fatalf("restored %s=%q, want %q (and no multiple of 50)", kv.Key, kv.Value, want)
			}
		}
		if resp.Header.Revision < rev {
			t.Errorf("restored revision %d, want at least %d", resp.Header.Revision, rev)
		}
		if id := clusterID(t, cli); id == srcID || id == 0 {
			t.Errorf("restored cluster ID %x, source's %x: want a new one", id, srcID)
		}
		ml, err := cli.MemberList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ml.Members) != 3 {
			t.Errorf("restored cluster has %d members, want 3", len(ml.Members))
		}
		if _, err := cli.Put(ctx, "k/new", "written after restore"); err != nil {
			t.Errorf("write to the restored cluster: %v", err)
		}
	})

	t.Run("restore refuses a data dir with other data", func(t *testing.T) {
		d := t.TempDir()
		if err := os.MkdirAll(filepath.Join(d, "member", "wal"), 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := Restore(ctx, dirstore, key, "", RestoreConfig{DataDir: d, Name: "x", InitialCluster: "x=http://127.0.0.1:2380",
			InitialClusterToken: "t", PeerURLs: []string{"http://127.0.0.1:2380"}})
		if !errors.Is(err, ErrDataDirNotEmpty) {
			t.Errorf("restore into a data dir with a WAL: %v, want ErrDataDirNotEmpty", err)
		}
	})
}

// startRestored starts an embedded member on a restored data directory.
func startRestored(t testing.TB, rc RestoreConfig) *embed.Etcd {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = rc.Name
	cfg.Dir = rc.DataDir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.TickMs, cfg.ElectionMs = 25, 500
	cfg.UnsafeNoFsync = true
	cfg.InitialClusterToken = rc.InitialClusterToken
	cfg.InitialCluster = rc.InitialCluster
	cfg.ClusterState = embed.ClusterStateFlagNew
	peer, _ := url.Parse(rc.PeerURLs[0])
	cli, _ := url.Parse("http://" + peer.Hostname() + ":2379")
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cli}, []url.URL{*cli}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd on restored %s: %v", rc.DataDir, err)
	}
	t.Cleanup(e.Close)
	return e
}

func waitReady(t testing.TB, members []*embed.Etcd) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for _, e := range members {
		select {
		case <-e.Server.ReadyNotify():
		case err := <-e.Err():
			t.Fatalf("restored member failed: %v", err)
		case <-deadline:
			t.Fatal("restored members not ready within 30s")
		}
	}
}

// saveFrom streams a snapshot from one endpoint into a new file.
func saveFrom(t testing.TB, endpoint string) Snapshot {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap, err := Save(ctx, cli, filepath.Join(t.TempDir(), "snap.db"))
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// withTrailer returns db followed by its sha256, as etcd's snapshots are.
func withTrailer(db []byte) []byte {
	s := sha256.Sum256(db)
	return append(append([]byte{}, db...), s[:]...)
}

func TestCorruptSnapshotsAreRejected(t *testing.T) {
	src := startCluster(t, "corrupt", []string{corruptHost})
	rev, live := src.fill(t)
	snap := saveFrom(t, src.endpoints[0])
	if snap.Status.Revision != rev || snap.Status.TotalKeys != live {
		t.Fatalf("status %+v, want revision %d and %d keys", snap.Status, rev, live)
	}
	good, err := os.ReadFile(snap.Path)
	if err != nil {
		t.Fatal(err)
	}
	if sha256Hex(good) != snap.SHA256 || int64(len(good)) != snap.SizeBytes {
		t.Fatalf("Save says %d bytes %s, the file has %d bytes %s", snap.SizeBytes, snap.SHA256, len(good), sha256Hex(good))
	}
	if st, err := Verify(snap.Path); err != nil || st != snap.Status {
		t.Fatalf("Verify of a good snapshot: %+v, %v; Save said %+v", st, err, snap.Status)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := bytes.Clone(good)
	for i := len(flipped) / 2; i < len(flipped)/2+16; i++ {
		flipped[i] ^= 0xff
	}
	db := good[:len(good)-sha256.Size]
	noMeta := bytes.Clone(db)
	clear(noMeta[:8192]) // both bbolt meta pages
	garbage := bytes.Repeat([]byte("not a database! "), len(db)/16)

	cases := map[string][]byte{
		"bytes flipped":                 flipped,
		"truncated":                     good[:len(good)-1000],
		"no trailer":                    db,
		"meta pages zeroed, new sha256": withTrailer(noMeta),
		"not a database, with sha256":   withTrailer(garbage),
		"empty":                         {},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			p := write(strings.ReplaceAll(name, " ", "-")+".db", b)
			if _, err := Verify(p); !errors.Is(err, ErrCorruptSnapshot) {
				t.Errorf("Verify: %v, want ErrCorruptSnapshot", err)
			}
		})
	}

	t.Run("etcdutl restore refuses flipped bytes", func(t *testing.T) {
		p := write("flipped-restore.db", flipped)
		_, err := RestoreDataDir(RestoreConfig{SnapshotPath: p, SnapshotSHA256: sha256Hex(flipped), DataDir: filepath.Join(t.TempDir(), "d"),
			Name: "a", InitialCluster: "a=http://127.0.0.1:2380", InitialClusterToken: "t", PeerURLs: []string{"http://127.0.0.1:2380"}})
		if !errors.Is(err, ErrCorruptSnapshot) {
			t.Errorf("RestoreDataDir: %v, want ErrCorruptSnapshot", err)
		}
	})

	t.Run("Fetch checks the sha256", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ds, err := NewDirStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		srv := testenv.StartS3(t)
		s3 := newS3Store(t, srv, "")
		for name, s := range map[string]Store{"dir": ds, "s3": s3} {
			key := "ns/c/" + name + ".db"
			if _, err := s.Put(ctx, key, bytes.NewReader(good), int64(len(good)), PutOptions{SHA256: snap.SHA256}); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "fetched.db")
			if got, err := Fetch(ctx, s, key, strings.ToUpper(snap.SHA256), dst); err != nil || got != snap.SHA256 {
				t.Fatalf("%s: Fetch of a good snapshot: %s, %v", name, got, err)
			}
			if b, _ := os.ReadFile(dst); !bytes.Equal(b, good) {
				t.Fatalf("%s: fetched file differs", name)
			}
			// No manifest and no sha256: refused.
			if _, err := Fetch(ctx, s, key, "", filepath.Join(t.TempDir(), "x.db")); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: Fetch without a sha256 or manifest: %v, want ErrNotFound", name, err)
			}
			// The stored object is damaged.
			if _, err := s.Put(ctx, key, bytes.NewReader(flipped), int64(len(flipped)), PutOptions{SHA256: snap.SHA256}); err != nil {
				t.Fatal(err)
			}
			dst2 := filepath.Join(t.TempDir(), "fetched.db")
			if _, err := Fetch(ctx, s, key, snap.SHA256, dst2); !errors.Is(err, ErrChecksumMismatch) {
				t.Errorf("%s: Fetch of a damaged object: %v, want ErrChecksumMismatch", name, err)
			}
			if entries, _ := os.ReadDir(filepath.Dir(dst2)); len(entries) != 0 {
				t.Errorf("%s: a rejected fetch left %v", name, entries)
			}
			if _, err := Fetch(ctx, s, key, "abc", dst2); err == nil {
				t.Errorf("%s: Fetch accepted a malformed sha256", name)
			}
		}
	})
}

// refusingStore fails Put for keys with a suffix: a destination that breaks half-way through a
// backup (here: after the snapshot, at the manifest).
type refusingStore struct {
	Store
	suffix string
}

func (r refusingStore) Put(ctx context.Context, key string, rd io.Reader, size int64, o PutOptions) (string, error) {
	if strings.HasSuffix(key, r.suffix) {
		return "", fmt.Errorf("put %s: %w: refused for the test", key, ErrAccessDenied)
	}
	return r.Store.Put(ctx, key, rd, size, o)
}

func TestTakeFailures(t *testing.T) {
	src := startCluster(t, "fail", []string{failuresHost})
	src.fill(t)
	srv := testenv.StartS3(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	staging := t.TempDir()
	noObjects := func(t *testing.T) {
		t.Helper()
		for o := range srv.Client.ListObjects(ctx, srv.Bucket, minio.ListObjectsOptions{Recursive: true}) {
			t.Errorf("object left behind: %s (%v)", o.Key, o.Err)
		}
		if entries, _ := os.ReadDir(staging); len(entries) != 0 {
			t.Errorf("staging files left behind: %v", entries)
		}
	}

	t.Run("wrong S3 credentials", func(t *testing.T) {
		bad, err := NewS3Store(S3Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket, Region: srv.Region, ForcePathStyle: true,
			AccessKeyID: srv.AccessKeyID, SecretAccessKey: "wrong"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Take(ctx, TakeOptions{Etcd: etcd.Config{Endpoints: src.endpoints}, Store: bad, Key: "ns/c/b.db", TempDir: staging})
		if !errors.Is(err, ErrAccessDenied) || !strings.Contains(err.Error(), "s3://backups/ns/c/b.db") {
			t.Errorf("Take with a wrong secret: %v, want ErrAccessDenied naming the location", err)
		}
		noObjects(t)
	})

	t.Run("manifest refused after the upload", func(t *testing.T) {
		s := refusingStore{Store: newS3Store(t, srv, ""), suffix: policy.ManifestSuffix}
		_, err := Take(ctx, TakeOptions{Etcd: etcd.Config{Endpoints: src.endpoints}, Store: s, Key: "ns/c/b.db", TempDir: staging})
		if !errors.Is(err, ErrAccessDenied) {
			t.Errorf("Take: %v, want ErrAccessDenied", err)
		}
		noObjects(t)
	})

	t.Run("the only member is the leader", func(t *testing.T) {
		s := newS3Store(t, srv, "")
		res, err := Take(ctx, TakeOptions{Etcd: etcd.Config{Endpoints: src.endpoints}, Store: s, Key: "ns/c/leader.db", TempDir: staging})
		if err != nil {
			t.Fatal(err)
		}
		if res.Role != RoleLeader || res.Endpoint != src.endpoints[0] {
			t.Errorf("taken from %s (%s), want the leader %s", res.Endpoint, res.Role, src.endpoints[0])
		}
		if err := Delete(ctx, s, res.Key); err != nil {
			t.Fatal(err)
		}
		noObjects(t)
	})

	t.Run("no member answers", func(t *testing.T) {
		s := newS3Store(t, srv, "")
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := Take(short, TakeOptions{Etcd: etcd.Config{Endpoints: []string{"http://127.0.0.1:1", "http://127.0.0.1:2"}},
			Store: s, Key: "ns/c/none.db", TempDir: staging})
		if !errors.Is(err, ErrNoHealthyMember) || !strings.Contains(err.Error(), "127.0.0.1:2") {
			t.Errorf("Take with no member: %v, want ErrNoHealthyMember naming each endpoint", err)
		}
		noObjects(t)
	})
}
