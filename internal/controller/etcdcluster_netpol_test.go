package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// allows reports whether ingress rule r of a NetworkPolicy in namespace ns lets a pod with labels
// podLabels in namespace from (labelled as the API server labels namespaces) reach port.
func allows(r networkingv1.NetworkPolicyIngressRule, port int32, from string, podLabels map[string]string, ns string) bool {
	if len(r.Ports) != 1 || r.Ports[0].Port.IntVal != port {
		return false
	}
	if len(r.From) == 0 {
		return true
	}
	for _, p := range r.From {
		nsOK := from == ns
		if p.NamespaceSelector != nil {
			sel, _ := metav1.LabelSelectorAsSelector(p.NamespaceSelector)
			nsOK = sel.Matches(labels.Set{corev1.LabelMetadataName: from})
		}
		podOK := p.PodSelector == nil
		if p.PodSelector != nil {
			sel, _ := metav1.LabelSelectorAsSelector(p.PodSelector)
			podOK = sel.Matches(labels.Set(podLabels))
		}
		if nsOK && podOK && p.IPBlock == nil {
			return true
		}
	}
	return false
}

// TestNetworkPolicyKept: with spec.networkPolicy enabled, the cluster's NetworkPolicy selects its
// member pods (as created) and lets through, on the peer port, only the members and the operator; on the client port,
// only the operator's pods (whatever their revision), the pods of the cluster's backup Jobs and the
// listed sources; on the metrics port, everyone. A policy edited by hand is put back; disabling deletes
// it.
func TestNetworkPolicyKept(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-netpol"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	c := testutil.EtcdCluster("np", testutil.InNamespace(ns.Name), testutil.WithReplicas(1))
	c.Spec.NetworkPolicy = &etcdv1beta1.NetworkPolicySpec{Enabled: true, ClientFrom: []networkingv1.NetworkPolicyPeer{
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "apps"}}}}}
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	retireAtEnd(t, c)
	np := &networkingv1.NetworkPolicy{}
	key := client.ObjectKey{Namespace: ns.Name, Name: "np-etcd"}
	testutil.Eventually(t, waitTimeout, "NetworkPolicy np-etcd and member np-0", func(ctx context.Context) error {
		if err := k8s.Get(ctx, key, np); err != nil {
			return err
		}
		_, err := getPod(c, "np-0")
		return err
	})
	if !metav1.IsControlledBy(np, getCluster(t, c)) {
		t.Error("the NetworkPolicy is not owned by the cluster")
	}
	member, _ := getPod(c, "np-0")
	if sel, _ := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); !sel.Matches(labels.Set(member.Labels)) {
		t.Fatalf("the policy's pod selector %v does not select member pod labels %v", np.Spec.PodSelector, member.Labels)
	}
	if len(np.Spec.Ingress) != 3 {
		t.Fatalf("ingress rules %+v, want peer, client and metrics", np.Spec.Ingress)
	}
	peer, cli, metrics := np.Spec.Ingress[0], np.Spec.Ingress[1], np.Spec.Ingress[2]
	operator := map[string]string{"app.kubernetes.io/name": "etcd-operator", "pod-template-hash": "another-revision"}
	backup := resources.BackupLabels(c.Name, &etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}})
	other := map[string]string{"app": "curious"}
	for _, tc := range []struct {
		what   string
		rule   networkingv1.NetworkPolicyIngressRule
		port   int32
		from   string
		labels map[string]string
		want   bool
	}{
		{"a member to the peer port", peer, 2380, ns.Name, member.Labels, true},
		{"the operator to the peer port (it reads the served certificate during a CA rotation)", peer, 2380, testOperatorNamespace, operator, true},
		{"a backup Job's pod to the peer port", peer, 2380, ns.Name, backup, false},
		{"another pod to the peer port", peer, 2380, ns.Name, other, false},
		{"the operator (another revision) to the client port", cli, 2379, testOperatorNamespace, operator, true},
		{"operator-like pod in another namespace to the client port", cli, 2379, "elsewhere", operator, false},
		{"a backup Job's pod to the client port", cli, 2379, ns.Name, backup, true},
		{"a pod of the listed namespace to the client port", cli, 2379, "apps", other, true},
		{"another pod to the client port", cli, 2379, ns.Name, other, false},
		{"anyone to the metrics port", metrics, 2381, "elsewhere", other, true},
	} {
		if got := allows(tc.rule, tc.port, tc.from, tc.labels, ns.Name); got != tc.want {
			t.Errorf("%s: allowed %v, want %v", tc.what, got, tc.want)
		}
	}

	// an edit by hand is put back
	np.Spec.Ingress = nil
	if err := k8s.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the edited NetworkPolicy put back", func(ctx context.Context) error {
		if err := k8s.Get(ctx, key, np); err != nil {
			return err
		}
		if len(np.Spec.Ingress) != 3 {
			return fmt.Errorf("%d ingress rules", len(np.Spec.Ingress))
		}
		return nil
	})

	// disabled: deleted
	got := getCluster(t, c)
	got.Spec.NetworkPolicy.Enabled = false
	if err := k8s.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the NetworkPolicy deleted once disabled", func(ctx context.Context) error {
		if err := k8s.Get(ctx, key, &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
			return errors.Join(errors.New("still there"), err)
		}
		return nil
	})
}
