package controller

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// notOnlyLoad drops the update events of an EtcdCluster whose only change is what etcd's client load
// moves: status.revision and the members' database sizes. A pass writes them as it reads them; were
// its own write to start the next pass, a cluster whose clients keep writing would be passed over and
// its status written again at once, pass after pass (about 10 API writes a second). Every other
// change, a status change included (a pass's next step often follows at once), still starts a pass;
// the load figures are written by the passes that run anyway (at least once per health check).
func notOnlyLoad() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*etcdv1beta1.EtcdCluster)
		n, ok2 := e.ObjectNew.(*etcdv1beta1.EtcdCluster)
		if !ok1 || !ok2 {
			return true
		}
		return !onlyLoadChanged(o, n)
	}}
}

// onlyLoadChanged reports whether old and new differ only in status.revision and the members' database
// sizes (and in what every write changes: resourceVersion, managedFields).
func onlyLoadChanged(old, new *etcdv1beta1.EtcdCluster) bool {
	if old.Generation != new.Generation || !equality.Semantic.DeepEqual(old.Labels, new.Labels) ||
		!equality.Semantic.DeepEqual(old.Annotations, new.Annotations) || !equality.Semantic.DeepEqual(old.Finalizers, new.Finalizers) ||
		!equality.Semantic.DeepEqual(old.DeletionTimestamp, new.DeletionTimestamp) || !equality.Semantic.DeepEqual(old.OwnerReferences, new.OwnerReferences) {
		return false
	}
	a, b := withoutLoad(&old.Status), withoutLoad(&new.Status)
	return equality.Semantic.DeepEqual(a, b)
}

// withoutLoad returns a copy of st without the figures client load moves.
func withoutLoad(st *etcdv1beta1.EtcdClusterStatus) *etcdv1beta1.EtcdClusterStatus {
	out := st.DeepCopy()
	out.Revision = 0
	for i := range out.Members {
		out.Members[i].DBSizeBytes = 0
	}
	return out
}

// deletedOnly passes only deletions: a ControllerRevision someone else deleted is made again at once,
// with the copy of a rollback's record (syncRevisions), while the claim that has the record may be
// going too; the operator's own creations and updates of revisions need no pass.
func deletedOnly() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
