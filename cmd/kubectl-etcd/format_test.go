package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// now is the time the formatting tests render ages against.
var now = time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)

// ago returns the time d before now.
func ago(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-d)} }

// degradedCluster is a 3-member cluster whose member demo-2 has been down for 5 minutes.
func degradedCluster() *etcdv1beta1.EtcdCluster {
	c := testutil.EtcdCluster("demo", testutil.InNamespace("apps"), testutil.WithReplicas(3))
	c.Generation = 4
	c.Status = etcdv1beta1.EtcdClusterStatus{
		ObservedGeneration: 4, Phase: etcdv1beta1.PhaseDegraded, ReadyReplicas: 2, Replicas: 3,
		ClusterID: "8e9e05c52164694d", Leader: "demo-1", CurrentVersion: "3.6.16",
		Conditions: []metav1.Condition{
			{Type: etcdv1beta1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: etcdv1beta1.ReasonQuorumHealthy, LastTransitionTime: *ago(time.Hour)},
			{Type: etcdv1beta1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: etcdv1beta1.ReasonMembersUnhealthy,
				Message: "member demo-2 is down:\nCrashLoopBackOff", LastTransitionTime: *ago(5 * time.Minute)},
			{Type: etcdv1beta1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: etcdv1beta1.ReasonReconciled, LastTransitionTime: *ago(time.Hour)},
		},
		LastBackup:  &etcdv1beta1.LastBackup{Name: "demo-nightly", CompletionTime: ago(3*time.Hour + 10*time.Minute), Location: "pvc://backups/etcd/apps/demo/demo-nightly.db"},
		Maintenance: &etcdv1beta1.MaintenanceStatus{PendingDefragmentation: []string{"demo-0", "demo-1"}},
		Members: []etcdv1beta1.MemberStatus{
			{Name: "demo-0", ID: "2c1c5e7f0b3a9d11", Role: etcdv1beta1.RoleVoter, Healthy: true, Version: "3.6.16", DBSizeBytes: 20 << 20},
			{Name: "demo-1", ID: "91bc3c398fb3c146", Role: etcdv1beta1.RoleVoter, Healthy: true, Leader: true, Version: "3.6.16", DBSizeBytes: 1572864},
			{Name: "demo-2", ID: "fd422379fda50e48", Role: etcdv1beta1.RoleVoter, DownSince: ago(5*time.Minute + 20*time.Second),
				Problem: "CrashLoopBackOff: back-off 40s restarting failed container etcd\nlast terminated: Error"},
		},
	}
	return c
}

// TestWriteStatusDownMember: the header shows the abnormal condition with its message on one line,
// the last backup's age and the pending defragmentation; the members table gains DOWN SINCE and
// PROBLEM for the down member.
func TestWriteStatusDownMember(t *testing.T) {
	var out bytes.Buffer
	if err := writeStatus(&out, degradedCluster(), now); err != nil {
		t.Fatal(err)
	}
	want := `Cluster:                   apps/demo
Phase:                     Degraded
Version:                   3.6.16
Cluster ID:                8e9e05c52164694d
Leader:                    demo-1
Ready:                     2/3
Paused:                    no
Last backup:               demo-nightly, 3h10m ago, pvc://backups/etcd/apps/demo/demo-nightly.db
Pending defragmentation:   demo-0, demo-1
Conditions:                1 not in their normal state
  Degraded=True            MembersUnhealthy: member demo-2 is down: CrashLoopBackOff (5m ago)

NAME     ID                 ROLE    LEADER   HEALTHY   VERSION   DB SIZE   DOWN SINCE   PROBLEM
demo-0   2c1c5e7f0b3a9d11   Voter   -        yes       3.6.16    20 MiB    -            -
demo-1   91bc3c398fb3c146   Voter   *        yes       3.6.16    1.5 MiB   -            -
demo-2   fd422379fda50e48   Voter   -        no        -         -         5m20s ago    CrashLoopBackOff: back-off 40s restarting failed container etcd last terminated: Error
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

// TestWriteStatusHealthy: a healthy cluster says its conditions are normal, and its table has no
// DOWN SINCE or PROBLEM column; a spec the operator has not observed yet, and a request it has not
// carried out yet, are pointed out.
func TestWriteStatusHealthy(t *testing.T) {
	c := degradedCluster()
	c.Generation = 5
	c.Spec.Paused = true
	c.Annotations = map[string]string{etcdv1beta1.AnnotationReplaceMember: "demo-2"}
	c.Status.Phase = etcdv1beta1.PhaseRunning
	c.Status.Conditions = c.Status.Conditions[:1]
	c.Status.LastBackup, c.Status.Maintenance = nil, nil
	c.Status.Members = c.Status.Members[:2]
	var out bytes.Buffer
	if err := writeStatus(&out, c, now); err != nil {
		t.Fatal(err)
	}
	want := `Cluster:       apps/demo
Phase:         Running
Version:       3.6.16
Cluster ID:    8e9e05c52164694d
Leader:        demo-1
Ready:         2/3
Paused:        yes
Last backup:   none
Requests:      etcd.etcdkit.dev/replace-member=demo-2 (not carried out yet)
Observed:      generation 4 of 5: the operator has not acted on the newest spec yet
Conditions:    all normal

NAME     ID                 ROLE    LEADER   HEALTHY   VERSION   DB SIZE
demo-0   2c1c5e7f0b3a9d11   Voter   -        yes       3.6.16    20 MiB
demo-1   91bc3c398fb3c146   Voter   *        yes       3.6.16    1.5 MiB
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

// TestWriteClusterList: one line per cluster, ready as ready/desired, the last backup's age.
func TestWriteClusterList(t *testing.T) {
	fresh := testutil.EtcdCluster("fresh", testutil.WithReplicas(5))
	var out bytes.Buffer
	if err := writeClusterList(&out, []etcdv1beta1.EtcdCluster{*degradedCluster(), *fresh}, now); err != nil {
		t.Fatal(err)
	}
	want := `NAME    PHASE      READY   VERSION   LEADER   LAST BACKUP
demo    Degraded   2/3     3.6.16    demo-1   3h10m ago
fresh   -          0/5     -         -        -
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
}

// TestHumanBytes: binary units, one decimal where it is not zero.
func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 20 << 20: "20 MiB",
		2<<30 + 300<<20: "2.3 GiB", 64 << 40: "64 TiB",
	} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestAge: ages as kubectl writes them, "-" without a time.
func TestAge(t *testing.T) {
	for _, tc := range []struct {
		t    *metav1.Time
		want string
	}{
		{nil, "-"},
		{ago(42 * time.Second), "42s"},
		{ago(5*time.Minute + 20*time.Second), "5m20s"},
		{ago(3*time.Hour + 10*time.Minute), "3h10m"},
		{ago(50 * time.Hour), "2d2h"},
		{ago(40 * 24 * time.Hour), "40d"},
	} {
		if got := age(tc.t, now); got != tc.want {
			t.Errorf("age(%v) = %q, want %q", tc.t, got, tc.want)
		}
	}
}

// TestAbnormalConditions: only conditions out of their normal status, and unknown types only when
// Unknown.
func TestAbnormalConditions(t *testing.T) {
	conds := []metav1.Condition{
		{Type: etcdv1beta1.ConditionAvailable, Status: metav1.ConditionFalse},
		{Type: etcdv1beta1.ConditionProgressing, Status: metav1.ConditionTrue},
		{Type: etcdv1beta1.ConditionDegraded, Status: metav1.ConditionFalse},
		{Type: etcdv1beta1.ConditionValid, Status: metav1.ConditionTrue},
		{Type: "Future", Status: metav1.ConditionTrue},
		{Type: "FutureUnknown", Status: metav1.ConditionUnknown},
	}
	var got []string
	for _, c := range abnormalConditions(conds) {
		got = append(got, c.Type)
	}
	if diff := cmp.Diff([]string{"Available", "Progressing", "FutureUnknown"}, got); diff != "" {
		t.Errorf("abnormal conditions (-want +got):\n%s", diff)
	}
}
