package resources

import (
	"errors"
	"testing"

	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestBuildNetworkPolicyNeedsTheOperatorsPods: without its own namespace and pod labels the operator
// builds no policy (it would shut itself out), and labels a controller sets per revision are never
// selected on (the next operator upgrade would be shut out).
func TestBuildNetworkPolicyNeedsTheOperatorsPods(t *testing.T) {
	c := testutil.EtcdCluster("demo", testutil.InNamespace("apps"))
	for _, o := range []Options{
		{},
		{OperatorNamespace: "ops"},
		{OperatorNamespace: "ops", OperatorPodLabels: map[string]string{"pod-template-hash": "abc"}},
		{OperatorPodLabels: map[string]string{"app": "op"}},
	} {
		if _, err := o.BuildNetworkPolicy(c); !errors.Is(err, ErrOperatorPodUnknown) {
			t.Errorf("options %+v: err %v, want ErrOperatorPodUnknown", o, err)
		}
	}
	o := Options{OperatorNamespace: "ops", OperatorPodLabels: map[string]string{"app": "op", "pod-template-hash": "abc"}}
	np, err := o.BuildNetworkPolicy(c)
	if err != nil {
		t.Fatal(err)
	}
	sel := np.Spec.Ingress[1].From[0].PodSelector.MatchLabels
	if len(sel) != 1 || sel["app"] != "op" {
		t.Errorf("operator pod selector %v, want app=op only", sel)
	}
	if users := np.Spec.Ingress[1].From[2:]; len(users) != 1 || users[0].PodSelector == nil || len(users[0].PodSelector.MatchLabels) != 0 ||
		users[0].NamespaceSelector != nil {
		t.Errorf("client sources without clientFrom: %+v, want every pod of the cluster's namespace", users)
	}
	if o.OperatorPodLabels["pod-template-hash"] != "abc" {
		t.Error("BuildNetworkPolicy changed the operator's labels in its options")
	}
}
