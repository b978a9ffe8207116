package v1beta1

import (
	"strings"
	"testing"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

func TestValidateRestore(t *testing.T) {
	restoring := func(version string) *etcdv1beta1.EtcdCluster {
		return &etcdv1beta1.EtcdCluster{Spec: etcdv1beta1.EtcdClusterSpec{Version: version, Bootstrap: &etcdv1beta1.BootstrapSpec{
			Restore: &etcdv1beta1.RestoreSpec{BackupRef: &etcdv1beta1.LocalObjectReference{Name: "nightly"}}}}}
	}
	backup := func(phase etcdv1beta1.BackupPhase, v string) *etcdv1beta1.EtcdBackup {
		return &etcdv1beta1.EtcdBackup{Status: etcdv1beta1.EtcdBackupStatus{Phase: phase, EtcdVersion: v, Message: "access denied by the S3 server"}}
	}
	for _, tc := range []struct {
		name           string
		c              *etcdv1beta1.EtcdCluster
		b              *etcdv1beta1.EtcdBackup
		wantErr, wantW string
	}{
		{"no restore", &etcdv1beta1.EtcdCluster{}, nil, "", ""},
		{"backup missing", restoring("3.6.16"), nil, "", "does not exist yet"},
		{"backup running", restoring("3.6.16"), backup(etcdv1beta1.BackupRunning, ""), "", "has not succeeded yet"},
		{"backup failed", restoring("3.6.16"), backup(etcdv1beta1.BackupFailed, ""), "EtcdBackup nightly failed (access denied by the S3 server)", ""},
		{"same version", restoring("3.6.16"), backup(etcdv1beta1.BackupSucceeded, "3.6.16"), "", ""},
		{"next minor", restoring("3.6.16"), backup(etcdv1beta1.BackupSucceeded, "3.5.35"), "", ""},
		{"older minor", restoring("3.5.35"), backup(etcdv1beta1.BackupSucceeded, "3.6.16"), "cannot be restored by 3.5.35", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs, warns := ValidateRestore(tc.c, tc.b)
			if got := errs.ToAggregate(); (got != nil) != (tc.wantErr != "") || (got != nil && !strings.Contains(got.Error(), tc.wantErr)) {
				t.Errorf("errors %v, want %q", got, tc.wantErr)
			}
			if w := strings.Join(warns, "; "); (w != "") != (tc.wantW != "") || !strings.Contains(w, tc.wantW) {
				t.Errorf("warnings %q, want %q", w, tc.wantW)
			}
		})
	}
}

// restoreKey bootstraps the cluster from the snapshot at key on a PVC.
func restoreKey(key string) testutil.ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{Restore: &etcdv1beta1.RestoreSpec{Source: &etcdv1beta1.RestoreSource{
			Destination: etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups"}}, Key: key}}}
	}
}

// TestValidateRestoreSourceKey: a snapshot key that would look outside the destination, or name
// nothing, is refused at admission instead of leaving the new cluster waiting for a snapshot it cannot
// read.
func TestValidateRestoreSourceKey(t *testing.T) {
	relative := `must be a relative path such as "apps/demo/nightly-1.db", as an EtcdBackup's status.key reports it: no leading or trailing '/', no empty, '.' or '..' segment (the snapshot is looked up inside the destination, never outside it)`
	control := "must not contain control characters such as a newline or tab"
	for _, tc := range []struct {
		key  string
		errs []problem
	}{
		{"apps/demo/nightly-1.db", nil},
		{"nightly.db", nil},
		{"a..b/c..db", nil},
		{"../../etc/passwd", []problem{{"spec.bootstrap.restore.source.key", relative}}},
		{"apps/../demo/b.db", []problem{{"spec.bootstrap.restore.source.key", relative}}},
		{"apps/demo/..", []problem{{"spec.bootstrap.restore.source.key", relative}}},
		{"/apps/demo/b.db", []problem{{"spec.bootstrap.restore.source.key", relative}}},
		{"apps/demo/", []problem{{"spec.bootstrap.restore.source.key", relative}}},
		{"apps//b.db", []problem{{"spec.bootstrap.restore.source.key", relative}}},
		{"./apps/b.db", []problem{{"spec.bootstrap.restore.source.key", relative}}},
		{"apps/b.db\n", []problem{{"spec.bootstrap.restore.source.key", control}}},
		{"apps/\tb.db", []problem{{"spec.bootstrap.restore.source.key", control}}},
		{"/apps/b.db\x00", []problem{{"spec.bootstrap.restore.source.key", relative}, {"spec.bootstrap.restore.source.key", control}}},
	} {
		t.Run(tc.key, func(t *testing.T) {
			errs, _ := ValidateCreate(cluster(restoreKey(tc.key)))
			checkErrors(t, errs, tc.errs)
		})
	}
}
