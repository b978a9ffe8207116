package resources

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// ClusterOfLabels maps an object to the EtcdCluster its cluster label (etcd.etcdkit.dev/cluster) names,
// in its namespace: the request a watch of member pods and claims enqueues.
func ClusterOfLabels(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[etcdv1beta1.LabelCluster]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// ClusterOfBackup maps an EtcdBackup to the EtcdCluster it backs up (spec.clusterRef).
func ClusterOfBackup(_ context.Context, o client.Object) []reconcile.Request {
	b, ok := o.(*etcdv1beta1.EtcdBackup)
	if !ok || b.Spec.ClusterRef.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.ClusterRef.Name}}}
}
