package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/kube"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// createPod creates member m's pod; one that already exists is left as it is. A member of the initial
// bootstrap serves TLS as the spec says (its --initial-cluster does), and, of a cluster created from a
// backup, gets the init container that restores the snapshot; while that snapshot cannot be resolved,
// no pod is created and the returned step says why. Any other member serves TLS as the model says it
// is to now (model.DesiredTLS), unless m says. A pod of that name that is not a member's blocks.
func (r *EtcdClusterReconciler) createPod(ctx context.Context, s *scope, m resources.Member) (*verdict.Step, error) {
	if m.InitialClusterState == resources.StateNew && (!s.m.Formed() || s.m.NeverStarted(m.Name)) {
		// only before the cluster first forms, or for an initial member that never started: afterwards
		// a recreated member starts on its own data and must not depend on the backup storage (its
		// credentials, its availability) to restart
		plan, wait, err := r.restorePlan(ctx, s)
		if err != nil || wait != nil {
			return wait, err
		}
		m.Restore = plan
	}
	return r.createMemberPod(ctx, s, r.memberPod(s, m))
}

// createMemberPod creates pod, the pod of a member of the cluster s looks at: a Blocked step when a pod
// of its name exists that is not a member's, or the API server refuses it (saying why and what to do),
// nil when it is created; other errors are returned.
func (r *EtcdClusterReconciler) createMemberPod(ctx context.Context, s *scope, pod *corev1.Pod) (*verdict.Step, error) {
	if err := r.Create(ctx, pod); apierrors.IsAlreadyExists(err) {
		// a pod of that name that this pass did not see as a member (its labels were changed, or it is
		// not ours): never replace it blindly, and do not retry in a loop
		return verdict.Blocked(etcdv1beta1.ReasonForeignObject, fmt.Sprintf(
			"Pod %s exists but is not labelled as a member of this cluster (%s=%s): restore its labels or delete it", pod.Name, etcdv1beta1.LabelCluster, s.cluster.Name)), nil
	} else if check, _ := kube.PodCheckOf(err); !check.Accepted() {
		// a LimitRange or policy added since the spec was admitted, a quota full, a service account
		// deleted: a Blocked step that quotes the API server, looked at again soon, where an error
		// would only retry with backoff under ReconcileError
		return podRefused(pod.Name, "", check), nil
	} else if err != nil {
		return nil, fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	s.m.Created(pod)
	return nil, nil
}

// memberPod builds the pod member m gets now: serving TLS as m says, or, when m does not say
// (m.TLS nil), as the model says the member is to serve now (model.DesiredTLS).
func (r *EtcdClusterReconciler) memberPod(s *scope, m resources.Member) *corev1.Pod {
	return r.memberPodOf(s, s.cluster, m)
}

// memberPodOf is memberPod with the spec of c, the cluster s looks at or a copy with the spec of one of
// its ControllerRevisions (verdict.SpecToRestore).
func (r *EtcdClusterReconciler) memberPodOf(s *scope, c *etcdv1beta1.EtcdCluster, m resources.Member) *corev1.Pod {
	if m.TLS == nil {
		t := s.m.DesiredTLS(m.Name)
		m.TLS = &t
	}
	return r.Options.BuildPod(c, m)
}

// syncClaimOwnership makes the cluster own its members' claims under retainPolicy Delete and releases
// them under Retain (for existing claims too), records on a started member's claim its member and
// cluster ID (verdict.ClaimIdentity), which its pod checks its data directory against, and removes the
// records of a rollout's restart and rollback from a member's claim once they have served their
// purpose (verdict.ClaimRecordsToDrop). While a rollback holds, or the rollout tries the current spec on
// a member that has not served on it yet (model.Cluster.Trial), it records the spec hash of the pod each
// other member serves on (verdict.ServedSpecToRecord), whose revision that member's pod is recreated
// from if it goes; the record of the rollback on the claim of the rolled-back member's replacement,
// once it serves, when the claim that had it was lost (verdict.RollbackToRecord; the revision's copy
// follows it in a later pass, once the cache shows the record: syncRollbackMark); and that etcd ran on
// a member's pod of a spec no member has served on (verdict.UntriedSpecRanToRecord), which rules out
// its rollback to another minor.
func (r *EtcdClusterReconciler) syncClaimOwnership(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	retain := c.Spec.Storage.RetainPolicy == etcdv1beta1.RetainPolicyRetain
	hash := s.m.SpecHash
	for _, m := range s.m.Claims() {
		pvc := m.Claim
		owned := metav1.IsControlledBy(pvc, c)
		identity := verdict.ClaimIdentity(s.m, m)
		drop := verdict.ClaimRecordsToDrop(s.m, m, hash)
		if verdict.ServedSpecToRecord(s.m, m) {
			identity = resources.Merged(identity, map[string]string{etcdv1beta1.AnnotationServedSpec: m.PodSpecHash()})
		}
		identity = resources.Merged(identity, verdict.RollbackToRecord(s.m, m))
		if verdict.UntriedSpecRanToRecord(s.m, m) {
			identity = resources.Merged(identity, map[string]string{etcdv1beta1.AnnotationUntriedSpecRan: "true"})
		}
		if (owned != retain && identity == nil && len(drop) == 0) || pvc.DeletionTimestamp != nil {
			continue
		}
		patch := client.MergeFrom(pvc.DeepCopy())
		switch {
		case owned == retain && retain:
			pvc.OwnerReferences = nil
		case owned == retain:
			pvc.OwnerReferences = []metav1.OwnerReference{resources.OwnerReference(c)}
		}
		pvc.Annotations = resources.Merged(pvc.Annotations, identity)
		for _, k := range drop {
			delete(pvc.Annotations, k)
		}
		if err := r.Patch(ctx, pvc, patch); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("update the owner and identity of persistentvolumeclaim %s: %w", pvc.Name, err)
		}
	}
	return nil, nil
}
