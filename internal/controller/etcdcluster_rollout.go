package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/rollout"
	"github.com/etcdkit/etcd-operator/internal/version"
)

// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch

// validateSpec refuses, before any pod is touched, a spec the admission webhook would have refused but
// that got in anyway (the webhook was not installed or was bypassed): a version the members cannot
// move to from what they run, or extraArgs that override flags the operator owns. It returns a
// non-zero result to stop the pass; the Valid condition says what to change.
func (r *EtcdClusterReconciler) validateSpec(_ context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	var problems []string
	if cur := c.Status.CurrentVersion; cur != "" {
		if err := version.CheckUpgrade(cur, c.Spec.VersionOrDefault()); err != nil {
			problems = append(problems, fmt.Sprintf("spec.version %s: %v", c.Spec.VersionOrDefault(), err))
		}
	}
	if c.Spec.Options != nil {
		problems = append(problems, etcdv1alpha1.ValidateExtraArgs(c.Spec.Options.ExtraArgs)...)
	}
	if len(problems) == 0 {
		return ctrl.Result{}, nil
	}
	msg := strings.Join(problems, "; ") + "; no member is changed until the spec is fixed"
	s.invalid = &progress{etcdv1alpha1.ReasonInvalidSpec, msg}
	s.blocked = &progress{etcdv1alpha1.ReasonInvalidSpec, msg}
	if !hasCondition(c, etcdv1alpha1.ConditionValid, metav1.ConditionFalse, msg) {
		r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonInvalidSpec, "Validate", "%s", msg)
	}
	return ctrl.Result{RequeueAfter: requeueBlocked}, nil
}

// hasCondition reports whether the cluster's status already has the condition with that status and
// message (so that a warning is recorded once, not on every pass).
func hasCondition(c *etcdv1alpha1.EtcdCluster, condType string, status metav1.ConditionStatus, message string) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == condType {
			return cond.Status == status && cond.Message == message
		}
	}
	return false
}

// podReady reports whether a pod exists, is not being deleted and is Ready.
func podReady(p *corev1.Pod) bool {
	if p == nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// rolloutState is the rollout's view of what the pass observed.
func (r *EtcdClusterReconciler) rolloutState(s *scope) rollout.State {
	hash := r.Options.SpecHash(s.cluster)
	st := rollout.State{Leader: s.etcd.leader}
	for _, m := range s.etcd.members {
		name := memberName(r.Options, s.cluster, m)
		pod := s.pods[name]
		st.Members = append(st.Members, rollout.Member{
			Name: name, ID: m.ID, Learner: m.IsLearner, Healthy: s.etcd.serving(m.ID), Ready: podReady(pod),
			UpToDate: pod != nil && pod.Annotations[etcdv1alpha1.AnnotationSpecHash] == hash,
		})
	}
	return st
}

// reconcileRollout rolls member pods that were built from an older spec, one member per pass, once
// membership is settled: followers first, then the leader after moving leadership away. A restart
// deletes the pod; restoreMemberPods recreates it on its data volume with the current spec in the next
// pass, and the next member goes only when every member is ready and healthy again.
func (r *EtcdClusterReconciler) reconcileRollout(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.etcd == nil || s.progress != nil || s.blocked != nil || s.stalled != nil {
		return ctrl.Result{}, nil // membership first; a rollout needs a settled, answering cluster
	}
	c := s.cluster
	a := rollout.Next(r.rolloutState(s))
	logger := log.FromContext(ctx).WithValues("etcdcluster", klog.KObj(c), "member", a.Member)
	switch a.Kind {
	case rollout.None:
		return r.reconcileNoSpace(ctx, s)
	case rollout.Wait:
		logger.V(1).Info("Rollout paused", "reason", a.Reason)
		s.progress = &progress{etcdv1alpha1.ReasonRolloutPaused, a.Reason}
	case rollout.MoveLeader:
		logger.Info("Rollout", "action", a.Kind, "to", a.Target, "reason", a.Reason)
		callCtx, cancel := context.WithTimeout(ctx, r.etcdTimeout())
		defer cancel()
		if err := s.etcdClient.MoveLeader(callCtx, a.TargetID); err != nil {
			return r.retryLater(s, "move_leader", err, fmt.Sprintf("move leadership from %s to %s", a.Member, a.Target))
		}
		countMembership("move_leader", nil, false)
		r.event(c, corev1.EventTypeNormal, "MovedLeader", "MoveLeader", "Moved leadership from %s to %s (ID %s): %s", a.Member, a.Target, etcd.FormatID(a.TargetID), a.Reason)
		s.progress = &progress{etcdv1alpha1.ReasonMovingLeader, a.Reason}
	case rollout.Restart:
		logger.Info("Rollout", "action", a.Kind, "reason", a.Reason)
		pod := s.pods[a.Member]
		if refused, err := r.restartMember(ctx, c, pod); err != nil {
			return ctrl.Result{}, err
		} else if refused != "" {
			s.progress = &progress{etcdv1alpha1.ReasonRolloutPaused, fmt.Sprintf(
				"Waiting to restart %s: the PodDisruptionBudget refuses its eviction (%s); another member is down or being disrupted", a.Member, refused)}
			return ctrl.Result{}, nil
		}
		r.event(c, corev1.EventTypeNormal, "UpdatingMember", "Restart", "Restarting member %s with the current spec (image %s): %s", a.Member, r.Options.Image(c), a.Reason)
		s.progress = &progress{etcdv1alpha1.ReasonRollingUpdate, fmt.Sprintf("Restarting %s with the current spec: %s", a.Member, a.Reason)}
	}
	return ctrl.Result{}, nil
}

// noSpaceMargin is the share of the quota a database may fill for its NOSPACE alarm to be disarmed:
// below it, writes have room again; above it, the alarm would come back at once.
const noSpaceMargin = 0.9

// reconcileNoSpace handles etcd's NOSPACE alarm once every member runs the current spec: it disarms
// the alarm of each member whose database now fits its quota with room to spare (the quota was raised
// in spec.options, or the database was compacted and defragmented), and otherwise says, in the
// Progressing condition and a Warning event, what would let writes in again.
func (r *EtcdClusterReconciler) reconcileNoSpace(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	quota := resources.QuotaBackendBytes(c)
	var alarmed []etcd.Member
	var full []string
	for _, m := range s.etcd.members {
		if s.etcd.noSpace(m.ID) {
			alarmed = append(alarmed, m)
		}
		// every member's database counts: one that does not fit would raise the alarm again at once
		if st, ok := s.etcd.status[m.ID]; !ok || float64(st.DBSizeBytes) >= noSpaceMargin*float64(quota) {
			full = append(full, fmt.Sprintf("%s (%d bytes)", memberName(r.Options, c, m), st.DBSizeBytes))
		}
	}
	if len(alarmed) == 0 {
		return ctrl.Result{}, nil
	}
	for _, m := range s.etcd.members {
		if !s.etcd.serving(m.ID) {
			return ctrl.Result{}, nil // a member is still starting: judge the alarms of all at once
		}
	}
	if len(full) > 0 {
		sort.Strings(full)
		msg := fmt.Sprintf("NOSPACE: etcd refuses writes: the database of %s fills more than %d%% of the %d-byte quota; raise spec.options.quotaBackendBytes (the members roll, then the alarm is disarmed), or compact and defragment the members",
			strings.Join(full, ", "), int(noSpaceMargin*100), quota)
		if !hasCondition(c, etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, msg) {
			r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonNoSpace, "Disarm", "%s", msg)
		}
		s.blocked = &progress{etcdv1alpha1.ReasonNoSpace, msg}
		return ctrl.Result{}, nil
	}
	var names []string
	for _, m := range alarmed {
		callCtx, cancel := context.WithTimeout(ctx, r.etcdTimeout())
		err := s.etcdClient.DisarmNoSpace(callCtx, m.ID)
		cancel()
		if err != nil {
			return ctrl.Result{}, err
		}
		names = append(names, memberName(r.Options, c, m))
	}
	sort.Strings(names)
	r.event(c, corev1.EventTypeNormal, "DisarmedNoSpace", "Disarm", "Disarmed the NOSPACE alarm of %s: the databases fit the %d-byte quota again; writes are accepted", strings.Join(names, ", "), quota)
	s.progress = &progress{etcdv1alpha1.ReasonNoSpace, fmt.Sprintf("Disarmed the NOSPACE alarm of %s", strings.Join(names, ", "))}
	return ctrl.Result{}, nil
}

// evictionTimeout bounds an eviction request: the API server answers a budget it has not computed
// with 429 and Retry-After, which the client would otherwise wait out and retry for minutes.
const evictionTimeout = 5 * time.Second

// restartMember takes a member's pod down so that it is recreated on its claim with the current spec.
// A member of a multi-member cluster goes through the Eviction API, so that the cluster's
// PodDisruptionBudget is honoured against disruptions that started after this pass observed (a node
// drain evicting another member a moment earlier): it returns why the budget has no room instead of
// evicting. The only member of a 1-member cluster is deleted: its budget never allows an eviction, and
// its restart is the downtime a single member always has. The UID precondition makes sure only the
// pod this pass looked at goes.
func (r *EtcdClusterReconciler) restartMember(ctx context.Context, c *etcdv1alpha1.EtcdCluster, pod *corev1.Pod) (refused string, err error) {
	pre := &metav1.Preconditions{UID: &pod.UID}
	if c.Spec.ReplicasOrDefault() == 1 {
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

// reconcilePDB keeps the cluster's PodDisruptionBudget at minAvailable = quorum of the desired members.
// A budget of that name that the cluster does not own is left alone and reported.
func (r *EtcdClusterReconciler) reconcilePDB(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	var voters int32
	if s.etcd != nil {
		for _, m := range s.etcd.members {
			if !m.IsLearner {
				voters++
			}
		}
	} else {
		for _, m := range c.Status.Members {
			if m.Role == etcdv1alpha1.RoleVoter {
				voters++
			}
		}
	}
	want := resources.BuildPDB(c, voters)
	got := &policyv1.PodDisruptionBudget{}
	err := r.Get(ctx, client.ObjectKeyFromObject(want), got)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("create poddisruptionbudget %s: %w", want.Name, err)
		}
		r.event(c, corev1.EventTypeNormal, "CreatedPodDisruptionBudget", "Create", "Created PodDisruptionBudget %s (minAvailable %s)", want.Name, want.Spec.MinAvailable.String())
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("get poddisruptionbudget %s: %w", want.Name, err)
	case !metav1.IsControlledBy(got, c):
		if s.blocked == nil && s.progress == nil {
			s.blocked = &progress{etcdv1alpha1.ReasonForeignObject, fmt.Sprintf(
				"PodDisruptionBudget %s exists and is not owned by this EtcdCluster: delete it so that the operator can keep evictions from breaking quorum", want.Name)}
		}
		return ctrl.Result{}, nil
	case equality.Semantic.DeepEqual(got.Spec.MinAvailable, want.Spec.MinAvailable) && equality.Semantic.DeepEqual(got.Spec.Selector, want.Spec.Selector):
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.MinAvailable, got.Spec.Selector = want.Spec.MinAvailable, want.Spec.Selector
	if err := r.Patch(ctx, got, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("update poddisruptionbudget %s: %w", want.Name, err)
	}
	r.event(c, corev1.EventTypeNormal, "UpdatedPodDisruptionBudget", "Update", "Set PodDisruptionBudget %s to minAvailable %s", want.Name, want.Spec.MinAvailable.String())
	return ctrl.Result{}, nil
}

// reconcileVolumes expands the members' claims to spec.storage.size where their StorageClass allows
// volume expansion, and records in the VolumesResized condition which claims are growing or cannot
// grow.
func (r *EtcdClusterReconciler) reconcileVolumes(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	if c.Spec.Storage.EmptyDir != nil || c.Spec.Storage.Size == nil {
		return ctrl.Result{}, nil
	}
	want := *c.Spec.Storage.Size
	var growing, refused []string
	refusedBy := map[string]string{}
	names := make([]string, 0, len(s.pvcs))
	for name := range s.pvcs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pvc := s.pvcs[name]
		if pvc.DeletionTimestamp != nil {
			continue
		}
		req := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		if req.Cmp(want) >= 0 {
			if got, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok && got.Cmp(want) < 0 && pvc.Status.Phase == corev1.ClaimBound {
				growing = append(growing, name)
			}
			continue
		}
		className := ""
		if pvc.Spec.StorageClassName != nil {
			className = *pvc.Spec.StorageClassName
		}
		if className == "" {
			refused = append(refused, name)
			refusedBy[name] = "has no StorageClass"
			continue
		}
		sc := &storagev1.StorageClass{}
		if err := r.Get(ctx, client.ObjectKey{Name: className}, sc); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get storageclass %s: %w", className, err)
		} else if err != nil || sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
			refused = append(refused, name)
			refusedBy[name] = "StorageClass " + className + " does not allow volume expansion"
			continue
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			growing = append(growing, name) // a claim can grow only once bound; new claims get the new size
			continue
		}
		patch := client.MergeFrom(pvc.DeepCopy())
		pvc.Spec.Resources.Requests[corev1.ResourceStorage] = want
		if err := r.Patch(ctx, pvc, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("expand persistentvolumeclaim %s to %s: %w", name, want.String(), err)
		}
		r.event(c, corev1.EventTypeNormal, "ExpandingVolume", "Expand", "Expanding claim %s from %s to %s", name, req.String(), want.String())
		growing = append(growing, name)
	}
	switch {
	case len(refused) > 0:
		var why []string
		for _, n := range refused {
			why = append(why, n+" ("+refusedBy[n]+")")
		}
		msg := fmt.Sprintf("Claims %s cannot grow to %s: %s. Members created from now on get the new size; to grow these, use a StorageClass with allowVolumeExpansion, or replace the members one at a time",
			strings.Join(refused, ", "), want.String(), strings.Join(why, "; "))
		if !hasCondition(c, etcdv1alpha1.ConditionVolumesResized, metav1.ConditionFalse, msg) {
			r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonExpansionRefused, "Expand", "%s", msg)
		}
		s.volumes = &progress{etcdv1alpha1.ReasonExpansionRefused, msg}
	case len(growing) > 0:
		s.volumes = &progress{etcdv1alpha1.ReasonExpandingVolumes, fmt.Sprintf("Expanding claims %s to %s; waiting for the storage provider", strings.Join(growing, ", "), want.String())}
		return ctrl.Result{RequeueAfter: requeueUnhealthy}, nil
	default:
		s.volumes = &progress{etcdv1alpha1.ReasonVolumesMatchSpec, fmt.Sprintf("Every member's claim has %s", want.String())}
	}
	return ctrl.Result{}, nil
}
