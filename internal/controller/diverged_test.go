package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/storage/schema"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// divergeMember changes, in member m's own database and nowhere else, the value of key: its key-value
// hash then differs from its peers', as a disk or a bug that changes data under etcd does (etcd's own
// corruption tests change the backend the same way). m keeps serving.
func divergeMember(t *testing.T, m *testenv.EtcdMember, key string) {
	t.Helper()
	be := m.Etcd.Server.Backend()
	tx := be.BatchTx()
	tx.LockOutsideApply()
	revs, values := tx.UnsafeRange(schema.Key, []byte{0}, []byte{0xff}, 0)
	changed := 0
	for i, raw := range values {
		var kv mvccpb.KeyValue
		if err := kv.Unmarshal(raw); err != nil || string(kv.Key) != key {
			continue
		}
		kv.Value = []byte("diverged")
		out, err := kv.Marshal()
		if err != nil {
			tx.Unlock()
			t.Fatal(err)
		}
		tx.UnsafePut(schema.Key, revs[i], out)
		changed++
	}
	tx.Unlock()
	be.ForceCommit()
	if changed == 0 {
		t.Fatalf("no revision of %q in %s's database", key, m.Etcd.Config().Name)
	}
}

// TestDivergedMemberReplaced: one member's data diverges from its peers' while it keeps serving (no
// alarm: etcd's own corruption checks are off by default). The operator's hash comparison finds the
// two others agree and it differs: DataInconsistent names it. With replaceUnhealthyMemberAfter 0s it
// is only named, and the message says how to replace it by hand; with the default policy it is
// removed at once (a Warning MemberRemoved event says why) and a new member is added in its place,
// once a pod that still uses its old claim, which Progressing names, is gone.
func TestDivergedMemberReplaced(t *testing.T) {
	c, members, _, _ := runningCluster(t, testutil.EtcdCluster("dvg", testutil.InNamespace("ns-dvg"), testutil.WithReplicas(3),
		func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.Recovery = &etcdv1beta1.RecoverySpec{ReplaceUnhealthyMemberAfter: &metav1.Duration{}}
		}), "127.0.0.144", "127.0.0.145", "127.0.0.146")
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{members[0].ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	if _, err := cli.Put(ctx, "diverge-me", "v"); err != nil {
		t.Fatal(err)
	}
	oldID := uint64(members[1].Etcd.Server.MemberID())
	testutil.Eventually(t, waitTimeout, "dvg-1 applied the put", func(context.Context) error {
		if members[1].Etcd.Server.AppliedIndex() < members[0].Etcd.Server.AppliedIndex() {
			return errors.New("behind")
		}
		return nil
	})
	divergeMember(t, members[1], "diverge-me")

	testutil.Eventually(t, waitTimeout, "DataInconsistent names dvg-1, not replaced with 0s", func(context.Context) error {
		d := condition(getCluster(t, c), etcdv1beta1.ConditionDataInconsistent)
		if d == nil || d.Status != metav1.ConditionTrue || !strings.Contains(d.Message, "dvg-1 differs from the majority and is not replaced (spec.recovery.replaceUnhealthyMemberAfter is 0s)") {
			return fmt.Errorf("DataInconsistent %+v", d)
		}
		return nil
	})
	if !listed(t, members[0], oldID) {
		t.Fatal("dvg-1 removed although replacing is off")
	}
	waitWarning(t, c, etcdv1beta1.ReasonHashMismatch, "dvg-1 differs from the majority")

	updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Recovery = nil })
	testutil.Eventually(t, waitTimeout, "dvg-1 removed", func(context.Context) error {
		if listed(t, members[0], oldID) {
			return errors.New("dvg-1 still listed")
		}
		return nil
	})
	waitWarning(t, c, "MemberRemoved", "its data diverged from its peers' (at revision ")
	// a pod a user runs on the old claim (to look at the data) keeps Kubernetes from deleting the
	// claim: Progressing names it, and once it is gone the replacement goes on
	salvage := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "salvage", Namespace: c.Namespace}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "sh", Image: "busybox"}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: resources.PVCName("dvg-1")}}}}}}
	if err := k8s.Create(ctx, salvage); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, claimHeldAfter+waitTimeout, "Progressing names the pod that holds the claim", func(context.Context) error {
		if p := condition(getCluster(t, c), etcdv1beta1.ConditionProgressing); p == nil || !strings.Contains(p.Message, "claim data-dvg-1 is still used by pod salvage (") {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	if err := k8s.Delete(ctx, salvage, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	waitNewLearner(t, c, members[0], "dvg-1", oldID)
}

// listed reports whether member id is in the member list that m gives.
func listed(t *testing.T, m *testenv.EtcdMember, id uint64) bool {
	for _, mem := range memberList(t, m.ClientURL()) {
		if mem.ID == id {
			return true
		}
	}
	return false
}

// TestConsistencyDue: the hash comparison runs when it has not run since the operator started, every
// interval, and, when the members changed since it last ran (a member's etcd started, a member joined
// or left), no sooner than restartedCheckInterval after the last one; never more often.
func TestConsistencyDue(t *testing.T) {
	last := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	const interval = 10 * time.Minute
	for _, tc := range []struct {
		name    string
		ran     bool
		changed bool
		now     time.Time
		want    time.Duration
	}{
		{"never ran", false, false, last, 0},
		{"within the interval, no change", true, false, last.Add(9 * time.Minute), -1},
		{"the interval passed", true, false, last.Add(interval), 0},
		{"changed, a minute on", true, true, last.Add(time.Minute), 0},
		{"changed, spaced", true, true, last.Add(20 * time.Second), 40 * time.Second},
		{"changed, the interval passed", true, true, last.Add(interval), 0},
	} {
		if got := consistencyDue(last, tc.ran, interval, tc.changed, tc.now); got != tc.want {
			t.Errorf("%s: consistencyDue = %s, want %s", tc.name, got, tc.want)
		}
	}
	c := &etcdv1beta1.EtcdCluster{Status: etcdv1beta1.EtcdClusterStatus{Conditions: []metav1.Condition{{Type: etcdv1beta1.ConditionDegraded, Status: metav1.ConditionFalse}}}}
	if got := verdict.Requeue(c, &verdict.Report{CheckAfter: 40 * time.Second}, nil, time.Minute); got != 40*time.Second {
		t.Errorf("a settled cluster with a comparison due in 40s is looked at again in %s, want 40s", got)
	}
}

// TestRunningMembers: what a comparison covers changes when a member's etcd starts again (a new
// container ID, whatever the nodes' clocks say) or a member joins or leaves, and not otherwise.
func TestRunningMembers(t *testing.T) {
	c := testutil.EtcdCluster("rm", testutil.WithReplicas(3))
	pod := func(name, containerID string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: resources.MemberLabels(c, name)}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.EtcdContainer, ContainerID: containerID,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
		return p
	}
	covered := func(pods []corev1.Pod, names ...string) string {
		obs := &model.Etcd{ClusterID: 1, Status: map[uint64]etcd.EndpointStatus{}, Health: map[uint64]error{}}
		for i, n := range names {
			obs.Members = append(obs.Members, etcd.Member{ID: uint64(i + 1), Name: n, PeerURLs: []string{"https://" + n + ".rm.default.svc:2380"}})
		}
		return runningMembers(model.Build(model.Input{Cluster: c, Pods: pods, Etcd: obs}))
	}
	three := []corev1.Pod{pod("rm-0", "containerd://a"), pod("rm-1", "containerd://b"), pod("rm-2", "containerd://c")}
	before := covered(three, "rm-0", "rm-1", "rm-2")
	if want := "rm-0=containerd://a,rm-1=containerd://b,rm-2=containerd://c"; before != want {
		t.Fatalf("runningMembers = %q, want %q", before, want)
	}
	if again := covered([]corev1.Pod{three[2], three[0], three[1]}, "rm-2", "rm-0", "rm-1"); again != before {
		t.Errorf("the same members in another order: %q, want %q", again, before)
	}
	restarted := []corev1.Pod{three[0], pod("rm-1", "containerd://b2"), three[2]}
	if got := covered(restarted, "rm-0", "rm-1", "rm-2"); got == before {
		t.Errorf("rm-1's etcd started again (a new container ID): still %q", got)
	}
	if got := covered(three[:2], "rm-0", "rm-1"); got == before {
		t.Errorf("rm-2 left: still %q", got)
	}
}
