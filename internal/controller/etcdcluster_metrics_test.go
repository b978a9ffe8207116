package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// clusterSeries gathers the operator's registry and returns the value of every series of cluster
// namespace/name, keyed "<metric>" or "<metric>{<member or other label>}" (one label besides namespace
// and cluster at most). Reading the registry, unlike WithLabelValues, never creates a series.
func clusterSeries(t *testing.T, namespace, name string) map[string]float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var ns, cl string
			var extra []string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "namespace":
					ns = l.GetValue()
				case "cluster":
					cl = l.GetValue()
				default:
					extra = append(extra, l.GetValue())
				}
			}
			if ns != namespace || cl != name {
				continue
			}
			key := f.GetName()
			if len(extra) > 0 {
				key += "{" + strings.Join(extra, ",") + "}"
			}
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			default:
				out[key] = 1
			}
		}
	}
	return out
}

// TestClusterMetrics: once a 3-member cluster of real etcd members is Available, the operator's
// gauges say 3 healthy voters, a quorum of 2, one leader (the member the status names) and each
// member's database size against the default quota; a leader moved in etcd is counted as one leader
// change; once the cluster is deleted, none of its series is left.
func TestClusterMetrics(t *testing.T) {
	c := createCluster(t, "metr", 3)
	names := []string{"metr-0", "metr-1", "metr-2"}
	hosts := []string{"127.0.3.11", "127.0.3.12", "127.0.3.13"}
	members := testenv.StartEtcd(t, names, hosts)
	runPods(t, c, map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]})
	testutil.Eventually(t, waitTimeout, "Available with 3 ready voters", func(context.Context) error {
		c = getCluster(t, c)
		if a := condition(c, etcdv1beta1.ConditionAvailable); a == nil || a.Status != "True" || c.Status.ReadyReplicas != 3 {
			return fmt.Errorf("available %+v, ready %d", a, c.Status.ReadyReplicas)
		}
		return nil
	})

	got := clusterSeries(t, c.Namespace, c.Name)
	for metric, want := range map[string]float64{
		"etcd_operator_cluster_desired_members": 3, "etcd_operator_cluster_members": 3, "etcd_operator_cluster_voters": 3,
		"etcd_operator_cluster_healthy_voters": 3, "etcd_operator_cluster_learners": 0, "etcd_operator_cluster_quorum": 2,
		"etcd_operator_cluster_has_leader": 1, "etcd_operator_cluster_leader_changes_total": 0,
		"etcd_operator_cluster_condition{Available}": 1, "etcd_operator_cluster_condition{Degraded}": 0,
		"etcd_operator_cluster_alarm{NOSPACE}": 0, "etcd_operator_cluster_alarm{CORRUPT}": 0,
	} {
		if v, ok := got[metric]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", metric, v, ok, want)
		}
	}
	leaders := 0
	for _, n := range names {
		if got["etcd_operator_member_voter{"+n+"}"] != 1 || got["etcd_operator_member_healthy{"+n+"}"] != 1 {
			t.Errorf("member %s: voter %v healthy %v", n, got["etcd_operator_member_voter{"+n+"}"], got["etcd_operator_member_healthy{"+n+"}"])
		}
		if got["etcd_operator_member_leader{"+n+"}"] == 1 {
			leaders++
			if c.Status.Leader != n {
				t.Errorf("metrics say %s leads, the status %s", n, c.Status.Leader)
			}
		}
		size, inUse, quota := got["etcd_operator_member_db_size_bytes{"+n+"}"], got["etcd_operator_member_db_size_in_use_bytes{"+n+"}"], got["etcd_operator_member_quota_backend_bytes{"+n+"}"]
		if size <= 0 || inUse <= 0 || inUse > size || quota != float64(resources.DefaultQuotaBackendBytes) {
			t.Errorf("member %s: db size %v, in use %v, quota %v", n, size, inUse, quota)
		}
		if ratio := got["etcd_operator_member_db_quota_usage_ratio{"+n+"}"]; ratio != size/quota {
			t.Errorf("member %s: quota usage %v, want %v", n, ratio, size/quota)
		}
		if _, ok := got["etcd_operator_member_down_since_timestamp_seconds{"+n+"}"]; ok {
			t.Errorf("member %s has a down-since series while healthy", n)
		}
	}
	if leaders != 1 {
		t.Errorf("%d members marked leader", leaders)
	}

	// Move leadership to a follower, as a rollout does: the next pass counts one change.
	var lead, to uint64
	for _, m := range members {
		if id := uint64(m.Etcd.Server.MemberID()); id == uint64(m.Etcd.Server.Leader()) {
			lead = id
		} else {
			to = id
		}
	}
	for _, m := range members {
		if uint64(m.Etcd.Server.MemberID()) == lead {
			if err := m.Etcd.Server.MoveLeader(context.Background(), lead, to); err != nil {
				t.Fatalf("move leader: %v", err)
			}
		}
	}
	testutil.Eventually(t, waitTimeout, "leader change counted", func(context.Context) error {
		if v := clusterSeries(t, c.Namespace, c.Name)["etcd_operator_cluster_leader_changes_total"]; v != 1 {
			return fmt.Errorf("leader changes %v", v)
		}
		return nil
	})

	if err := k8s.Delete(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "cluster gone, and its series", func(context.Context) error {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), &etcdv1beta1.EtcdCluster{})
		if !apierrors.IsNotFound(err) {
			return errors.New("cluster still there")
		}
		if left := clusterSeries(t, c.Namespace, c.Name); len(left) > 0 {
			keys := make([]string, 0, len(left))
			for k := range left {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return fmt.Errorf("series left: %v", keys)
		}
		return nil
	})
}
