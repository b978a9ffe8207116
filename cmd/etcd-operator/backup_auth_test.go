package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdkit/etcd-operator/internal/backup"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
)

// authSourceHost is the loopback address of TestBackupCommandWithAuth's etcd member.
const authSourceHost = "127.0.0.121"

// TestBackupCommandWithAuth: against a member with etcd authentication on, `backup --user root` with
// the password in $ETCD_OPERATOR_PASSWORD takes a snapshot (from the cluster, and from one --member);
// without the password, or with a wrong one, it fails saying why, and the password is in no output.
func TestBackupCommandWithAuth(t *testing.T) {
	const password = "backup-root-pw-4711"
	members := testenv.StartEtcd(t, []string{"auth-0"}, []string{authSourceHost})
	endpoint := members[0].ClientURL()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := etcd.New(ctx, etcd.Config{Endpoints: []string{endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if err := cli.EnableAuth(ctx, password); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	args := func(name string, extra ...string) []string {
		return append([]string{"--namespace", "apps", "--cluster", "demo", "--name", name, "--dir", dir, "--temp-dir", t.TempDir(),
			"--result-file", filepath.Join(t.TempDir(), "termination-log")}, extra...)
	}

	t.Run("without a user", func(t *testing.T) {
		if stdout, _, err := run(t, newBackupCommand(), args("anon", "--endpoints", endpoint)...); err == nil {
			t.Fatalf("backup without a user succeeded with authentication on: %s", stdout)
		}
	})
	t.Run("without the password", func(t *testing.T) {
		t.Setenv(resources.BackupPasswordEnv, "")
		_, _, err := run(t, newBackupCommand(), args("nopw", "--endpoints", endpoint, "--user", "root")...)
		if err == nil || !strings.Contains(err.Error(), "--user root needs the password in $"+resources.BackupPasswordEnv) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		t.Setenv(resources.BackupPasswordEnv, "not-the-password-0815")
		stdout, stderr, err := run(t, newBackupCommand(), args("wrong", "--endpoints", endpoint, "--user", "root")...)
		if err == nil {
			t.Fatalf("backup with a wrong password succeeded: %s", stdout)
		}
		if out := stdout + stderr + err.Error(); strings.Contains(out, "not-the-password-0815") {
			t.Errorf("the output holds the password: %s", out)
		}
	})
	for _, tc := range []struct{ name, flag string }{{"cluster", "--endpoints"}, {"member", "--member"}} {
		t.Run("as root from the "+tc.name, func(t *testing.T) {
			t.Setenv(resources.BackupPasswordEnv, password)
			stdout, stderr, err := run(t, newBackupCommand(), args(tc.name, tc.flag, endpoint, "--user", "root")...)
			if err != nil {
				t.Fatalf("backup: %v\n%s", err, stderr)
			}
			var res backup.Result
			if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Key != "apps/demo/"+tc.name+".db" || len(res.SHA256) != 64 {
				t.Errorf("result %+v (%v)", res, err)
			}
			if strings.Contains(stdout+stderr, password) {
				t.Errorf("the output holds the password")
			}
			if fi, err := os.Stat(filepath.Join(dir, "apps", "demo", tc.name+".db")); err != nil || fi.Size() == 0 {
				t.Errorf("snapshot not stored: %v", err)
			}
		})
	}
}
