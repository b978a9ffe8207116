package v1beta1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

func backupSpec(schedule, tz string, ret *etcdv1beta1.BackupRetention) testutil.ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Backup = &etcdv1beta1.BackupSpec{
			Schedule: schedule, TimeZone: tz, Retention: ret,
			Destination: etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups"}},
		}
	}
}

// TestValidateBackup: schedules, time zones and retention policies that cannot be acted on are refused
// at admission with what to write instead; valid ones pass.
func TestValidateBackup(t *testing.T) {
	count := &etcdv1beta1.BackupRetention{MaxCount: ptr.To[int32](3)}
	for _, tc := range []struct {
		name string
		c    *etcdv1beta1.EtcdCluster
		errs []problem
	}{
		{"hourly cron", cluster(backupSpec("0 * * * *", "", count)), nil},
		{"descriptor", cluster(backupSpec("@daily", "Europe/Berlin", count)), nil},
		{"every", cluster(backupSpec("@every 6h", "", nil)), nil},
		{"max age only", cluster(backupSpec("*/5 * * * *", "UTC", &etcdv1beta1.BackupRetention{MaxAge: &metav1.Duration{Duration: time.Hour}})), nil},
		{"no schedule (manual backups only)", cluster(backupSpec("", "", nil)), nil},
		{"every minute", cluster(backupSpec("@every 1m", "", nil)), nil},
		{"every second", cluster(backupSpec("@every 1s", "", nil)), []problem{{"spec.backup.schedule", "fires more often than once a minute"}}},
		{"every 30 seconds", cluster(backupSpec("@every 30s", "", nil)), []problem{{"spec.backup.schedule", `use an interval of at least 1m, such as "@every 15m"`}}},
		{"six fields", cluster(backupSpec("0 0 * * * *", "", nil)), []problem{{"spec.backup.schedule", "is not a cron expression"}}},
		{"garbage", cluster(backupSpec("every hour", "", nil)), []problem{{"spec.backup.schedule", "minute hour day-of-month month day-of-week"}}},
		{"minute out of range", cluster(backupSpec("61 * * * *", "", nil)), []problem{{"spec.backup.schedule", "is not a cron expression"}}},
		{"time zone in the schedule", cluster(backupSpec("CRON_TZ=Europe/Berlin 0 * * * *", "", nil)), []problem{{"spec.backup.schedule", "set the timeZone field beside it instead"}}},
		{"unknown time zone", cluster(backupSpec("@daily", "Mars/Olympus", nil)), []problem{{"spec.backup.timeZone", "use an IANA name"}}},
		{"empty retention", cluster(backupSpec("@daily", "", &etcdv1beta1.BackupRetention{})), []problem{{"spec.backup.retention", "set maxCount"}}},
		{"negative max age", cluster(backupSpec("@daily", "", &etcdv1beta1.BackupRetention{MaxAge: &metav1.Duration{Duration: -time.Hour}})), []problem{{"spec.backup.retention.maxAge", "must be positive"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs, _ := ValidateCreate(tc.c)
			checkErrors(t, errs, tc.errs)
			// the same spec.backup added to an existing cluster is judged the same way
			old := tc.c.DeepCopy()
			old.Spec.Backup = nil
			errs, _ = ValidateUpdate(old, tc.c)
			checkErrors(t, errs, tc.errs)
		})
	}
}

// TestValidateBackupUnchanged: an update that leaves spec.backup as it is does not check it again, so
// a cluster admitted under older rules can still be changed otherwise.
func TestValidateBackupUnchanged(t *testing.T) {
	old := cluster(backupSpec("every hour", "", nil))
	c := old.DeepCopy()
	c.Spec.Replicas = ptr.To[int32](5)
	if errs, _ := ValidateUpdate(old, c); len(errs) != 0 {
		t.Fatalf("unchanged spec.backup refused: %v", errs)
	}
}

func defragSpec(schedule, tz string) testutil.ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Maintenance = &etcdv1beta1.MaintenanceSpec{Defragmentation: &etcdv1beta1.DefragmentationSpec{Schedule: schedule, TimeZone: tz}}
	}
}

// TestValidateDefragmentationSchedule: spec.maintenance.defragmentation's schedule and time zone are
// held to the same rules as spec.backup's, with errors under their own path; an unchanged one is not
// checked again.
func TestValidateDefragmentationSchedule(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    *etcdv1beta1.EtcdCluster
		errs []problem
	}{
		{"daily", cluster(defragSpec("0 3 * * *", "Europe/Berlin")), nil},
		{"weekly", cluster(defragSpec("@weekly", "")), nil},
		{"every 10 seconds", cluster(defragSpec("@every 10s", "")), []problem{{"spec.maintenance.defragmentation.schedule", "fires more often than once a minute"}}},
		{"garbage", cluster(defragSpec("nightly", "")), []problem{{"spec.maintenance.defragmentation.schedule", "is not a cron expression"}}},
		{"time zone in the schedule", cluster(defragSpec("TZ=UTC 0 3 * * *", "")), []problem{{"spec.maintenance.defragmentation.schedule", "set the timeZone field beside it instead"}}},
		{"unknown time zone", cluster(defragSpec("@daily", "Mars/Olympus")), []problem{{"spec.maintenance.defragmentation.timeZone", "use an IANA name"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs, _ := ValidateCreate(tc.c)
			checkErrors(t, errs, tc.errs)
			old := tc.c.DeepCopy()
			old.Spec.Maintenance = nil
			errs, _ = ValidateUpdate(old, tc.c)
			checkErrors(t, errs, tc.errs)
		})
	}
	old := cluster(defragSpec("nightly", ""))
	c := old.DeepCopy()
	c.Spec.Replicas = ptr.To[int32](5)
	if errs, _ := ValidateUpdate(old, c); len(errs) != 0 {
		t.Errorf("unchanged spec.maintenance refused: %v", errs)
	}
}
