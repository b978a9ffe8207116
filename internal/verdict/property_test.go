package verdict

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestHealthProperties: for any cluster etcd reports, Available needs a leader and a quorum of healthy
// voters; a NOSPACE verdict needs a serving quorum and excludes Available; the counts agree with the
// model.
func TestHealthProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 7).Draw(rt, "members")
		e := &model.Etcd{ClusterID: 1, Status: map[uint64]etcd.EndpointStatus{}, Health: map[uint64]error{}}
		for i := range n {
			id := uint64(i + 1)
			e.Members = append(e.Members, etcd.Member{ID: id, Name: fmt.Sprintf("p-%d", i), IsLearner: rapid.Bool().Draw(rt, "learner")})
			e.Health[id] = rapid.SampledFrom([]error{nil, fmt.Errorf("health: %w", etcd.ErrNoSpace), errors.New("timeout")}).Draw(rt, "health")
		}
		if n > 0 && rapid.Bool().Draw(rt, "led") {
			e.Leader = uint64(rapid.IntRange(1, n).Draw(rt, "leader"))
		}
		m := model.Build(model.Input{Cluster: testutil.EtcdCluster("p"), Etcd: e})
		h := JudgeHealth(m)
		if h.Available && (e.Leader == 0 || h.HealthyVoters < h.Quorum || h.Voters == 0) {
			rt.Fatalf("available without a leader or a quorum: %+v", h)
		}
		if h.NoSpace && (h.Available || int32(m.ServingVoters()) < h.Quorum) {
			rt.Fatalf("NOSPACE verdict without a serving quorum, or together with Available: %+v", h)
		}
		if h.Quorum != int32(membership.Quorum(int(h.Voters))) || h.Voters+h.Learners != int32(n) {
			rt.Fatalf("counts disagree with the model: %+v", h)
		}
	})
}

// TestDataLossProperties: quorum is lost for good exactly when fewer voters than a quorum keep their
// data; the lost members are voters; a voter whose claim is there (persistent storage) is never lost.
func TestDataLossProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := testutil.EtcdCluster("q")
		var claims []corev1.PersistentVolumeClaim
		for i := range rapid.IntRange(0, 7).Draw(rt, "members") {
			name := fmt.Sprintf("q-%d", i)
			role := rapid.SampledFrom([]etcdv1beta1.MemberRole{etcdv1beta1.RoleVoter, etcdv1beta1.RoleLearner}).Draw(rt, "role")
			c.Status.Members = append(c.Status.Members, etcdv1beta1.MemberStatus{Name: name, ID: fmt.Sprint(i + 1), Role: role})
			if rapid.Bool().Draw(rt, "claim") {
				claims = append(claims, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName(name)}})
			}
		}
		m := model.Build(model.Input{Cluster: c, Claims: claims})
		d := JudgeDataLoss(m)
		if d.Permanent() != (len(d.Voters) > 0 && len(d.Voters)-len(d.Lost) < membership.Quorum(len(d.Voters))) {
			rt.Fatalf("permanent %v for %d voters, %d lost", d.Permanent(), len(d.Voters), len(d.Lost))
		}
		for _, name := range d.Lost {
			if !slices.Contains(d.Voters, name) || m.Member(name).HasClaim() {
				rt.Fatalf("%s lost but not a voter, or its claim is there", name)
			}
		}
	})
}

// TestVolumesProperties: every claim not being deleted and smaller than the wanted size is expanded,
// growing or refused, and only one of those; a claim expanded now is bound and its class allows it.
func TestVolumesProperties(t *testing.T) {
	want := resource.MustParse("2Gi")
	rapid.Check(t, func(rt *rapid.T) {
		var claims []corev1.PersistentVolumeClaim
		for i := range rapid.IntRange(0, 5).Draw(rt, "claims") {
			pvc := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName(fmt.Sprintf("v-%d", i))}}
			pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(rapid.SampledFrom([]string{"1Gi", "2Gi", "3Gi"}).Draw(rt, "size"))}
			if class := rapid.SampledFrom([]string{"", "fast", "fixed"}).Draw(rt, "class"); class != "" {
				pvc.Spec.StorageClassName = ptr.To(class)
			}
			if rapid.Bool().Draw(rt, "bound") {
				pvc.Status.Phase = corev1.ClaimBound
			}
			claims = append(claims, pvc)
		}
		v := JudgeVolumes(model.Build(model.Input{Cluster: testutil.EtcdCluster("v"), Claims: claims}), want, map[string]bool{"fast": true})
		for _, pvc := range claims {
			req := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
			refused := slices.ContainsFunc(v.Refused, func(r string) bool {
				return r == pvc.Name || len(r) > len(pvc.Name) && r[:len(pvc.Name)+1] == pvc.Name+" "
			})
			growing := slices.Contains(v.Growing, pvc.Name)
			if req.Cmp(want) < 0 && refused == growing {
				rt.Fatalf("claim %s (%s) is refused=%v growing=%v", pvc.Name, req.String(), refused, growing)
			}
			expanded := slices.ContainsFunc(v.Expand, func(p *corev1.PersistentVolumeClaim) bool { return p.Name == pvc.Name })
			if expanded && (pvc.Status.Phase != corev1.ClaimBound || ptr.Deref(pvc.Spec.StorageClassName, "") != "fast" || !growing) {
				rt.Fatalf("claim %s expanded while unbound or not expandable", pvc.Name)
			}
		}
	})
}
