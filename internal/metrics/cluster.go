package metrics

import (
	"errors"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// The per-cluster and per-member series, all taken from what a pass of the EtcdCluster reconciler
// observed (its model.Cluster and the status it computed), never from calls of their own. Cluster
// series carry the labels namespace and cluster; member series also member (the member's name, which
// is its pod's name).
var (
	clusterLabels = []string{"namespace", "cluster"}
	memberLabels  = []string{"namespace", "cluster", "member"}

	// ClusterDesiredMembers is spec.replicas, the number of voting members the spec asks for.
	ClusterDesiredMembers = clusterGauge("etcd_operator_cluster_desired_members",
		"Voting members the cluster's spec asks for (spec.replicas).")
	// ClusterMembers is the number of members etcd lists (when no member answered: that the status
	// last listed), voters and learners.
	ClusterMembers = clusterGauge("etcd_operator_cluster_members",
		"Members of the cluster, voters and learners, as etcd lists them (as the status last listed them when no member answered).")
	// ClusterVoters is the number of voting members.
	ClusterVoters = clusterGauge("etcd_operator_cluster_voters", "Voting members of the cluster.")
	// ClusterHealthyVoters is the number of voting members that answered a linearizable read
	// without alarm in the last pass.
	ClusterHealthyVoters = clusterGauge("etcd_operator_cluster_healthy_voters",
		"Voting members that answered a linearizable read without an alarm in the operator's last look.")
	// ClusterLearners is the number of learners (members being added, not voting yet).
	ClusterLearners = clusterGauge("etcd_operator_cluster_learners", "Learners of the cluster (members being added).")
	// ClusterQuorum is how many healthy voters the cluster needs to commit: voters/2+1.
	ClusterQuorum = clusterGauge("etcd_operator_cluster_quorum",
		"Healthy voters the cluster needs to commit writes (voters/2+1).")
	// ClusterHasLeader is 1 while etcd reports a leader, else 0.
	ClusterHasLeader = clusterGauge("etcd_operator_cluster_has_leader",
		"1 when the members agree on a leader, 0 when none is reported or no member answered.")
	// ClusterLeaderChanges counts the changes of leader the operator saw between two of its looks
	// (a leader ID other than the last one seen; several elections between two looks count once).
	ClusterLeaderChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcd_operator_cluster_leader_changes_total",
		Help: "Changes of the cluster's leader the operator observed between two of its looks at the cluster.",
	}, clusterLabels)
	// ClusterAlarm is 1 while etcd has raised the alarm (NOSPACE or CORRUPT) for any member, else 0;
	// absent while the alarms could not be listed.
	ClusterAlarm = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_operator_cluster_alarm",
		Help: "1 while etcd has raised the alarm (NOSPACE, CORRUPT) for any member of the cluster, else 0.",
	}, []string{"namespace", "cluster", "alarm"})
	// ClusterCondition is 1 while the EtcdCluster's condition is True, 0 while it is False or
	// Unknown; condition is the condition type (Available, Degraded, DataInconsistent, BackupFailing, ...).
	ClusterCondition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcd_operator_cluster_condition",
		Help: "1 while the EtcdCluster's status condition is True, 0 while it is False or Unknown, by condition type.",
	}, []string{"namespace", "cluster", "condition"})
	// ClusterRolloutSteps counts the steps of rolling changes the operator took, by step: restart (a
	// member's pod evicted or deleted, to be recreated with the current spec) and move_leader
	// (leadership moved off a member before its restart or peer URL switch).
	ClusterRolloutSteps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "etcd_operator_cluster_rollout_steps_total",
		Help: "Steps of rolling changes taken on the cluster, by step (restart, move_leader).",
	}, []string{"namespace", "cluster", "step"})

	// MemberVoter is 1 for a voting member, 0 for a learner.
	MemberVoter = memberGauge("etcd_operator_member_voter", "1 for a voting member, 0 for a learner.")
	// MemberHealthy is 1 while the member answered a linearizable read (a learner: its status)
	// without alarm in the last pass, else 0.
	MemberHealthy = memberGauge("etcd_operator_member_healthy",
		"1 when the member answered a linearizable read (a learner: its status) without an alarm in the operator's last look, else 0.")
	// MemberLeader is 1 for the member etcd reports as leader, 0 for the others.
	MemberLeader = memberGauge("etcd_operator_member_leader", "1 for the member the cluster reports as its leader, else 0.")
	// MemberDBSize is the physically allocated size of the member's backend database, in bytes;
	// absent while the member does not answer.
	MemberDBSize = memberGauge("etcd_operator_member_db_size_bytes",
		"Allocated size of the member's backend database, in bytes, as the member last reported it.")
	// MemberDBSizeInUse is the logically used part of the member's database, in bytes (the rest is
	// reclaimed by a defragmentation); absent while the member does not answer.
	MemberDBSizeInUse = memberGauge("etcd_operator_member_db_size_in_use_bytes",
		"Logically used part of the member's backend database, in bytes, as the member last reported it.")
	// MemberQuota is the member's --quota-backend-bytes: the database size at which etcd raises
	// NOSPACE, in bytes.
	MemberQuota = memberGauge("etcd_operator_member_quota_backend_bytes",
		"The member's backend quota (--quota-backend-bytes), in bytes: at this database size etcd raises the NOSPACE alarm.")
	// MemberQuotaUsage is MemberDBSize divided by MemberQuota (0 to 1, above 1 past the quota).
	MemberQuotaUsage = memberGauge("etcd_operator_member_db_quota_usage_ratio",
		"The member's database size divided by its backend quota (1 is the quota).")
	// MemberDownSince is when the member went down (see model.Member.DownSince), in seconds since
	// the epoch; absent while it is not down. time() minus it is how long it has been down.
	MemberDownSince = memberGauge("etcd_operator_member_down_since_timestamp_seconds",
		"When the member stopped serving (pod not Ready, not answering, or an alarm other than NOSPACE), in seconds since the Unix epoch; absent while it serves.")
)

func clusterGauge(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, clusterLabels)
}

func memberGauge(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, memberLabels)
}

// clusterVecs are the per-cluster series ForgetCluster removes: every vector with the labels
// namespace and cluster.
var clusterVecs = []*prometheus.MetricVec{
	ClusterDesiredMembers.MetricVec, ClusterMembers.MetricVec, ClusterVoters.MetricVec, ClusterHealthyVoters.MetricVec,
	ClusterLearners.MetricVec, ClusterQuorum.MetricVec, ClusterHasLeader.MetricVec, ClusterLeaderChanges.MetricVec,
	ClusterAlarm.MetricVec, ClusterCondition.MetricVec, ClusterRolloutSteps.MetricVec,
	MemberVoter.MetricVec, MemberHealthy.MetricVec, MemberLeader.MetricVec, MemberDBSize.MetricVec,
	MemberDBSizeInUse.MetricVec, MemberQuota.MetricVec, MemberQuotaUsage.MetricVec, MemberDownSince.MetricVec,
	BackupDuration.MetricVec, BackupSize.MetricVec, BackupLastSuccess.MetricVec, BackupFailures.MetricVec,
	CertificateNotAfter.MetricVec, MembershipOperations.MetricVec,
}

func init() {
	crmetrics.Registry.MustRegister(
		ClusterDesiredMembers, ClusterMembers, ClusterVoters, ClusterHealthyVoters, ClusterLearners, ClusterQuorum,
		ClusterHasLeader, ClusterLeaderChanges, ClusterAlarm, ClusterCondition, ClusterRolloutSteps,
		MemberVoter, MemberHealthy, MemberLeader, MemberDBSize, MemberDBSizeInUse, MemberQuota, MemberQuotaUsage,
		MemberDownSince,
	)
}

// seen is what earlier passes recorded of one cluster: the last leader ID seen (0: none yet), and the
// members and conditions that have series.
type seen struct {
	leader     uint64
	members    map[string]bool
	conditions map[string]bool
}

var (
	seenMu sync.Mutex
	// seenByCluster is keyed by "<namespace>/<name>".
	seenByCluster = map[string]*seen{}
)

// RecordPass sets the series of the cluster m.Object from what one pass observed: the model m, the
// status the pass computed into m.Object (its conditions), and the step st the pass took (nil: none).
// A pass that stopped before observing (model.ErrNotObserved) changes nothing but the rollout steps.
// Series of members no longer in the model are removed. Safe for concurrent passes of different
// clusters; passes of one cluster must not overlap (controller-runtime never runs them so).
func RecordPass(m *model.Cluster, st *verdict.Step) {
	c := m.Object
	ns, name := c.Namespace, c.Name
	countRolloutStep(ns, name, st)
	if errors.Is(m.EtcdErr, model.ErrNotObserved) {
		return
	}
	ClusterDesiredMembers.WithLabelValues(ns, name).Set(float64(m.Desired))
	ClusterMembers.WithLabelValues(ns, name).Set(float64(len(m.Registered())))
	ClusterVoters.WithLabelValues(ns, name).Set(float64(m.Voters()))
	ClusterHealthyVoters.WithLabelValues(ns, name).Set(float64(m.HealthyVoters()))
	ClusterLearners.WithLabelValues(ns, name).Set(float64(m.Learners()))
	ClusterQuorum.WithLabelValues(ns, name).Set(float64(m.Quorum()))
	leader := m.Leader()
	ClusterHasLeader.WithLabelValues(ns, name).Set(boolValue(leader != nil))
	recordAlarms(m)

	seenMu.Lock()
	defer seenMu.Unlock()
	s := seenByCluster[ns+"/"+name]
	if s == nil {
		s = &seen{}
		seenByCluster[ns+"/"+name] = s
	}
	s.conditions = recordConditions(c, s.conditions)
	changes := ClusterLeaderChanges.WithLabelValues(ns, name) // at 0 from the first look on
	if leader != nil {
		if s.leader != 0 && s.leader != leader.ID() {
			changes.Inc()
		}
		s.leader = leader.ID()
	}
	now := map[string]bool{}
	for _, mem := range m.Registered() {
		now[mem.Name] = true
		recordMember(m, mem, leader)
	}
	for gone := range s.members {
		if !now[gone] {
			forgetMember(ns, name, gone)
		}
	}
	s.members = now
}

// recordConditions sets etcd_operator_cluster_condition for each condition of c's status, removes
// the series of those in before that the status no longer has, and returns the conditions set.
func recordConditions(c *etcdv1beta1.EtcdCluster, before map[string]bool) map[string]bool {
	now := map[string]bool{}
	for _, cond := range c.Status.Conditions {
		now[cond.Type] = true
		ClusterCondition.WithLabelValues(c.Namespace, c.Name, cond.Type).Set(boolValue(cond.Status == metav1.ConditionTrue))
	}
	for gone := range before {
		if !now[gone] { // removed from the status (BackupFailing without a schedule, ...)
			ClusterCondition.DeleteLabelValues(c.Namespace, c.Name, gone)
		}
	}
	return now
}

// recordMember sets the series of one member of m; leader is m's leader (nil: none).
func recordMember(m *model.Cluster, mem *model.Member, leader *model.Member) {
	l := []string{m.Object.Namespace, m.Object.Name, mem.Name}
	MemberVoter.WithLabelValues(l...).Set(boolValue(mem.Voter()))
	MemberHealthy.WithLabelValues(l...).Set(boolValue(mem.Healthy()))
	MemberLeader.WithLabelValues(l...).Set(boolValue(leader != nil && leader.Name == mem.Name))
	quota := memberQuota(m.Object, mem)
	MemberQuota.WithLabelValues(l...).Set(float64(quota))
	if st := mem.Status; st != nil {
		MemberDBSize.WithLabelValues(l...).Set(float64(st.DBSizeBytes))
		MemberDBSizeInUse.WithLabelValues(l...).Set(float64(st.DBSizeInUseBytes))
		MemberQuotaUsage.WithLabelValues(l...).Set(float64(st.DBSizeBytes) / float64(quota))
	} else {
		MemberDBSize.DeleteLabelValues(l...)
		MemberDBSizeInUse.DeleteLabelValues(l...)
		MemberQuotaUsage.DeleteLabelValues(l...)
	}
	since := mem.DownSince
	if !m.Answered() && mem.Recorded != nil && mem.Recorded.DownSince != nil {
		since = mem.Recorded.DownSince.Time // no member answered: the status keeps when it went down
	}
	if since.IsZero() {
		MemberDownSince.DeleteLabelValues(l...)
	} else {
		MemberDownSince.WithLabelValues(l...).Set(float64(since.Unix()))
	}
}

// memberQuota returns the backend quota the member runs with, in bytes: its pod's
// --quota-backend-bytes, etcd's default when the pod sets none, and the spec's when it has no pod.
func memberQuota(c *etcdv1beta1.EtcdCluster, mem *model.Member) int64 {
	if mem.Pod == nil {
		return resources.QuotaBackendBytes(c)
	}
	if q, err := strconv.ParseInt(mem.PodFlag("quota-backend-bytes"), 10, 64); err == nil && q > 0 {
		return q
	}
	return resources.DefaultQuotaBackendBytes
}

// recordAlarms sets etcd_operator_cluster_alarm for NOSPACE and CORRUPT, or removes it when the alarms
// are not known in this pass.
func recordAlarms(m *model.Cluster) {
	ns, name := m.Object.Namespace, m.Object.Name
	for _, alarm := range []string{etcd.AlarmNoSpace, etcd.AlarmCorrupt} {
		if m.Etcd == nil || m.Etcd.AlarmsErr != nil {
			ClusterAlarm.DeleteLabelValues(ns, name, alarm)
			continue
		}
		raised := false
		for _, a := range m.Etcd.Alarms {
			raised = raised || a.Type == alarm
		}
		ClusterAlarm.WithLabelValues(ns, name, alarm).Set(boolValue(raised))
	}
}

// countRolloutStep counts the rollout step st, when it is one: a member restarted or leadership moved.
func countRolloutStep(namespace, cluster string, st *verdict.Step) {
	if st == nil || st.Kind != verdict.KindActing {
		return
	}
	switch st.Reason {
	case etcdv1beta1.ReasonRollingUpdate:
		ClusterRolloutSteps.WithLabelValues(namespace, cluster, "restart").Inc()
	case etcdv1beta1.ReasonMovingLeader:
		ClusterRolloutSteps.WithLabelValues(namespace, cluster, "move_leader").Inc()
	}
}

// forgetMember removes the series of one member.
func forgetMember(namespace, cluster, member string) {
	l := prometheus.Labels{"namespace": namespace, "cluster": cluster, "member": member}
	for _, v := range []*prometheus.GaugeVec{MemberVoter, MemberHealthy, MemberLeader, MemberDBSize, MemberDBSizeInUse,
		MemberQuota, MemberQuotaUsage, MemberDownSince} {
		v.DeletePartialMatch(l)
	}
}

// ForgetCluster removes every series of the cluster namespace/name (its members', backups',
// certificates' and membership calls' included) and what earlier passes remembered of it, once it is deleted.
func ForgetCluster(namespace, name string) {
	for _, v := range clusterVecs {
		v.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "cluster": name})
	}
	seenMu.Lock()
	delete(seenByCluster, namespace+"/"+name)
	seenMu.Unlock()
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
