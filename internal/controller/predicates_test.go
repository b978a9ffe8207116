package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestOnlyLoadChanged: a status write that changes only the revision and the members' database sizes
// starts no pass; any other change does.
func TestOnlyLoadChanged(t *testing.T) {
	base := testutil.EtcdCluster("demo")
	base.Generation = 3
	base.Status = etcdv1beta1.EtcdClusterStatus{Phase: etcdv1beta1.PhaseRunning, Revision: 10,
		Members: []etcdv1beta1.MemberStatus{{Name: "demo-0", DBSizeBytes: 20480, Healthy: true}}}
	for _, tc := range []struct {
		name   string
		change func(*etcdv1beta1.EtcdCluster)
		only   bool
	}{
		{"revision and database size", func(c *etcdv1beta1.EtcdCluster) {
			c.Status.Revision = 11
			c.Status.Members[0].DBSizeBytes = 24576
			c.ResourceVersion = "99"
		}, true},
		{"a member's health", func(c *etcdv1beta1.EtcdCluster) { c.Status.Members[0].Healthy = false }, false},
		{"the phase", func(c *etcdv1beta1.EtcdCluster) { c.Status.Phase = etcdv1beta1.PhaseScaling }, false},
		{"a condition", func(c *etcdv1beta1.EtcdCluster) {
			c.Status.Conditions = []metav1.Condition{{Type: etcdv1beta1.ConditionProgressing, Status: metav1.ConditionTrue}}
		}, false},
		{"the spec", func(c *etcdv1beta1.EtcdCluster) { c.Generation = 4 }, false},
		{"an annotation", func(c *etcdv1beta1.EtcdCluster) { c.Annotations = map[string]string{"a": "b"} }, false},
		{"deletion", func(c *etcdv1beta1.EtcdCluster) { now := metav1.Now(); c.DeletionTimestamp = &now }, false},
	} {
		n := base.DeepCopy()
		tc.change(n)
		if got := onlyLoadChanged(base, n); got != tc.only {
			t.Errorf("%s: onlyLoadChanged = %v, want %v", tc.name, got, tc.only)
		}
	}
}
