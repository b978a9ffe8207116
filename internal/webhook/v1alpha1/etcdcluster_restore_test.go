package v1alpha1

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
)

func TestValidateRestore(t *testing.T) {
	restoring := func(version string) *etcdv1alpha1.EtcdCluster {
		return &etcdv1alpha1.EtcdCluster{Spec: etcdv1alpha1.EtcdClusterSpec{Version: version, Bootstrap: &etcdv1alpha1.BootstrapSpec{
			Restore: &etcdv1alpha1.RestoreSpec{BackupRef: &corev1.LocalObjectReference{Name: "nightly"}}}}}
	}
	backup := func(phase etcdv1alpha1.BackupPhase, v string) *etcdv1alpha1.EtcdBackup {
		return &etcdv1alpha1.EtcdBackup{Status: etcdv1alpha1.EtcdBackupStatus{Phase: phase, EtcdVersion: v, Message: "access denied by the S3 server"}}
	}
	for _, tc := range []struct {
		name           string
		c              *etcdv1alpha1.EtcdCluster
		b              *etcdv1alpha1.EtcdBackup
		wantErr, wantW string
	}{
		{"no restore", &etcdv1alpha1.EtcdCluster{}, nil, "", ""},
		{"backup missing", restoring("3.6.16"), nil, "", "does not exist yet"},
		{"backup running", restoring("3.6.16"), backup(etcdv1alpha1.BackupRunning, ""), "", "has not succeeded yet"},
		{"backup failed", restoring("3.6.16"), backup(etcdv1alpha1.BackupFailed, ""), "EtcdBackup nightly failed (access denied by the S3 server)", ""},
		{"same version", restoring("3.6.16"), backup(etcdv1alpha1.BackupSucceeded, "3.6.16"), "", ""},
		{"next minor", restoring("3.6.16"), backup(etcdv1alpha1.BackupSucceeded, "3.5.35"), "", ""},
		{"older minor", restoring("3.5.35"), backup(etcdv1alpha1.BackupSucceeded, "3.6.16"), "cannot be restored by 3.5.35", ""},
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
