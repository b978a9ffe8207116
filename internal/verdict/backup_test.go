package verdict

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

func finished(name string, phase etcdv1beta1.BackupPhase, at time.Time, msg string) *etcdv1beta1.EtcdBackup {
	t := metav1.NewTime(at)
	return &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: etcdv1beta1.EtcdBackupStatus{Phase: phase, CompletionTime: &t, Message: msg, SizeBytes: 10, Location: "s3://b/" + name}}
}

// TestBackupFailing: True after three scheduled failures in a row or when the newest success is older
// than three periods; a success among the newest three, or a fresh success, keeps it False.
func TestBackupFailing(t *testing.T) {
	now := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	ago := func(m int) time.Time { return now.Add(-time.Duration(m) * time.Minute) }
	ok, fail := etcdv1beta1.BackupSucceeded, etcdv1beta1.BackupFailed
	running := &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Status: etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupRunning}}
	for _, tc := range []struct {
		name    string
		backups []*etcdv1beta1.EtcdBackup
		failing bool
		reason  string
		mention string
	}{
		{"nothing yet", nil, false, etcdv1beta1.ReasonNoBackupYet, "No backup"},
		{"fresh success", []*etcdv1beta1.EtcdBackup{finished("a", ok, ago(1), "")}, false, etcdv1beta1.ReasonBackupsSucceeding, "a, completed at"},
		{"two failures after a success", []*etcdv1beta1.EtcdBackup{finished("a", ok, ago(3), ""), finished("b", fail, ago(2), "x"), finished("c", fail, ago(1), "y"), running},
			false, etcdv1beta1.ReasonBackupsSucceeding, ""},
		{"three failures", []*etcdv1beta1.EtcdBackup{finished("a", ok, ago(4), ""), finished("b", fail, ago(3), "x"), finished("c", fail, ago(2), "y"), finished("d", fail, ago(1), "backup failed: access denied")},
			true, etcdv1beta1.ReasonBackupsFailing, "the newest, d: backup failed: access denied"},
		{"success older than three periods", []*etcdv1beta1.EtcdBackup{finished("a", ok, ago(4), "")}, true, etcdv1beta1.ReasonBackupTooOld, "more than 3 schedule periods (1m0s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failing, rm := BackupFailing(tc.backups, NewestSuccess(tc.backups), time.Minute, now)
			if failing != tc.failing || rm[0] != tc.reason || !strings.Contains(rm[1], tc.mention) {
				t.Errorf("got %v %q %q", failing, rm[0], rm[1])
			}
		})
	}
}

// TestApplyBackupStatus: the backup phase's observation becomes status.lastBackup, lastScheduleTime
// and the BackupFailing condition; without a schedule the condition is removed; a pass that did not
// run the phase changes nothing.
func TestApplyBackupStatus(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{}
	s := &scope{cluster: c, report: &Report{}}
	applyBackupStatus(s)
	if c.Status.LastBackup != nil || len(c.Status.Conditions) != 0 {
		t.Fatalf("status changed without an observation: %+v", c.Status)
	}
	at := metav1.NewTime(time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC))
	s.report.Backup = &BackupObservation{Last: NewestSuccess([]*etcdv1beta1.EtcdBackup{finished("a", etcdv1beta1.BackupSucceeded, at.Time, "")}),
		LastSchedule: &at, Failing: &Progress{Reason: etcdv1beta1.ReasonBackupsFailing, Message: "m"}, FailingTrue: true}
	applyBackupStatus(s)
	if lb := c.Status.LastBackup; lb == nil || lb.Name != "a" || !lb.CompletionTime.Equal(&at) || lb.SizeBytes != 10 || lb.Location != "s3://b/a" {
		t.Errorf("lastBackup %+v", lb)
	}
	if !c.Status.LastScheduleTime.Equal(&at) {
		t.Errorf("lastScheduleTime %v", c.Status.LastScheduleTime)
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionBackupFailing); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("BackupFailing %+v", cond)
	}
	s.report.Backup = &BackupObservation{}
	applyBackupStatus(s)
	if meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionBackupFailing) != nil || c.Status.LastScheduleTime == nil {
		t.Errorf("after the schedule was removed: %+v", c.Status)
	}
}

// TestUnknownMember: a backup naming no member, or one the cluster's status lists, may run; one naming
// another member fails, with the members the status lists.
func TestUnknownMember(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{}
	c.Name = "ql"
	c.Status.Members = []etcdv1beta1.MemberStatus{{Name: "ql-0"}, {Name: "ql-1"}, {Name: "ql-2"}}
	for member, want := range map[string]string{
		"":     "",
		"ql-1": "",
		"ql-7": "spec.member ql-7 is not a member of EtcdCluster ql (its members: ql-0, ql-1, ql-2); nothing was stored",
	} {
		b := &etcdv1beta1.EtcdBackup{Spec: etcdv1beta1.EtcdBackupSpec{Member: member}}
		if got := UnknownMember(b, c); (want == "") != (got == "") || !strings.HasPrefix(got, want) {
			t.Errorf("member %q: %q, want %q", member, got, want)
		}
	}
}
