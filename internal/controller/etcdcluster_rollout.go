package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/rollout"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create

// reconcileRollout rolls member pods that were built from an older spec, one member per pass, once
// membership is settled: followers first, then the leader after moving leadership away. A restart
// deletes the pod; recreateMembers recreates it on its data volume with the current spec in the next
// pass, and the next member goes only when every member is ready and healthy again.
func (r *EtcdClusterReconciler) reconcileRollout(ctx context.Context, s *scope) (*verdict.Step, error) {
	if !s.m.Answered() {
		return nil, nil // a rollout needs an answering cluster; membership went first
	}
	c := s.cluster
	a := rollout.Next(s.m.Rollout(r.Options.SpecHash(s.cluster)))
	logger := log.FromContext(ctx).WithValues("etcdcluster", klog.KObj(c), "member", a.Member)
	switch a.Kind {
	case rollout.None:
		return nil, nil
	case rollout.Wait:
		logger.V(1).Info("Rollout paused", "reason", a.Reason)
		return verdict.Acting(etcdv1alpha1.ReasonRolloutPaused, a.Reason), nil
	case rollout.MoveLeader:
		logger.Info("Rollout", "action", a.Kind, "to", a.Target, "reason", a.Reason)
		callCtx, cancel := context.WithTimeout(ctx, r.etcdTimeout())
		defer cancel()
		if err := s.etcdClient.MoveLeader(callCtx, a.TargetID); err != nil {
			return retryLater("move_leader", err, fmt.Sprintf("move leadership from %s to %s", a.Member, a.Target))
		}
		metrics.CountMembership("move_leader", nil, false)
		r.event(c, corev1.EventTypeNormal, "MovedLeader", "MoveLeader", "Moved leadership from %s to %s (ID %s): %s", a.Member, a.Target, etcd.FormatID(a.TargetID), a.Reason)
		return verdict.Acting(etcdv1alpha1.ReasonMovingLeader, a.Reason), nil
	case rollout.Restart:
		if verdict.RestartLosesData(c) {
			return verdict.Blocked(etcdv1alpha1.ReasonRolloutPaused, fmt.Sprintf(
				"Not restarting %s: it is the only member and runs on emptyDir, so a restart deletes the cluster's only copy of its data; scale to 3 members first (the new members copy the data), or restore a backup into a new EtcdCluster", a.Member)), nil
		}
		logger.Info("Rollout", "action", a.Kind, "reason", a.Reason)
		if refused, err := r.restartMember(ctx, c, s.m.Member(a.Member)); err != nil {
			return nil, err
		} else if refused != "" {
			return verdict.Acting(etcdv1alpha1.ReasonRolloutPaused, fmt.Sprintf(
				"Waiting to restart %s: the PodDisruptionBudget refuses its eviction (%s); another member is down or being disrupted", a.Member, refused)), nil
		}
		r.event(c, corev1.EventTypeNormal, "UpdatingMember", "Restart", "Restarting member %s with the current spec (image %s): %s", a.Member, r.Options.Image(c), a.Reason)
		return verdict.Acting(etcdv1alpha1.ReasonRollingUpdate, fmt.Sprintf("Restarting %s with the current spec: %s", a.Member, a.Reason)), nil
	}
	return nil, nil
}

// evictionTimeout bounds an eviction request: the API server answers a budget it has not computed
// with 429 and Retry-After, which the client would otherwise wait out and retry for minutes.
const evictionTimeout = 5 * time.Second

// restartMember takes a member's pod down so that it is recreated on its claim with the current spec.
// A member of a multi-member cluster goes through the Eviction API, so that the cluster's
// PodDisruptionBudget is honoured against disruptions that started after this pass observed (a node
// drain evicting another member a moment earlier): it returns why the budget has no room instead of
// evicting. The only member of a 1-member cluster is deleted: its budget never allows an eviction, and
// its restart is the downtime a single member always has; so is a pod that is not Ready (a member
// already down, such as one whose image cannot be pulled). The UID precondition makes sure only the
// pod this pass looked at goes.
func (r *EtcdClusterReconciler) restartMember(ctx context.Context, c *etcdv1alpha1.EtcdCluster, m *model.Member) (refused string, err error) {
	pod := m.Pod
	pre := &metav1.Preconditions{UID: &pod.UID}
	if c.Spec.ReplicasOrDefault() == 1 || !m.PodReady() {
		// a pod that is not Ready takes no member down that was up: the budget guards the healthy ones
		err = r.Delete(ctx, pod, &client.DeleteOptions{Preconditions: pre})
	} else {
		pdb := &policyv1.PodDisruptionBudget{}
		switch err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, pdb); {
		case err != nil && !apierrors.IsNotFound(err):
			return "", fmt.Errorf("get poddisruptionbudget %s: %w", c.Name, err)
		case err != nil: // not created yet: the eviction is not limited
		case pdb.Status.ObservedGeneration < pdb.Generation:
			return "the budget has not been computed yet", nil
		case pdb.Status.DisruptionsAllowed < 1:
			return fmt.Sprintf("%d pods healthy, %d required", pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy), nil
		}
		evictCtx, cancel := context.WithTimeout(ctx, evictionTimeout)
		defer cancel()
		err = r.SubResource("eviction").Create(evictCtx, pod, &policyv1.Eviction{DeleteOptions: &metav1.DeleteOptions{Preconditions: pre}})
		if apierrors.IsTooManyRequests(err) || errors.Is(err, context.DeadlineExceeded) {
			return err.Error(), nil
		}
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return "", fmt.Errorf("restart member %s: %w", pod.Name, err)
	}
	return "", nil
}
