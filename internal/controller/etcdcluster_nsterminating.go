package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/kube"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// terminatingKept is how long a cluster stays in terminatingClusters: its passes do nothing for that
// long, then one runs in full again (and is refused again, while the namespace is still being deleted).
// A refusal the operator misread would so stop the cluster for a few minutes, not for good.
const terminatingKept = 5 * time.Minute

// terminatingNamespaceStep is the step of a cluster whose namespace is being deleted.
func terminatingNamespaceStep(c *etcdv1beta1.EtcdCluster) *verdict.Step {
	return verdict.Blocked(etcdv1beta1.ReasonNamespaceTerminating, fmt.Sprintf(
		"Namespace %s is being deleted: the API server creates no object in it, so the operator makes none and acts on nothing until the namespace controller deletes this cluster", c.Namespace))
}

// refusedAsTerminating reports whether a pass of c ended on a create refused because c's namespace is
// being deleted (kube.NamespaceTerminating): err, or st when the refusal was a pod's (podRefused). Then
// it remembers c in r.terminating. That is not an error to retry: the namespace controller deletes the
// cluster next, which brings reconcileDelete.
func (r *EtcdClusterReconciler) refusedAsTerminating(ctx context.Context, c *etcdv1beta1.EtcdCluster, st *verdict.Step, err error) bool {
	refused := ""
	switch {
	case kube.NamespaceTerminating(err):
		refused = err.Error()
	case err == nil && st != nil && st.Reason == etcdv1beta1.ReasonNamespaceTerminating:
		refused = st.Message
	default:
		return false
	}
	log.FromContext(ctx).Info("the cluster's namespace is being deleted: making nothing in it until the cluster is deleted", "refused", refused)
	r.terminating.add(c, time.Now())
	return true
}

// probeNamespace asks the API server, with a dry run of the creation of c's client Service, whether
// c's namespace takes new objects: kube.NamespaceTerminating(err) when it is being deleted. A dry run
// changes nothing, and an existing Service answers AlreadyExists (returned as is, like any other
// error). For steps that would report a loss when the namespace's deletion could be its cause.
func (r *EtcdClusterReconciler) probeNamespace(ctx context.Context, c *etcdv1beta1.EtcdCluster) error {
	return r.Create(ctx, resources.BuildClientService(c), client.DryRunAll)
}

// terminatingResult is what a pass of a cluster in r.terminating returns, after patching its status
// (patchErr): no requeue, and a conflict (a stale copy) looked at again without an error.
func terminatingResult(patchErr error) (ctrl.Result, error) {
	if apierrors.IsConflict(patchErr) {
		return ctrl.Result{RequeueAfter: verdict.RequeueProgressing}, nil
	}
	return ctrl.Result{}, patchErr
}

// terminatingClusters remembers, for terminatingKept, the clusters a pass found in a namespace being
// deleted, by name and UID (a namespace of the same name made later holds other clusters). Their later
// passes only report it: every create would be refused, and so would every event.
type terminatingClusters struct {
	mu    sync.Mutex
	since map[types.NamespacedName]terminatingSince
}

type terminatingSince struct {
	uid types.UID
	at  time.Time
}

func (t *terminatingClusters) add(c *etcdv1beta1.EtcdCluster, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.since == nil {
		t.since = map[types.NamespacedName]terminatingSince{}
	}
	t.since[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = terminatingSince{uid: c.UID, at: now}
}

// has reports whether c was found in a namespace being deleted less than terminatingKept before now.
func (t *terminatingClusters) has(c *etcdv1beta1.EtcdCluster, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.since[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}]
	return ok && s.uid == c.UID && now.Sub(s.at) < terminatingKept
}

// forget drops the cluster of that name, once it is deleted.
func (t *terminatingClusters) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.since, key)
}
