package testenv

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// S3Server is a real S3-compatible server (versitygw over a POSIX directory) running on loopback
// for the duration of a test.
type S3Server struct {
	// Endpoint is the server's URL, http://127.0.0.1:<port>, or https:// for StartS3TLS.
	Endpoint string
	// CACertPEM is the certificate (PEM) of the private CA that issued the server's certificate, for
	// StartS3TLS; empty for plain HTTP.
	CACertPEM []byte
	// Region is the region the server reports ("us-east-1").
	Region string
	// Bucket exists and is empty when StartS3 returns.
	Bucket string
	// AccessKeyID and SecretAccessKey are the root user's credentials.
	AccessKeyID, SecretAccessKey string
	// Dir is the directory the server stores buckets in (one sub-directory per bucket).
	Dir string
	// Client is a client with the root credentials, for checks behind the code under test.
	Client *minio.Client
}

// VersitygwPath returns the versitygw binary the tests run: $VERSITYGW when set (make test sets
// it), else what hack/build-s3.sh --print names.
func VersitygwPath() (string, error) { return toolPath("VERSITYGW", "build-s3.sh") }

// toolPath returns the path in environment variable env when it is set, else what the build script
// hack/<script> --print names.
func toolPath(env, script string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	_, file, _, _ := goruntime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "hack", script)
	out, err := exec.Command("bash", path, "--print").Output()
	if err != nil {
		return "", fmt.Errorf("bash %s --print: %w", path, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// StartS3 starts versitygw with a fresh directory and random root credentials on a free port of
// 127.0.0.1, waits (up to 30 s) until it answers, creates a bucket and returns. The server stops
// when the test ends. The test fails when the binary is missing: `make test` builds it.
func StartS3(t testing.TB) *S3Server {
	t.Helper()
	return startS3(t, false)
}

// StartS3TLS is StartS3 serving HTTPS with a certificate for 127.0.0.1 and localhost issued by a CA
// made for the test (S3Server.CACertPEM), which no system trusts.
func StartS3TLS(t testing.TB) *S3Server {
	t.Helper()
	return startS3(t, true)
}

func startS3(t testing.TB, useTLS bool) *S3Server {
	t.Helper()
	bin, err := VersitygwPath()
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		t.Fatalf("the S3 server for the tests is missing (%v): run the tests with `make test`, which builds it (hack/build-s3.sh)", err)
	}
	s := &S3Server{
		Region:          "us-east-1",
		Bucket:          "backups",
		AccessKeyID:     "root" + randomHex(t, 4),
		SecretAccessKey: randomHex(t, 20),
		Dir:             t.TempDir(),
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	s.Endpoint = "http://" + addr
	opts := &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKeyID, s.SecretAccessKey, ""),
		Region:       s.Region,
		BucketLookup: minio.BucketLookupPath,
		MaxRetries:   1,
	}
	var args []string
	if useTLS {
		args = s.serveTLS(t, addr, opts)
	}
	proc := startVersitygw(t, bin, addr, s, args...)

	s.Client, err = minio.New(addr, opts)
	if err != nil {
		t.Fatalf("S3 client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		err = s.Client.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{Region: s.Region})
		if err == nil {
			return s
		}
		select {
		case <-proc.exited:
			t.Fatalf("versitygw exited: %v\n%s", proc.err, proc.logs())
		case <-ctx.Done():
			t.Fatalf("versitygw on %s did not create bucket %s within 30s: %v\n%s", addr, s.Bucket, errors.Join(err, ctx.Err()), proc.logs())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// serveTLS makes s serve HTTPS on addr with a certificate of a new CA, sets opts to trust only that
// CA, and returns versitygw's flags for it.
func (s *S3Server) serveTLS(t testing.TB, addr string, opts *minio.Options) []string {
	t.Helper()
	s.Endpoint = "https://" + addr
	ca := NewCA(t)
	s.CACertPEM = ca.CertPEM
	certPEM, keyPEM := ca.Issue(t, "127.0.0.1", "localhost")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := errors.Join(os.WriteFile(certFile, certPEM, 0o600), os.WriteFile(keyFile, keyPEM, 0o600)); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	opts.Secure = true
	opts.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return []string{"--cert", certFile, "--key", keyFile}
}

// versitygw is a running versitygw process.
type versitygw struct {
	// exited is closed when the process has exited, err is then what Wait returned.
	exited  chan struct{}
	err     error
	logPath string
}

// logs returns what the process wrote so far.
func (v *versitygw) logs() string {
	b, _ := os.ReadFile(v.logPath)
	return string(b)
}

// startVersitygw starts bin serving s on addr, with args before the backend's, and stops it
// (SIGTERM, SIGKILL after 10 s) when the test ends.
func startVersitygw(t testing.TB, bin, addr string, s *S3Server, args ...string) *versitygw {
	t.Helper()
	v := &versitygw{exited: make(chan struct{}), logPath: filepath.Join(t.TempDir(), "versitygw.log")}
	logFile, err := os.Create(v.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, append(append([]string{"--port", addr, "--region", s.Region, "--quiet"}, args...), "posix", s.Dir)...)
	// Credentials through the environment, not the command line; nothing else is inherited.
	cmd.Env = []string{"ROOT_ACCESS_KEY_ID=" + s.AccessKeyID, "ROOT_SECRET_ACCESS_KEY=" + s.SecretAccessKey, "HOME=" + s.Dir}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		v.err = cmd.Wait()
		close(v.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-v.exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-v.exited
		}
	})
	return v
}

// randomHex returns n random bytes in hex.
func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
