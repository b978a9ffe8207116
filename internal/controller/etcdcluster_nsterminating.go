package controller

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// namespaceTerminating reports whether err holds the API server's refusal to create an object in a
// namespace being deleted: a Forbidden status with cause NamespaceTerminating (the NamespaceLifecycle
// admission plugin). Such a refusal is final: a namespace never leaves Terminating, and the namespace
// controller deletes every object in it, the cluster included.
func namespaceTerminating(err error) bool {
	return err != nil && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// terminatingNamespaceStep is the step of a cluster whose namespace is being deleted.
func terminatingNamespaceStep(c *etcdv1beta1.EtcdCluster) *verdict.Step {
	return verdict.Blocked(etcdv1beta1.ReasonNamespaceTerminating, fmt.Sprintf(
		"Namespace %s is being deleted: the API server creates no object in it, so the operator makes none and changes nothing until the namespace controller deletes this cluster", c.Namespace))
}

// refusedAsTerminating reports whether err, a pass's error, is a create refused because c's namespace
// is being deleted; then it remembers c in r.terminating. That is not an error to retry: the namespace
// controller deletes the cluster next, which brings reconcileDelete.
func (r *EtcdClusterReconciler) refusedAsTerminating(ctx context.Context, c *etcdv1beta1.EtcdCluster, err error) bool {
	if !namespaceTerminating(err) {
		return false
	}
	log.FromContext(ctx).Info("the cluster's namespace is being deleted: making nothing in it until the cluster is deleted", "refused", err.Error())
	r.terminating.add(c)
	return true
}

// terminatingClusters remembers the clusters a pass found in a namespace being deleted, by name and
// UID (a namespace of the same name made later holds other clusters). Their later passes only report
// it: every create would be refused, and so would every event.
type terminatingClusters struct {
	mu   sync.Mutex
	uids map[types.NamespacedName]types.UID
}

func (t *terminatingClusters) add(c *etcdv1beta1.EtcdCluster) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.uids == nil {
		t.uids = map[types.NamespacedName]types.UID{}
	}
	t.uids[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c.UID
}

func (t *terminatingClusters) has(c *etcdv1beta1.EtcdCluster) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	uid, ok := t.uids[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}]
	return ok && uid == c.UID
}

// forget drops the cluster of that name, once it is deleted.
func (t *terminatingClusters) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.uids, key)
}
