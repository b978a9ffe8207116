package resources

import (
	"testing"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

func TestURLsAndNames(t *testing.T) {
	c := cluster()
	o := Options{}
	if got, want := o.PeerURL(c, "demo-1"), "http://demo-1.demo-peer.ns1.svc.cluster.local:2380"; got != want {
		t.Errorf("PeerURL = %q, want %q", got, want)
	}
	if got, want := (Options{ClusterDomain: "k8s.example"}).ClientURL(c, "demo-0"), "http://demo-0.demo-peer.ns1.svc.k8s.example:2379"; got != want {
		t.Errorf("ClientURL = %q, want %q", got, want)
	}
	if got, want := o.InitialCluster(c, []string{"demo-0", "demo-1"}),
		"demo-0=http://demo-0.demo-peer.ns1.svc.cluster.local:2380,demo-1=http://demo-1.demo-peer.ns1.svc.cluster.local:2380"; got != want {
		t.Errorf("InitialCluster = %q, want %q", got, want)
	}
	if got := PVCName("demo-2"); got != "data-demo-2" {
		t.Errorf("PVCName = %q", got)
	}
}

func TestMemberOrdinal(t *testing.T) {
	c := cluster()
	for name, want := range map[string]int{"demo-0": 0, "demo-7": 7, "demo-12": 12} {
		if got, ok := MemberOrdinal(c, name); !ok || got != want {
			t.Errorf("MemberOrdinal(%q) = %d, %v; want %d, true", name, got, ok, want)
		}
	}
	for _, name := range []string{"demo", "demo-", "demo-01", "demo-x", "demo-1-2", "other-1", "demo--1"} {
		if got, ok := MemberOrdinal(c, name); ok {
			t.Errorf("MemberOrdinal(%q) = %d, true; want false", name, got)
		}
	}
}

func TestImage(t *testing.T) {
	o := Options{}
	if got := o.Image(cluster()); got != "gcr.io/etcd-development/etcd:v3.6.16" {
		t.Errorf("default image = %q", got)
	}
	if got := (Options{ImageRepository: "mirror/etcd"}).Image(cluster(func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = "3.5.21" })); got != "mirror/etcd:v3.5.21" {
		t.Errorf("repository image = %q", got)
	}
	if got := o.Image(cluster(func(c *etcdv1beta1.EtcdCluster) { c.Spec.Image = "my/etcd:custom" })); got != "my/etcd:custom" {
		t.Errorf("override image = %q", got)
	}
}
