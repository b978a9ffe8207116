package observe

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

func TestAgreedLeader(t *testing.T) {
	st := map[uint64]etcd.EndpointStatus{1: {Leader: 2}, 2: {Leader: 2}, 3: {Leader: 3}, 4: {}}
	if got := AgreedLeader(st); got != 2 {
		t.Errorf("AgreedLeader = %d, want 2", got)
	}
	if AgreedLeader(map[uint64]etcd.EndpointStatus{1: {}}) != 0 {
		t.Errorf("no leader reported must give 0")
	}
}

// TestEndpointScheme: the operator dials a member in the scheme its client port serves; one that serves
// both (a switch of spec.tls under way) over https:// only when every member serves https://, so that
// one client never balances over endpoints of two schemes.
func TestEndpointScheme(t *testing.T) {
	c := testutil.EtcdCluster("e", testutil.WithTLS(true, false))
	pod := func(name, ip string, tt resources.PodTLS) corev1.Pod {
		p := resources.Options{}.BuildPod(c, resources.Member{Name: name, InitialClusterState: resources.StateNew, TLS: &tt})
		p.Status.PodIP = ip
		return *p
	}
	both, plain, secure := resources.PodTLS{ClientHTTP: true, ClientHTTPS: true}, resources.PodTLS{ClientHTTP: true}, resources.PodTLS{ClientHTTPS: true}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want string // of e-0
	}{
		{"all both", []corev1.Pod{pod("e-0", "10.0.0.1", both), pod("e-1", "10.0.0.2", both)}, "https://10.0.0.1:2379"},
		{"both and plain text", []corev1.Pod{pod("e-0", "10.0.0.1", both), pod("e-1", "10.0.0.2", plain)}, "http://10.0.0.1:2379"},
		{"both and TLS", []corev1.Pod{pod("e-0", "10.0.0.1", both), pod("e-1", "10.0.0.2", secure)}, "https://10.0.0.1:2379"},
		{"TLS only", []corev1.Pod{pod("e-0", "10.0.0.1", secure), pod("e-1", "10.0.0.2", plain)}, "https://10.0.0.1:2379"},
	} {
		m := model.Build(model.Input{Cluster: c, Pods: tc.pods})
		if got := Endpoint(m.Member("e-0").Pod, preferHTTPS(m)); got != tc.want {
			t.Errorf("%s: Endpoint(e-0) = %s, want %s", tc.name, got, tc.want)
		}
	}
}
