package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/auth"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/observe"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// defaultEtcdTimeout bounds each etcd call of a pass.
const defaultEtcdTimeout = 3 * time.Second

// etcdTimeout is the bound of each etcd call.
func (r *EtcdClusterReconciler) etcdTimeout() time.Duration {
	if r.EtcdTimeout == 0 {
		return defaultEtcdTimeout
	}
	return r.EtcdTimeout
}

// observe lists the cluster's claims and asks the members' etcd what it knows, and joins it all, with
// the pods reconcileTLS listed, into the pass's model. etcd being unreachable is an observation, not an
// error.
func (r *EtcdClusterReconciler) observe(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	pvcs := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, pvcs, client.InNamespace(c.Namespace), client.MatchingLabels(resources.SelectorLabels(c))); err != nil {
		return nil, fmt.Errorf("list persistentvolumeclaims: %w", err)
	}
	if err := r.updateEmptySpecHash(ctx, c, s.pods.Items, pvcs.Items); err != nil {
		return nil, err
	}
	revs, err := r.listRevisions(ctx, s)
	if err != nil {
		return nil, err
	}
	in := model.Input{Cluster: c, Options: r.Options, Pods: s.pods.Items, Claims: pvcs.Items, Revisions: revs}
	s.m = model.Build(in) // what Kubernetes holds: which pods to ask
	s.etcdBase = s.creds.Config(etcd.Config{TLS: r.Certs.ClientTLS(c.Namespace, c.Name)})
	in.Etcd, s.etcdClient, in.EtcdErr = observe.Etcd(ctx, r.EtcdClient, s.m, r.Options, r.etcdTimeout(), s.etcdBase)
	s.in, s.m = in, model.Build(in)
	r.markServing(ctx, s)
	return auth.Refused(in.EtcdErr, s.creds), nil
}

// markServing sets the readiness gate resources.ServingCondition True on the pod of every member that
// serves clients, so that the pod turns Ready, and joins the client Service, only once its etcd
// serves: a member that has just joined passes its readiness probe up to 7 s before. A member serves
// when it served the operator in this pass through that pod (model.Member.Serving: a linearizable
// read, or a learner's status, on its client URL), or, whether the operator reached it or not, when
// its etcd container has run for longer than model.JoinGrace and passes its readiness probe: etcd has
// published itself by then, and a pod whose members the operator cannot reach (a NetworkPolicy) still
// joins the Service. The condition is set True once per pod, and again only on a pod drained for a
// removal the planner no longer makes (keptDrained); pods without the gate (made before the operator
// had it) are left alone. A pod never marked whose member the planner removes next (a pod of a member
// being removed, made again) is not marked.
func (r *EtcdClusterReconciler) markServing(ctx context.Context, s *scope) {
	var planned map[string]bool
	for _, mem := range s.m.Pods() {
		if !mem.HasPod() || !resources.HasServingGate(mem.Pod) {
			continue
		}
		cond := model.PodCondition(mem.Pod, resources.ServingCondition)
		if cond != nil && cond.Status == corev1.ConditionTrue {
			continue
		}
		if planned == nil {
			planned = plannedRemovals(s.m)
		}
		if keptDrained(mem, planned) || cond == nil && planned[mem.Name] {
			continue // a pod made again for a member the planner removes next stays out too
		}
		since := mem.EtcdRunningSince()
		served := mem.Listed() && mem.Serving()
		settled := mem.EtcdReady() && !since.IsZero() && s.m.Now.Sub(since) > model.JoinGrace
		if !served && !settled {
			continue
		}
		serving := corev1.PodCondition{Type: resources.ServingCondition, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
			Reason: "Serving", Message: "etcd served the operator on its client URL"}
		if !served {
			serving.Message = fmt.Sprintf("etcd has passed its readiness probe, and run for longer than %s", model.JoinGrace)
		}
		_ = r.setServing(ctx, s, mem, serving) // reported; the pass goes on
	}
}

// setServing sets condition cond, resources.ServingCondition, on mem's pod. The patch names the pod's
// UID, so that a pod made again under the same name meanwhile is not marked. A failed patch is logged
// and reported as an event, and returned: the gate must not hold up a repair.
func (r *EtcdClusterReconciler) setServing(ctx context.Context, s *scope, mem *model.Member, cond corev1.PodCondition) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": mem.Pod.UID},
		"status":   map[string]any{"conditions": []corev1.PodCondition{cond}},
	})
	if err == nil {
		err = r.Status().Patch(ctx, mem.Pod, client.RawPatch(types.StrategicMergePatchType, patch))
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && !apierrors.IsInvalid(err) {
		log.FromContext(ctx).Error(err, "Cannot set the readiness gate of a member pod", "pod", mem.Name, "condition", resources.ServingCondition, "status", cond.Status)
		r.eventAbout(s.cluster, memberRef(s.cluster, mem.Name), corev1.EventTypeWarning, "ReadinessGateNotSet", "Patch",
			"Cannot set condition %s of pod %s to %s, which its readiness gate waits for: %v; until it is set the pod is %s the client Service (the operator needs patch on pods/status)",
			resources.ServingCondition, mem.Name, cond.Status, err, map[corev1.ConditionStatus]string{corev1.ConditionTrue: "not Ready, and not in", corev1.ConditionFalse: "still in"}[cond.Status])
	}
	return err
}

// updateEmptySpecHash replaces, on the pods of c and in the rolled-onto records of its claims, the
// spec hash that the operator gave pods built from an empty spec.podTemplate or spec.options before it
// hashed them as absent (resources.Options.EmptySpecHash) with the current one: such a pod was built
// from the current spec, and rolling it would restart every member for nothing. pods and claims are
// changed in place.
func (r *EtcdClusterReconciler) updateEmptySpecHash(ctx context.Context, c *etcdv1beta1.EtcdCluster, pods []corev1.Pod, claims []corev1.PersistentVolumeClaim) error {
	old := r.Options.EmptySpecHash(c)
	if old == "" {
		return nil
	}
	hash := r.Options.SpecHash(c)
	for i := range pods {
		if err := r.replaceAnnotation(ctx, "pod", &pods[i], etcdv1beta1.AnnotationSpecHash, old, hash); err != nil {
			return err
		}
	}
	for i := range claims {
		if err := r.replaceAnnotation(ctx, "persistentvolumeclaim", &claims[i], etcdv1beta1.AnnotationRolledOnto, old, hash); err != nil {
			return err
		}
	}
	return nil
}

// replaceAnnotation sets the annotation key of obj, a kind (for the error), to to if it is from, with
// a merge patch; an object already gone is no error.
func (r *EtcdClusterReconciler) replaceAnnotation(ctx context.Context, kind string, obj client.Object, key, from, to string) error {
	if obj.GetAnnotations()[key] != from {
		return nil
	}
	if err := r.patchAnnotations(ctx, obj, map[string]string{key: to}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update annotation %s of %s %s: %w", key, kind, obj.GetName(), err)
	}
	return nil
}

// patchAnnotations sets the annotations set on obj and removes those named in drop, with a merge patch
// against obj as it was; it returns the API server's error as it is (a NotFound included).
func (r *EtcdClusterReconciler) patchAnnotations(ctx context.Context, obj client.Object, set map[string]string, drop ...string) error {
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	annotations := resources.Merged(obj.GetAnnotations(), set)
	for _, k := range drop {
		delete(annotations, k)
	}
	obj.SetAnnotations(annotations)
	return r.Patch(ctx, obj, patch)
}
