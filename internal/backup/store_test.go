package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/etcdkit/etcd-operator/internal/testenv"
)

// newS3Store returns a store on srv's bucket with prefix.
func newS3Store(t testing.TB, srv *testenv.S3Server, prefix string) *S3Store {
	t.Helper()
	s, err := NewS3Store(S3Config{
		Endpoint:        srv.Endpoint,
		Bucket:          srv.Bucket,
		Prefix:          prefix,
		Region:          srv.Region,
		ForcePathStyle:  true,
		AccessKeyID:     srv.AccessKeyID,
		SecretAccessKey: srv.SecretAccessKey,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// failingReader yields n bytes of data, then fails.
type failingReader struct {
	n   int64
	err error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, r.err
	}
	if int64(len(p)) > r.n {
		p = p[:r.n]
	}
	for i := range p {
		p[i] = byte(i)
	}
	r.n -= int64(len(p))
	return len(p), nil
}

func readAll(t testing.TB, s Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return b
}

func keys(objs []Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

// testStoreContract checks what every Store promises.
func testStoreContract(t *testing.T, s Store) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	if _, err := s.Get(ctx, "ns/c/missing.db"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of a missing key: got %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"", "/abs", "a/../b", "a//b", "a/", "."} {
		if _, err := s.Put(ctx, bad, strings.NewReader("x"), 1, PutOptions{}); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("put %q: got %v, want ErrInvalidKey", bad, err)
		}
	}

	data := []byte("hello snapshot")
	loc, err := s.Put(ctx, "ns/c/b1.db", bytes.NewReader(data), int64(len(data)), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if loc != s.Location("ns/c/b1.db") {
		t.Errorf("location %q, Location says %q", loc, s.Location("ns/c/b1.db"))
	}
	if got := readAll(t, s, "ns/c/b1.db"); !bytes.Equal(got, data) {
		t.Fatalf("read back %q, want %q", got, data)
	}
	// replace
	data2 := []byte("second version")
	if _, err := s.Put(ctx, "ns/c/b1.db", bytes.NewReader(data2), int64(len(data2)), PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, "ns/c/b1.db"); !bytes.Equal(got, data2) {
		t.Fatalf("read back %q after replace, want %q", got, data2)
	}
	for _, k := range []string{"ns/c/b2.db", "ns/c2/b.db", "other/c/b.db"} {
		if _, err := s.Put(ctx, k, strings.NewReader(k), int64(len(k)), PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// A failing reader leaves nothing at the key, and no stray file that List would show.
	boom := errors.New("reader broke")
	if _, err := s.Put(ctx, "ns/c/broken.db", &failingReader{n: 1000, err: boom}, 5000, PutOptions{}); err == nil {
		t.Fatal("put from a failing reader succeeded")
	}
	// A short reader (fewer bytes than size) fails too.
	if _, err := s.Put(ctx, "ns/c/short.db", strings.NewReader("abc"), 10, PutOptions{}); err == nil {
		t.Fatal("put of 3 bytes announced as 10 succeeded")
	}
	for _, k := range []string{"ns/c/broken.db", "ns/c/short.db"} {
		if _, err := s.Get(ctx, k); !errors.Is(err, ErrNotFound) {
			t.Errorf("after a failed put, get %s: got %v, want ErrNotFound", k, err)
		}
	}

	objs, err := s.List(ctx, "ns/c/")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(keys(objs), ","), "ns/c/b1.db,ns/c/b2.db"; got != want {
		t.Errorf("list ns/c/: %s, want %s", got, want)
	}
	if objs[0].Size != int64(len(data2)) || time.Since(objs[0].LastModified) > time.Hour {
		t.Errorf("list: %+v, want size %d and a recent modification time", objs[0], len(data2))
	}
	objs, err = s.List(ctx, "ns/c")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(keys(objs), ","), "ns/c/b1.db,ns/c/b2.db,ns/c2/b.db"; got != want {
		t.Errorf("list ns/c: %s, want %s", got, want)
	}
	objs, err = s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 4 {
		t.Errorf("list all: %v, want 4 objects", keys(objs))
	}
	if objs, err := s.List(ctx, "nothing/here/"); err != nil || len(objs) != 0 {
		t.Errorf("list of an empty prefix: %v, %v", keys(objs), err)
	}

	if err := s.Delete(ctx, "ns/c/b1.db"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "ns/c/b1.db"); !errors.Is(err, ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "ns/c/b1.db"); err != nil {
		t.Errorf("deleting a missing key: %v", err)
	}
}

func TestDirStore(t *testing.T) {
	dir := t.TempDir()
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	testStoreContract(t, s)
	if got, want := s.Location("a/b.db"), "file://"+filepath.Join(dir, "a", "b.db"); got != want {
		t.Errorf("location %s, want %s", got, want)
	}
	// No temporary file survives a failed put.
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && isTempName(d.Name()) {
			t.Errorf("temporary file left behind: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewDirStore(filepath.Join(dir, "missing")); !errors.Is(err, ErrNotFound) {
		t.Errorf("store on a missing directory: %v, want ErrNotFound", err)
	}
	// A cancelled context stops a put and leaves nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Put(ctx, "x/y.db", strings.NewReader("data"), 4, PutOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("put with a cancelled context: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x", "y.db")); !os.IsNotExist(err) {
		t.Errorf("cancelled put left %v", err)
	}
}

func TestS3Store(t *testing.T) {
	srv := testenv.StartS3(t)
	s := newS3Store(t, srv, "/team/etcd/")
	testStoreContract(t, s)
	if got, want := s.Location("a/b.db"), "s3://backups/team/etcd/a/b.db"; got != want {
		t.Errorf("location %s, want %s", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The prefix is applied on the server side.
	if _, err := srv.Client.StatObject(ctx, srv.Bucket, "team/etcd/ns/c/b2.db", minio.StatObjectOptions{}); err != nil {
		t.Errorf("object not under the prefix: %v", err)
	}

	// A large object goes as a multipart upload and comes back whole, with its sha256 metadata.
	big := make([]byte, 40<<20+12345)
	for i := range big {
		big[i] = byte(i * 7)
	}
	sum := sha256.Sum256(big)
	want := hex.EncodeToString(sum[:])
	f := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(f, big, 0o600); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := s.Put(ctx, "ns/c/big.db", fh, int64(len(big)), PutOptions{SHA256: want}); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, "ns/c/big.db"); !bytes.Equal(got, big) {
		t.Fatalf("multipart object read back differs (%d bytes, want %d)", len(got), len(big))
	}
	info, err := srv.Client.StatObject(ctx, srv.Bucket, "team/etcd/ns/c/big.db", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info.ETag, "-") {
		t.Errorf("ETag %q: want a multipart ETag (<md5>-<parts>)", info.ETag)
	}
	if got, err := s.SHA256Metadata(ctx, "ns/c/big.db"); err != nil || got != want {
		t.Errorf("sha256 metadata %q (%v), want %s", got, err, want)
	}

	// A multipart upload that fails half-way leaves no object and no pending upload.
	if _, err := s.Put(ctx, "ns/c/aborted.db", &failingReader{n: 20 << 20, err: errors.New("disk on fire")}, 48<<20, PutOptions{}); err == nil {
		t.Fatal("put from a reader failing after 20 MiB succeeded")
	}
	if _, err := s.Get(ctx, "ns/c/aborted.db"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after a failed multipart put: %v, want ErrNotFound", err)
	}
	core := minio.Core{Client: srv.Client}
	uploads, err := core.ListMultipartUploads(ctx, srv.Bucket, "team/etcd/", "", "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(uploads.Uploads) != 0 {
		t.Errorf("pending multipart uploads after a failed put: %+v", uploads.Uploads)
	}
}

func TestS3StoreErrors(t *testing.T) {
	srv := testenv.StartS3(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	bad, err := NewS3Store(S3Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket, Region: srv.Region, ForcePathStyle: true,
		AccessKeyID: srv.AccessKeyID, SecretAccessKey: "not-the-secret"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Put(ctx, "ns/c/b.db", strings.NewReader("data"), 4, PutOptions{})
	if !errors.Is(err, ErrAccessDenied) {
		t.Fatalf("put with a wrong secret: %v, want ErrAccessDenied", err)
	}
	if _, err := bad.Get(ctx, "ns/c/b.db"); !errors.Is(err, ErrAccessDenied) {
		t.Errorf("get with a wrong secret: %v, want ErrAccessDenied", err)
	}
	if _, err := srv.Client.StatObject(ctx, srv.Bucket, "ns/c/b.db", minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
		t.Errorf("a refused put left an object: %v", err)
	}

	noBucket := newS3Store(t, srv, "")
	noBucket.bucket = "does-not-exist"
	if _, err := noBucket.Put(ctx, "k.db", strings.NewReader("data"), 4, PutOptions{}); !errors.Is(err, ErrBucketNotFound) {
		t.Errorf("put into a missing bucket: %v, want ErrBucketNotFound", err)
	}

	down, err := NewS3Store(S3Config{Endpoint: "http://127.0.0.1:1", Bucket: "bkt", Region: "us-east-1", ForcePathStyle: true,
		AccessKeyID: "a", SecretAccessKey: "b"})
	if err != nil {
		t.Fatal(err)
	}
	down.client, _ = minio.New("127.0.0.1:1", &minio.Options{Region: "us-east-1", BucketLookup: minio.BucketLookupPath, MaxRetries: 1})
	if _, err := down.Get(ctx, "k.db"); !errors.Is(err, ErrUnreachable) {
		t.Errorf("get from a closed port: %v, want ErrUnreachable", err)
	}

	for _, cfg := range []S3Config{{}, {Bucket: "b", Endpoint: "ftp://x"}, {Bucket: "b", Endpoint: "http://x/path"}, {Bucket: "b", CACertPEM: []byte("junk")}} {
		if _, err := NewS3Store(cfg); err == nil {
			t.Errorf("NewS3Store(%+v) accepted", cfg)
		}
	}
}
