package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdkit/etcd-operator/internal/backup"
	"github.com/etcdkit/etcd-operator/internal/testenv"
)

// tlsSourceHost is the loopback address of TestCommandsOverTLS's etcd member.
const tlsSourceHost = "127.0.0.133"

// TestCommandsOverTLS: against an S3 server whose certificate a private CA issued, a backup without
// --s3-ca-file fails with a message that says the certificate is not trusted and what to do; with the
// CA's file, the backup, a restore from it and its deletion succeed.
func TestCommandsOverTLS(t *testing.T) {
	members := testenv.StartEtcd(t, []string{"tls-0"}, []string{tlsSourceHost})
	endpoint := members[0].ClientURL()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range 10 {
		if _, err := cli.Put(ctx, fmt.Sprintf("key-%d", i), "value"); err != nil {
			t.Fatal(err)
		}
	}
	srv := testenv.StartS3TLS(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, srv.CACertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	dest := []string{"--s3-endpoint", srv.Endpoint, "--s3-bucket", srv.Bucket, "--s3-region", srv.Region, "--s3-force-path-style",
		"--s3-credentials-dir", writeCredentials(t, srv.AccessKeyID, srv.SecretAccessKey)}
	backupArgs := slices.Concat([]string{"--endpoints", endpoint, "--namespace", "apps", "--cluster", "demo", "--name", "tls", "--temp-dir", t.TempDir()}, dest)

	t.Run("backup without the CA", func(t *testing.T) {
		resultFile := filepath.Join(t.TempDir(), "termination-log")
		stdout, _, err := run(t, newBackupCommand(), slices.Concat(backupArgs, []string{"--result-file", resultFile})...)
		if err == nil {
			t.Fatalf("backup to a server of an untrusted CA succeeded: %s", stdout)
		}
		msg, _ := os.ReadFile(resultFile)
		if !strings.HasPrefix(string(msg), "backup failed: the S3 server's certificate is not trusted: ") ||
			!strings.Contains(string(msg), "s3.caSecretRef") || !strings.Contains(string(msg), "x509: certificate signed by unknown authority") {
			t.Errorf("termination message %q: want the untrusted certificate, what to do, and x509's error", msg)
		}
	})

	withCA := slices.Concat(dest, []string{"--s3-ca-file", caFile})
	t.Run("backup, restore and delete with the CA", func(t *testing.T) {
		stdout, stderr, err := run(t, newBackupCommand(), slices.Concat(backupArgs, []string{"--s3-ca-file", caFile, "--result-file", ""})...)
		if err != nil {
			t.Fatalf("backup: %v\n%s", err, stderr)
		}
		var res backup.Result
		if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Key != "apps/demo/tls.db" || res.TotalKeys != 10 {
			t.Fatalf("result %q (%v)", stdout, err)
		}
		if info, err := srv.Client.StatObject(ctx, srv.Bucket, res.Key, minio.StatObjectOptions{}); err != nil || info.Size != res.SizeBytes {
			t.Errorf("stored object: %+v, %v", info, err)
		}

		// The restore reads the manifest for the sha256, then the snapshot, over TLS.
		peer := "http://" + tlsSourceHost + ":2380"
		dataDir := filepath.Join(t.TempDir(), "data")
		stdout, stderr, err = run(t, newRestoreCommand(), slices.Concat(withCA, []string{"--key", res.Key, "--data-dir", dataDir, "--name", "tls-0",
			"--initial-cluster", "tls-0=" + peer, "--initial-cluster-token", "restored", "--initial-advertise-peer-urls", peer, "--result-file", ""})...)
		var out RestoreOutput
		if err != nil || json.Unmarshal([]byte(stdout), &out) != nil || !out.Restored || out.SHA256 != res.SHA256 {
			t.Errorf("restore: %q, %v\n%s", stdout, err, stderr)
		}
		if _, err := os.Stat(filepath.Join(dataDir, "member", "snap", "db")); err != nil {
			t.Errorf("restored data directory: %v", err)
		}

		if _, stderr, err := run(t, newBackupDeleteCommand(), slices.Concat(withCA, []string{"--namespace", "apps", "--cluster", "demo", "--name", "tls", "--result-file", ""})...); err != nil {
			t.Fatalf("delete: %v\n%s", err, stderr)
		}
		if _, err := srv.Client.StatObject(ctx, srv.Bucket, res.Key, minio.StatObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
			t.Errorf("after delete: %v, want NoSuchKey", err)
		}
	})
}
