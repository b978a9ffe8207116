package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestNoSpaceQuotaRaiseRollsAndDisarms: a member of a cluster whose databases fill their 16Mi quota
// has etcd's NOSPACE alarm, which stops the writes of every member. The cluster is reported as refusing writes (Available False, reason
// NoSpace, phase Degraded, not QuorumLost), with what to do and a Warning event, and the alarm stays
// while the database does not fit. Raising spec.options.quotaBackendBytes rolls the members although
// they are alarmed, and once all run the new quota the operator disarms the alarm: no alarm is left,
// the cluster is Available and accepts writes.
func TestNoSpaceQuotaRaiseRollsAndDisarms(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-nospace"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	c := testutil.EtcdCluster("full", testutil.InNamespace(ns.Name), testutil.WithReplicas(3), testutil.WithQuota("16Mi"))
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	retireAtEnd(t, c)
	names := []string{"full-0", "full-1", "full-2"}
	hosts := []string{"127.0.0.91", "127.0.0.92", "127.0.0.93"}
	ipOf := map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]}
	members := testenv.StartEtcd(t, names, hosts)
	runPods(t, c, ipOf)
	c = waitAvailable(t, c, 3)
	runDisruptionController(t, c)

	// Fill the database past 90% of 16Mi, then raise NOSPACE as etcd would on the next write.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{members[0].ClientURL()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	value := strings.Repeat("x", 1<<20)
	for i := range 16 {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := cli.Put(pctx, fmt.Sprintf("big/%02d", i), value)
		cancel()
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	// etcd raises it for the member that served the refused write; one alarm stops every member's writes
	raiseNoSpace(t, members[1])
	testutil.Eventually(t, waitTimeout, "NoSpace reported", func(context.Context) error {
		c = getCluster(t, c)
		a, p := condition(c, etcdv1beta1.ConditionAvailable), condition(c, etcdv1beta1.ConditionProgressing)
		if a == nil || a.Status != metav1.ConditionFalse || a.Reason != etcdv1beta1.ReasonNoSpace {
			return fmt.Errorf("available %+v", a)
		}
		if p == nil || p.Reason != etcdv1beta1.ReasonNoSpace || !strings.Contains(p.Message, "raise spec.options.quotaBackendBytes") ||
			!strings.Contains(p.Message, "of the 16777216-byte quota") {
			return fmt.Errorf("progressing %+v", p)
		}
		if c.Status.Phase != etcdv1beta1.PhaseDegraded {
			return fmt.Errorf("phase %s", c.Status.Phase)
		}
		return findEvent(ctx, c, "", etcdv1beta1.ReasonNoSpace, "etcd refuses writes")
	})
	if alarms := alarmList(t, cli); len(alarms) != 1 {
		t.Fatalf("alarms %v: the operator disarmed NOSPACE while the databases do not fit", alarms)
	}

	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Options.QuotaBackendBytes = ptr.To(resource.MustParse("64Mi"))
	})
	hash := resources.Options{}.SpecHash(c)
	// Play kubelet: a recreated member pod runs again (the embedded member keeps its data).
	testutil.Eventually(t, 60*time.Second, "every member rolled and the alarm disarmed", func(context.Context) error {
		rolled := 0
		for _, n := range names {
			p, err := getPod(c, n)
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning {
				runPods(t, c, map[string]string{n: ipOf[n]})
			}
			if p.Annotations[etcdv1beta1.AnnotationSpecHash] == hash {
				rolled++
			}
		}
		if rolled != 3 {
			return fmt.Errorf("%d of 3 members rolled", rolled)
		}
		if alarms := alarmList(t, cli); len(alarms) > 0 {
			return fmt.Errorf("alarms %v", alarms)
		}
		return nil
	})
	c = waitAvailable(t, c, 3)
	waitEvent(t, c, "DisarmedNoSpace", "Disarmed the NOSPACE alarm of full-1")
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Put(pctx, "after", "disarm"); err != nil {
		t.Errorf("write after the alarm was disarmed: %v", err)
	}
}

// raiseNoSpace raises the NOSPACE alarm for member m, as etcd does when a write does not fit its quota.
func raiseNoSpace(t *testing.T, m *testenv.EtcdMember) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := m.Etcd.Server.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: uint64(m.Etcd.Server.MemberID()), Alarm: pb.AlarmType_NOSPACE}); err != nil {
		t.Fatalf("raise NOSPACE on %s: %v", m.Name, err)
	}
}

// alarmList returns the cluster's active alarms as "<member id>:<alarm>".
func alarmList(t *testing.T, cli *clientv3.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.AlarmList(ctx)
	if err != nil {
		t.Fatalf("alarm list: %v", err)
	}
	var out []string
	for _, a := range resp.Alarms {
		out = append(out, fmt.Sprintf("%x:%s", a.MemberID, a.Alarm))
	}
	return out
}

// TestNoSpaceCuredByDefragmentation: the members' database files fill their 16Mi quota, but after a
// delete and a compaction their data would fit: on NOSPACE the operator defragments each member
// (followers first, the leader after leadership moved), then disarms the alarm, without a quota change
// or a restart; writes are accepted again.
func TestNoSpaceCuredByDefragmentation(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-nospace-defrag"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	c := testutil.EtcdCluster("shrink", testutil.InNamespace(ns.Name), testutil.WithReplicas(3), testutil.WithQuota("16Mi"))
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	retireAtEnd(t, c)
	names := []string{"shrink-0", "shrink-1", "shrink-2"}
	hosts := []string{"127.0.0.155", "127.0.0.156", "127.0.0.157"}
	members := testenv.StartEtcd(t, names, hosts)
	runPods(t, c, map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]})
	c = waitAvailable(t, c, 3)
	uids := map[string]string{}
	for _, n := range names {
		p, err := getPod(c, n)
		if err != nil {
			t.Fatal(err)
		}
		uids[n] = string(p.UID)
	}

	// files over 90% of the 16Mi quota, data well under it
	cli := fragment(t, members, func(st *clientv3.StatusResponse) bool { return st.DbSize >= 15<<20 && st.DbSizeInUse <= 4<<20 })
	raiseNoSpace(t, members[1])
	testutil.Eventually(t, waitTimeout, "every member defragmented and the alarm disarmed", func(context.Context) error {
		if alarms := alarmList(t, cli); len(alarms) > 0 {
			return fmt.Errorf("alarms %v", alarms)
		}
		for _, n := range names {
			if err := findEvent(ctx, c, "", "Defragmented", "Defragmented "+n+" "); err != nil {
				return err
			}
		}
		return findEvent(ctx, c, "", "DisarmedNoSpace", "Disarmed the NOSPACE alarm of shrink-1")
	})
	c = waitAvailable(t, c, 3)
	for _, n := range names {
		if p, err := getPod(c, n); err != nil || string(p.UID) != uids[n] {
			t.Errorf("pod %s was recreated (%v): a defragmentation needs no restart", n, err)
		}
	}
	pctx, cancelPut := context.WithTimeout(ctx, 10*time.Second)
	defer cancelPut()
	if _, err := cli.Put(pctx, "after", "disarm"); err != nil {
		t.Errorf("write after the alarm was disarmed: %v", err)
	}
}
