package metrics

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// observed is etcd's answer for members named name-0.. with IDs 1.., the leader by ID (0: none), the
// members in down not answering, and the given alarms.
func observed(name string, n int, leader uint64, down map[uint64]bool, alarms ...etcd.Alarm) *model.Etcd {
	e := &model.Etcd{ClusterID: 9, Leader: leader, Status: map[uint64]etcd.EndpointStatus{}, Health: map[uint64]error{}, Alarms: alarms}
	for i := range n {
		id := uint64(i + 1)
		e.Members = append(e.Members, etcd.Member{ID: id, Name: fmt.Sprintf("%s-%d", name, i)})
		if down[id] {
			e.Health[id] = errors.New("context deadline exceeded")
			continue
		}
		e.Health[id] = nil
		e.Status[id] = etcd.EndpointStatus{MemberID: id, Leader: leader, DBSizeBytes: int64(id) << 20, DBSizeInUseBytes: int64(id) << 19}
	}
	return e
}

func gauge(t *testing.T, v *prometheus.GaugeVec, labels ...string) float64 {
	t.Helper()
	return promtestutil.ToFloat64(v.WithLabelValues(labels...))
}

// series counts the series of collector c whose labels include namespace and cluster.
func series(t *testing.T, c prometheus.Collector, namespace, cluster string) int {
	t.Helper()
	ch := make(chan prometheus.Metric, 100)
	go func() { c.Collect(ch); close(ch) }()
	n := 0
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		have := map[string]string{}
		for _, l := range pb.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		if have["namespace"] == namespace && have["cluster"] == cluster {
			n++
		}
	}
	return n
}

// TestRecordPass: the gauges say what the model says; a leader change is counted once, a first leader
// not at all; a member that leaves loses its series; a pass that did not observe changes nothing; a
// cluster forgotten has no series left.
func TestRecordPass(t *testing.T) {
	c := testutil.EtcdCluster("rec", testutil.InNamespace("ns-rec"), testutil.WithReplicas(3), testutil.WithQuota("64Mi"))
	c.Status.Conditions = []metav1.Condition{
		{Type: etcdv1beta1.ConditionAvailable, Status: metav1.ConditionTrue},
		{Type: etcdv1beta1.ConditionDataInconsistent, Status: metav1.ConditionFalse},
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rec-0"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: resources.EtcdContainer, Command: []string{"etcd", "--quota-backend-bytes=1048576"}}}}}
	now := time.Unix(1_800_000_000, 0)
	RecordPass(model.Build(model.Input{Cluster: c, Etcd: observed("rec", 3, 2, nil), Pods: []corev1.Pod{*pod}, Now: now}), nil)

	for _, tc := range []struct {
		name string
		v    *prometheus.GaugeVec
		want float64
	}{{"desired", ClusterDesiredMembers, 3}, {"members", ClusterMembers, 3}, {"voters", ClusterVoters, 3},
		{"healthy voters", ClusterHealthyVoters, 3}, {"learners", ClusterLearners, 0}, {"quorum", ClusterQuorum, 2},
		{"has leader", ClusterHasLeader, 1}} {
		if got := gauge(t, tc.v, "ns-rec", "rec"); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := gauge(t, ClusterCondition, "ns-rec", "rec", "Available"); got != 1 {
		t.Errorf("Available condition = %v", got)
	}
	if got := gauge(t, ClusterCondition, "ns-rec", "rec", "DataInconsistent"); got != 0 {
		t.Errorf("DataInconsistent condition = %v", got)
	}
	if got := gauge(t, MemberLeader, "ns-rec", "rec", "rec-1"); got != 1 {
		t.Errorf("rec-1 leader = %v", got)
	}
	if got := gauge(t, MemberLeader, "ns-rec", "rec", "rec-0"); got != 0 {
		t.Errorf("rec-0 leader = %v", got)
	}
	// rec-0's pod runs with a 1 MiB quota, its database is 1 MiB; rec-2 has no pod: the spec's 64 MiB
	if got := gauge(t, MemberQuota, "ns-rec", "rec", "rec-0"); got != 1<<20 {
		t.Errorf("rec-0 quota = %v", got)
	}
	if got := gauge(t, MemberQuotaUsage, "ns-rec", "rec", "rec-0"); got != 1 {
		t.Errorf("rec-0 quota usage = %v", got)
	}
	if got := gauge(t, MemberQuota, "ns-rec", "rec", "rec-2"); got != 64<<20 {
		t.Errorf("rec-2 quota = %v", got)
	}
	if got := gauge(t, MemberDBSizeInUse, "ns-rec", "rec", "rec-2"); got != 3<<19 {
		t.Errorf("rec-2 in use = %v", got)
	}
	if got := promtestutil.ToFloat64(ClusterLeaderChanges.WithLabelValues("ns-rec", "rec")); got != 0 {
		t.Errorf("leader changes after the first look = %v", got)
	}
	if got := gauge(t, ClusterAlarm, "ns-rec", "rec", "NOSPACE"); got != 0 {
		t.Errorf("NOSPACE = %v", got)
	}

	// member 3 is down and leaves the leader's seat to member 1; NOSPACE is raised; a rollout restart
	e := observed("rec", 3, 1, map[uint64]bool{3: true}, etcd.Alarm{MemberID: 1, Type: etcd.AlarmNoSpace})
	RecordPass(model.Build(model.Input{Cluster: c, Etcd: e, Now: now}), verdict.Acting(etcdv1beta1.ReasonRollingUpdate, "restart"))
	if got := promtestutil.ToFloat64(ClusterLeaderChanges.WithLabelValues("ns-rec", "rec")); got != 1 {
		t.Errorf("leader changes = %v, want 1", got)
	}
	if got := gauge(t, ClusterHealthyVoters, "ns-rec", "rec"); got != 2 {
		t.Errorf("healthy voters = %v, want 2", got)
	}
	if got := gauge(t, MemberDownSince, "ns-rec", "rec", "rec-2"); got != float64(now.Unix()) {
		t.Errorf("rec-2 down since %v, want %d", got, now.Unix())
	}
	if got := gauge(t, ClusterAlarm, "ns-rec", "rec", "NOSPACE"); got != 1 {
		t.Errorf("NOSPACE = %v", got)
	}
	if got := promtestutil.ToFloat64(ClusterRolloutSteps.WithLabelValues("ns-rec", "rec", "restart")); got != 1 {
		t.Errorf("rollout restarts = %v", got)
	}
	if n := series(t, MemberDBSize, "ns-rec", "rec"); n != 2 {
		t.Errorf("%d db size series, want 2 (rec-2 does not answer)", n)
	}

	// a pass that stopped before observing: nothing changes (the leader stays 1, no change counted)
	RecordPass(model.Build(model.Input{Cluster: c, EtcdErr: model.ErrNotObserved}), nil)
	if got := gauge(t, ClusterHasLeader, "ns-rec", "rec"); got != 1 {
		t.Errorf("has leader after an unobserved pass = %v", got)
	}

	// scaled to 1: rec-1 and rec-2 lose their series; the same leader is no change; a condition
	// removed from the status loses its series
	c.Status.Conditions = c.Status.Conditions[:1]
	RecordPass(model.Build(model.Input{Cluster: c, Etcd: observed("rec", 1, 1, nil), Now: now}), nil)
	if n := series(t, MemberHealthy, "ns-rec", "rec"); n != 1 {
		t.Errorf("%d member health series after the scale-down, want 1", n)
	}
	if n := series(t, MemberDownSince, "ns-rec", "rec"); n != 0 {
		t.Errorf("%d down-since series after the scale-down, want 0", n)
	}
	if got := promtestutil.ToFloat64(ClusterLeaderChanges.WithLabelValues("ns-rec", "rec")); got != 1 {
		t.Errorf("leader changes = %v, want still 1", got)
	}
	if n := series(t, ClusterCondition, "ns-rec", "rec"); n != 1 {
		t.Errorf("%d condition series after DataInconsistent went from the status, want 1", n)
	}

	// membership calls are counted per cluster, and forgotten with it
	CountMembership("ns-rec", "rec", "add_learner", nil, false)
	CountMembership("ns-rec", "rec", "remove", etcd.ErrUnhealthyCluster, true)
	CountMembership("ns-other", "rec", "add_learner", nil, false)
	if got := promtestutil.ToFloat64(MembershipOperations.WithLabelValues("ns-rec", "rec", "remove", "retry")); got != 1 {
		t.Errorf("remove retries = %v, want 1", got)
	}
	if n := series(t, MembershipOperations, "ns-rec", "rec"); n != 2 {
		t.Errorf("%d membership series of ns-rec/rec, want 2", n)
	}

	ForgetCluster("ns-rec", "rec")
	if n := series(t, MembershipOperations, "ns-rec", "rec"); n != 0 {
		t.Errorf("%d membership series of ns-rec/rec left after ForgetCluster", n)
	}
	if n := series(t, MembershipOperations, "ns-other", "rec"); n != 1 {
		t.Errorf("%d membership series of ns-other/rec after forgetting ns-rec/rec, want 1", n)
	}
	ForgetCluster("ns-other", "rec")
	for _, v := range clusterVecs {
		if n := series(t, v, "ns-rec", "rec"); n != 0 {
			t.Errorf("%d series left after ForgetCluster", n)
		}
	}
}
