package verdict

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestRequeue: a pass looks again after the delay of what it did (acting, blocked, a settled or a
// degraded cluster), or sooner when its step asks (a membership change made, after which the next one
// may be possible at once); a step asking for later than its kind's delay does not delay the pass.
func TestRequeue(t *testing.T) {
	settled := testutil.EtcdCluster("c")
	settled.Status.Conditions = []metav1.Condition{{Type: etcdv1beta1.ConditionDegraded, Status: metav1.ConditionFalse}}
	degraded := testutil.EtcdCluster("c")
	hour := time.Hour
	for _, tt := range []struct {
		name string
		c    *etcdv1beta1.EtcdCluster
		st   *Step
		want time.Duration
	}{
		{"settled", settled, nil, hour},
		{"degraded", degraded, nil, RequeueUnhealthy},
		{"acting", settled, Acting(etcdv1beta1.ReasonWaiting, "x"), RequeueProgressing},
		{"blocked", settled, Blocked(etcdv1beta1.ReasonWaiting, "x"), RequeueBlocked},
		{"a learner promoted", settled, Acting(etcdv1beta1.ReasonPromotingLearner, "x").Within(RequeueChanged), RequeueChanged},
		{"a step asking for later than its kind", settled, Acting(etcdv1beta1.ReasonWaiting, "x").Within(time.Minute), RequeueProgressing},
		{"waiting for a pod update", settled, &Step{Kind: KindActing, Watched: true}, RequeueWatched},
		{"waiting for a pod update, a degraded cluster", degraded, &Step{Kind: KindActing, Watched: true}, RequeueWatched},
		{"waiting for a pod update, sooner asked", settled, &Step{Kind: KindActing, Watched: true, After: RequeueRetry}, RequeueRetry},
	} {
		if got := Requeue(tt.c, &Report{}, tt.st, hour); got != tt.want {
			t.Errorf("%s: Requeue = %s; want %s", tt.name, got, tt.want)
		}
	}
}
