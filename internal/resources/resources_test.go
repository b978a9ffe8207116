package resources

import (
	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// cluster returns demo/ns1 (UID uid-1, 3 members, etcd 3.6.16) with opts applied.
func cluster(opts ...testutil.ClusterOption) *etcdv1beta1.EtcdCluster {
	base := []testutil.ClusterOption{
		testutil.InNamespace("ns1"),
		testutil.WithUID("uid-1"),
		testutil.WithReplicas(3),
		testutil.WithVersion("3.6.16"),
	}
	return testutil.EtcdCluster("demo", append(base, opts...)...)
}
