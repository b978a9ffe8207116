package observe

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestEndpointAnsweringAsAnotherMember: the pod of member ida-2 has the address of a member of another
// cluster (an address reused, or a pod started on another member's data). Whatever that endpoint says
// is not about ida-2: the pass records ida-2 as not answering, saying which member answered, and keeps
// no status for it; the members whose endpoints answer as themselves are healthy.
func TestEndpointAnsweringAsAnotherMember(t *testing.T) {
	names := []string{"ida-0", "ida-1", "ida-2"}
	members := testenv.StartEtcd(t, names, []string{"127.0.0.171", "127.0.0.172", "127.0.0.173"})
	members[2].Stop()
	foreign := testenv.StartEtcdWithToken(t, "another-cluster", []string{"ida-2"}, []string{"127.0.0.174"})
	c := testutil.EtcdCluster("ida", testutil.WithReplicas(3))
	pod := func(name, ip string, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: phase, PodIP: ip}}
	}
	m := model.Build(model.Input{Cluster: c, Pods: []corev1.Pod{
		pod("ida-0", "127.0.0.171", corev1.PodRunning), pod("ida-1", "127.0.0.172", corev1.PodRunning),
		pod("ida-2", "127.0.0.174", corev1.PodPending), // not asked for the member list: only for its own status
	}})
	obs, cli, err := Etcd(context.Background(), etcd.New, m, resources.Options{}, 3*time.Second, etcd.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	wantID := uint64(members[2].Etcd.Server.MemberID())
	herr := obs.Health[wantID]
	if herr == nil || !strings.Contains(herr.Error(), "answers as member "+etcd.FormatID(uint64(foreign[0].Etcd.Server.MemberID()))) {
		t.Errorf("health of ida-2 = %v, want it to say the endpoint answers as the foreign member", herr)
	}
	if _, ok := obs.Status[wantID]; ok {
		t.Error("the foreign member's status was recorded as ida-2's")
	}
	for _, i := range []int{0, 1} {
		if err := obs.Health[uint64(members[i].Etcd.Server.MemberID())]; err != nil {
			t.Errorf("health of %s = %v, want healthy", names[i], err)
		}
	}
}

// TestMemberListSkipsMemberWithoutQuorum: one of the three endpoints is a member that answers but
// cannot serve a linearizable member list (its cluster lost its quorum, as a member cut off from its
// peers cannot). The client balances calls over the endpoints, so a single attempt would hit it one
// pass in three and see no cluster at all; every pass still gets the member list from the others.
func TestMemberListSkipsMemberWithoutQuorum(t *testing.T) {
	members := testenv.StartEtcd(t, []string{"mq-0", "mq-1"}, []string{"127.0.0.175", "127.0.0.176"})
	lone := testenv.StartEtcdWithToken(t, "no-quorum", []string{"x-0", "x-1", "x-2"}, []string{"127.0.0.177", "127.0.0.178", "127.0.0.179"})
	lone[1].Stop()
	lone[2].Stop()
	c := testutil.EtcdCluster("mq", testutil.WithReplicas(3))
	pod := func(name, ip string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip}}
	}
	m := model.Build(model.Input{Cluster: c, Pods: []corev1.Pod{pod("mq-0", "127.0.0.175"), pod("mq-1", "127.0.0.176"), pod("mq-2", "127.0.0.177")}})
	want := uint64(members[0].Etcd.Server.Cluster().ID())
	for pass := range 6 {
		obs, cli, err := Etcd(context.Background(), etcd.New, m, resources.Options{}, 3*time.Second, etcd.Config{})
		if cli != nil {
			_ = cli.Close()
		}
		if err != nil || obs.ClusterID != want || len(obs.Members) != 2 {
			t.Fatalf("pass %d: %v, %+v; want the 2 members of cluster %s", pass, err, obs, etcd.FormatID(want))
		}
	}
}
