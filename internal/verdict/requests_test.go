package verdict

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// requestCluster is a model of cluster n with spec.replicas replicas and voters n-0 .. n-(voters-1)
// (n-1 leads), each with a pod and a claim and healthy, then changed by mutate.
func requestCluster(replicas int32, voters int, mutate func(c *etcdv1beta1.EtcdCluster, in *model.Input)) *model.Cluster {
	c := testutil.EtcdCluster("n", testutil.WithReplicas(replicas))
	e := &model.Etcd{ClusterID: 1, Leader: 2, Status: map[uint64]etcd.EndpointStatus{}, Health: map[uint64]error{}}
	in := model.Input{Cluster: c, Etcd: e}
	for i := range voters {
		id, name := uint64(i+1), fmt.Sprintf("n-%d", i)
		e.Members = append(e.Members, etcd.Member{ID: id, Name: name})
		e.Health[id] = nil
		e.Status[id] = etcd.EndpointStatus{}
		in.Pods = append(in.Pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}})
		in.Claims = append(in.Claims, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + name}})
	}
	if mutate != nil {
		mutate(c, &in)
	}
	return model.Build(in)
}

// TestRefuseRequests: a request is refused only when it can never be carried out: an unknown member,
// a learner, the member of a one-member cluster; a member spec.replicas asks for but etcd does not
// list yet may be named.
func TestRefuseRequests(t *testing.T) {
	learner := func(_ *etcdv1beta1.EtcdCluster, in *model.Input) {
		in.Etcd.Members = append(in.Etcd.Members, etcd.Member{ID: 9, Name: "n-3", IsLearner: true})
	}
	for _, tc := range []struct {
		name          string
		m             *model.Cluster
		member        string
		move, replace string
	}{
		{"a follower", requestCluster(3, 3, nil), "n-0", "", ""},
		{"the leader", requestCluster(3, 3, nil), "n-1", "", ""},
		{"unknown", requestCluster(3, 3, nil), "x-1", "the cluster has no member x-1 (its members: n-0, n-1, n-2)", "the cluster has no member x-1"},
		{"beyond spec.replicas", requestCluster(3, 3, nil), "n-3", "the cluster has no member n-3", "the cluster has no member n-3"},
		{"to be added", requestCluster(5, 3, nil), "n-4", "", ""},
		{"a learner", requestCluster(5, 3, learner), "n-3", "n-3 is a learner, which cannot lead", "n-3 is a learner being added"},
		{"one member", requestCluster(1, 1, nil), "n-0", "", "the cluster has one member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, got := range []struct{ kind, got, want string }{
				{"move-leader", RefuseMoveLeader(tc.m, tc.member), tc.move},
				{"replace-member", RefuseReplace(tc.m, tc.member), tc.replace},
			} {
				if (got.want == "") != (got.got == "") || !strings.Contains(got.got, got.want) {
					t.Errorf("%s %s: refused %q, want %q", got.kind, tc.member, got.got, got.want)
				}
			}
		})
	}
}

// TestReplaceWait: a replacement waits while another member is not healthy, the membership changes,
// a pod or claim is being deleted, a member lacks its pod or claim, or a restore or CA rotation is
// under way; the member itself may be down.
func TestReplaceWait(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name   string
		mutate func(*etcdv1beta1.EtcdCluster, *model.Input)
		want   string
	}{
		{"settled", nil, ""},
		{"the member itself down", func(_ *etcdv1beta1.EtcdCluster, in *model.Input) { in.Etcd.Health[1] = errors.New("timeout") }, ""},
		{"another member down", func(_ *etcdv1beta1.EtcdCluster, in *model.Input) { in.Etcd.Health[3] = errors.New("timeout") },
			"member n-2 is not healthy: replacing n-0 too could lose quorum"},
		{"a pod being deleted", func(_ *etcdv1beta1.EtcdCluster, in *model.Input) { in.Pods[0].DeletionTimestamp = &now },
			"the pod or claim of n-0 is being deleted"},
		{"its own claim being deleted, its pod running", func(_ *etcdv1beta1.EtcdCluster, in *model.Input) { in.Claims[0].DeletionTimestamp = &now }, ""},
		{"another member's claim being deleted", func(_ *etcdv1beta1.EtcdCluster, in *model.Input) { in.Claims[1].DeletionTimestamp = &now },
			"the pod or claim of n-1 is being deleted"},
		{"a claim gone", func(_ *etcdv1beta1.EtcdCluster, in *model.Input) { in.Claims = in.Claims[:2] }, "member n-2 lacks its pod or claim"},
		{"scaling up", func(c *etcdv1beta1.EtcdCluster, _ *model.Input) { c.Spec.Replicas = ptr.To[int32](5) }, "the membership is changing"},
		{"a stray pod", func(_ *etcdv1beta1.EtcdCluster, in *model.Input) {
			in.Pods = append(in.Pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "n-3"}})
		}, "n-3 has a pod or claim but is not a member"},
		{"a CA rotation", func(c *etcdv1beta1.EtcdCluster, _ *model.Input) {
			c.Status.TLS = &etcdv1beta1.TLSStatus{CARotation: &etcdv1beta1.CARotationStatus{}}
		}, "a rotation of the CA is under way"},
		{"no answer", func(_ *etcdv1beta1.EtcdCluster, in *model.Input) { in.Etcd = nil }, "etcd did not answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ReplaceWait(requestCluster(3, 3, tc.mutate), "n-0")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("waits for %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRequestedDefragmentation: a new request makes every voter pending, one under way keeps what is
// pending; followers by name, the leader last, learners never.
func TestRequestedDefragmentation(t *testing.T) {
	m := requestCluster(3, 3, func(_ *etcdv1beta1.EtcdCluster, in *model.Input) {
		in.Etcd.Members = append(in.Etcd.Members, etcd.Member{ID: 9, Name: "n-3", IsLearner: true})
	})
	if got := RequestedDefragmentation(m, []string{"n-0"}, false); !slices.Equal(got, []string{"n-0", "n-2", "n-1"}) {
		t.Errorf("new request: %v", got)
	}
	if got := RequestedDefragmentation(m, []string{"n-1", "n-2", "gone"}, true); !slices.Equal(got, []string{"n-2", "n-1"}) {
		t.Errorf("under way: %v", got)
	}
	if got := RequestedDefragmentation(m, nil, true); len(got) != 0 {
		t.Errorf("done: %v", got)
	}
}
