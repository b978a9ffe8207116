package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/kube"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete

// reconcileNetworkPolicy keeps the cluster's NetworkPolicy (resources.BuildNetworkPolicy) while
// spec.networkPolicy enables it, and deletes it once it does not. A policy it cannot keep is reported;
// it stops nothing else.
func (r *EtcdClusterReconciler) reconcileNetworkPolicy(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	if !c.Spec.NetworkPolicyEnabled() {
		_, err := kube.DeleteOwned(ctx, r.Client, c, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: resources.NetworkPolicyName(c)}})
		return nil, err
	}
	out, want, err := kube.Unchanged, (*networkingv1.NetworkPolicy)(nil), error(nil)
	if want, err = r.Options.BuildNetworkPolicy(c); err == nil {
		out, err = kube.EnsureOwned(ctx, r.Client, c, want, &networkingv1.NetworkPolicy{},
			func(got, want *networkingv1.NetworkPolicy) bool {
				return equality.Semantic.DeepEqual(got.Spec, want.Spec)
			},
			func(got, want *networkingv1.NetworkPolicy) { got.Spec = want.Spec })
	}
	switch {
	case kube.NamespaceTerminating(err):
		return nil, err // final, and not the policy's fault: Reconcile reports it
	case err != nil: // unknown operator pods, or refused (RBAC, a policy engine, a quota): the members are still repaired
		s.report.Unmanaged = &verdict.Progress{Reason: etcdv1beta1.ReasonReconcileError, Message: err.Error()}
	case out == kube.Created || out == kube.Updated:
		r.event(c, corev1.EventTypeNormal, "AppliedNetworkPolicy", "Apply", "NetworkPolicy %s: the peer port only from members, the client port only from the operator, backup Jobs and %d listed sources", want.Name, len(c.Spec.NetworkPolicy.ClientFrom))
	case out == kube.Foreign:
		s.report.Unmanaged = &verdict.Progress{Reason: etcdv1beta1.ReasonForeignObject, Message: fmt.Sprintf(
			"NetworkPolicy %s exists and is not owned by this EtcdCluster: delete it so that the operator can keep the cluster's", want.Name)}
	}
	return nil, nil
}
