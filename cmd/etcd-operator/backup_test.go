package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/etcdkit/etcd-operator/internal/backup"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// Loopback addresses of this package's etcd members (see internal/backup's tests for the others).
const (
	sourceHost   = "127.0.0.131"
	restoredHost = "127.0.0.132"
)

// run executes a subcommand in-process with args and returns its stdout, stderr and error.
func run(t *testing.T, cmd *cobra.Command, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return stdout.String(), stderr.String(), err
}

func writeCredentials(t *testing.T, id, secret string) string {
	t.Helper()
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, accessKeyIDFile), []byte(id+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, secretAccessKeyFile), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestBackupAndRestoreCommands(t *testing.T) {
	members := testenv.StartEtcd(t, []string{"cli-0"}, []string{sourceHost})
	endpoint := members[0].ClientURL()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range 100 {
		if _, err := cli.Put(ctx, fmt.Sprintf("key-%03d", i), "value"); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Get(ctx, "key-", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	srv := testenv.StartS3(t)
	creds := writeCredentials(t, srv.AccessKeyID, srv.SecretAccessKey)
	backupDir := t.TempDir()
	s3flags := []string{"--s3-endpoint", srv.Endpoint, "--s3-bucket", srv.Bucket, "--s3-prefix", "clusters", "--s3-region", srv.Region, "--s3-force-path-style"}

	t.Run("backup to S3", func(t *testing.T) {
		resultFile := filepath.Join(t.TempDir(), "termination-log")
		args := append([]string{"--endpoints", endpoint, "--namespace", "apps", "--cluster", "demo", "--name", "b1",
			"--s3-credentials-dir", creds, "--result-file", resultFile, "--temp-dir", t.TempDir()}, s3flags...)
		stdout, stderr, err := run(t, newBackupCommand(), args...)
		if err != nil {
			t.Fatalf("backup: %v\n%s", err, stderr)
		}
		var res backup.Result
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatalf("stdout is not the result JSON: %v\n%s", err, stdout)
		}
		if res.Key != "apps/demo/b1.db" || res.Location != "s3://backups/clusters/apps/demo/b1.db" || res.Revision != rev || res.TotalKeys != 100 || len(res.SHA256) != 64 {
			t.Errorf("result %+v", res)
		}
		written, err := os.ReadFile(resultFile)
		if err != nil || strings.TrimSpace(string(written)) != strings.TrimSpace(stdout) {
			t.Errorf("result file %q (%v), want what was printed", written, err)
		}
		info, err := srv.Client.StatObject(ctx, srv.Bucket, "clusters/apps/demo/b1.db", minio.StatObjectOptions{})
		if err != nil || info.Size != res.SizeBytes {
			t.Errorf("stored object: %+v, %v", info, err)
		}
		if strings.Contains(stderr, srv.SecretAccessKey) {
			t.Error("the secret access key was logged")
		}
	})

	t.Run("backup with a wrong secret", func(t *testing.T) {
		resultFile := filepath.Join(t.TempDir(), "termination-log")
		wrong := writeCredentials(t, srv.AccessKeyID, "wrong-secret-value")
		args := append([]string{"--endpoints", endpoint, "--namespace", "apps", "--cluster", "demo", "--name", "denied",
			"--s3-credentials-dir", wrong, "--result-file", resultFile}, s3flags...)
		stdout, stderr, err := run(t, newBackupCommand(), args...)
		if err == nil {
			t.Fatalf("backup with a wrong secret succeeded: %s", stdout)
		}
		msg, _ := os.ReadFile(resultFile)
		if !strings.HasPrefix(string(msg), "backup failed: access denied by the storage: check the credentials Secret") ||
			strings.Contains(string(msg), "\n") || err.Error() != string(msg) {
			t.Errorf("termination message %q, error %q: want one line that says to check the credentials", msg, err)
		}
		if strings.Contains(string(msg)+stderr, "wrong-secret-value") {
			t.Error("the secret access key was logged")
		}
		if _, err := srv.Client.StatObject(ctx, srv.Bucket, "clusters/apps/demo/denied.db", minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
			t.Errorf("a failed backup left an object: %v", err)
		}
	})

	t.Run("bad flags", func(t *testing.T) {
		for _, args := range [][]string{
			{"--endpoints", endpoint, "--namespace", "apps", "--cluster", "demo", "--name", "x"},                                    // no destination
			{"--endpoints", endpoint, "--namespace", "apps", "--cluster", "demo", "--name", "x", "--dir", "/d", "--s3-bucket", "b"}, // both
			{"--endpoints", endpoint, "--namespace", "apps", "--cluster", "demo", "--name", "a/b", "--dir", backupDir},              // bad name
			{"--namespace", "apps", "--cluster", "demo", "--name", "x", "--dir", backupDir},                                         // no endpoints
		} {
			resultFile := filepath.Join(t.TempDir(), "termination-log")
			if _, _, err := run(t, newBackupCommand(), append(args, "--result-file", resultFile)...); err == nil {
				t.Errorf("backup %v succeeded", args)
			}
			if msg, _ := os.ReadFile(resultFile); !strings.HasPrefix(string(msg), "backup failed: ") {
				t.Errorf("backup %v: termination message %q", args, msg)
			}
		}
	})

	var sha string
	t.Run("backup to a directory", func(t *testing.T) {
		stdout, stderr, err := run(t, newBackupCommand(), "--endpoints", endpoint, "--namespace", "apps", "--cluster", "demo", "--name", "b2",
			"--dir", backupDir, "--result-file", "")
		if err != nil {
			t.Fatalf("backup: %v\n%s", err, stderr)
		}
		var res backup.Result
		if err := json.Unmarshal([]byte(stdout), &res); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"apps/demo/b2.db", "apps/demo/b2.db.json"} {
			if _, err := os.Stat(filepath.Join(backupDir, f)); err != nil {
				t.Error(err)
			}
		}
		sha = res.SHA256
	})

	dataDir := filepath.Join(t.TempDir(), "data")
	peer := "http://" + restoredHost + ":2380"
	restoreArgs := []string{"--dir", backupDir, "--key", "apps/demo/b2.db", "--data-dir", dataDir, "--name", "restored-0",
		"--initial-cluster", "restored-0=" + peer, "--initial-cluster-token", "new-uid", "--initial-advertise-peer-urls", peer,
		"--bump-revision", "1000"}

	t.Run("restore with a wrong sha256", func(t *testing.T) {
		resultFile := filepath.Join(t.TempDir(), "termination-log")
		_, _, err := run(t, newRestoreCommand(), append(restoreArgs, "--sha256", strings.Repeat("ab", 32), "--result-file", resultFile)...)
		msg, _ := os.ReadFile(resultFile)
		if err == nil || !strings.HasPrefix(string(msg), "restore failed: the stored snapshot is not the one recorded") {
			t.Errorf("restore with a wrong sha256: %v, termination message %q", err, msg)
		}
		if entries, _ := os.ReadDir(dataDir); len(entries) != 0 {
			t.Errorf("a refused restore left %v in the data dir", entries)
		}
	})

	t.Run("restore", func(t *testing.T) {
		resultFile := filepath.Join(t.TempDir(), "termination-log")
		stdout, stderr, err := run(t, newRestoreCommand(), append(restoreArgs, "--result-file", resultFile)...)
		if err != nil {
			t.Fatalf("restore: %v\n%s", err, stderr)
		}
		var out RestoreOutput
		if err := json.Unmarshal([]byte(stdout), &out); err != nil || !out.Restored || out.SHA256 != sha || out.DataDir != dataDir {
			t.Fatalf("restore printed %q (%v), want restored from %s", stdout, err, sha)
		}
		if msg, _ := os.ReadFile(resultFile); strings.TrimSpace(string(msg)) != strings.TrimSpace(stdout) {
			t.Errorf("result file %q", msg)
		}
		// An init container that runs again does nothing.
		stdout, _, err = run(t, newRestoreCommand(), append(restoreArgs, "--sha256", strings.ToUpper(sha), "--result-file", "")...)
		if err != nil || !strings.Contains(stdout, `"restored":false`) {
			t.Errorf("second restore: %q, %v", stdout, err)
		}

		e := startOn(t, "restored-0", restoredHost, dataDir, "restored-0="+peer, "new-uid")
		rcli, err := clientv3.New(clientv3.Config{Endpoints: []string{e}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer rcli.Close()
		got, err := rcli.Get(ctx, "key-", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if got.Count != 100 || got.Header.Revision < rev+1000 {
			t.Errorf("restored member: %d keys at revision %d, want 100 at %d or more (bumped by 1000)", got.Count, got.Header.Revision, rev+1000)
		}
	})
}

// startOn starts an embedded member on an existing data dir and returns its client URL.
func startOn(t *testing.T, name, host, dir, initialCluster, token string) string {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = name, dir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.TickMs, cfg.ElectionMs = 25, 500
	cfg.UnsafeNoFsync = true
	cfg.InitialCluster, cfg.InitialClusterToken = initialCluster, token
	peer, _ := url.Parse("http://" + host + ":2380")
	client, _ := url.Parse("http://" + host + ":2379")
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	testutil.StartEtcd(t, cfg)
	return client.String()
}
