package controller

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// desiredMembers returns the names of members 0..replicas-1.
func desiredMembers(c *etcdv1alpha1.EtcdCluster) []string {
	n := int(c.Spec.ReplicasOrDefault())
	names := make([]string, n)
	for i := range names {
		names[i] = resources.MemberName(c, i)
	}
	return names
}

// formed reports whether the cluster has ever formed: etcd answered, now or in an earlier pass. A
// formed cluster never bootstraps again: a lost member is replaced, never started as "new".
func formed(s *scope) bool {
	return s.etcd != nil || s.cluster.Status.ClusterID != ""
}

// reconcileMembers creates the pods and claims of the members: all at once for the initial bootstrap;
// once the cluster has formed, it recreates the pod of a member whose pod is gone but whose data is
// kept, then carries out the one next membership action of the planner.
func (r *EtcdClusterReconciler) reconcileMembers(ctx context.Context, s *scope) (ctrl.Result, error) {
	if err := r.syncClaimOwnership(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if recovering(s.cluster) {
		return r.reconcileRecovery(ctx, s)
	}
	if !formed(s) {
		return r.bootstrap(ctx, s)
	}
	if acted, err := r.restoreMemberPods(ctx, s); err != nil || acted {
		return ctrl.Result{}, err
	}
	if s.etcd == nil {
		d := observeDataLoss(s)
		s.dataLoss = &d
		if d.permanent() {
			return r.quorumDataLost(ctx, s, d)
		}
		s.stalled = &progress{etcdv1alpha1.ReasonQuorumLost,
			"No member answers: pods whose data is kept are recreated; no membership change is made until a quorum answers again"}
		return ctrl.Result{}, nil
	}
	return r.reconcileMembership(ctx, s)
}

// restoreMemberPods recreates the pod of every registered member whose pod is gone but whose claim is
// kept, with the flags the claim recorded: the member restarts on its own data with its own ID. This
// needs no quorum. A failed pod (evicted, or its node gone) is deleted first. It reports whether it
// acted.
func (r *EtcdClusterReconciler) restoreMemberPods(ctx context.Context, s *scope) (bool, error) {
	c := s.cluster
	var recreated, waiting []string
	for _, name := range r.registeredMembers(s) {
		pod, hasPod := s.pods[name]
		if hasPod && pod.Status.Phase == corev1.PodFailed && pod.DeletionTimestamp == nil {
			// An evicted or failed pod never runs again (restartPolicy Always restarts containers in place,
			// not failed pods): delete it so that it is recreated on its claim.
			if err := r.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("delete failed pod %s: %w", name, err)
			}
			r.event(c, corev1.EventTypeWarning, "DeletedFailedPod", "Delete", "Deleted failed pod %s (%s) to recreate it on its data", name, pod.Status.Reason)
			waiting = append(waiting, name)
			continue
		}
		if hasPod {
			continue
		}
		pvc, hasPVC := s.pvcs[resources.PVCName(name)]
		if !hasPVC || pvc.DeletionTimestamp != nil {
			continue // the data is gone: the planner replaces the member
		}
		if err := r.createPod(ctx, s, memberFromPVC(pvc, name)); err != nil || s.blocked != nil {
			return s.blocked != nil, err
		}
		r.event(c, corev1.EventTypeNormal, "RecreatedMember", "Create", "Recreated pod %s on its data volume %s", name, pvc.Name)
		recreated = append(recreated, name)
	}
	switch {
	case len(recreated) > 0:
		s.progress = &progress{etcdv1alpha1.ReasonRecreatingMember,
			fmt.Sprintf("Recreated member pods %s on their data; waiting for them to rejoin", strings.Join(recreated, ", "))}
	case len(waiting) > 0:
		s.progress = &progress{etcdv1alpha1.ReasonRecreatingMember,
			fmt.Sprintf("Waiting for failed member pods %s to go before recreating them", strings.Join(waiting, ", "))}
	}
	return s.progress != nil, nil
}

// registeredMembers returns the names of the members the cluster has: those etcd lists when it
// answered; otherwise those the status last listed.
func (r *EtcdClusterReconciler) registeredMembers(s *scope) []string {
	var names []string
	if s.etcd != nil {
		for _, m := range s.etcd.members {
			names = append(names, memberName(r.Options, s.cluster, m))
		}
	} else {
		for _, m := range s.cluster.Status.Members {
			names = append(names, m.Name)
		}
	}
	sort.Strings(names)
	return names
}

// memberName returns the name of an etcd member: the name it reports, or, for a learner that has not
// started, the member name in its peer URL; its hex ID when neither is known.
func memberName(opts resources.Options, c *etcdv1alpha1.EtcdCluster, m etcd.Member) string {
	if m.Name != "" {
		return m.Name
	}
	for _, u := range m.PeerURLs {
		if pu, err := url.Parse(u); err == nil {
			host, _, _ := strings.Cut(pu.Hostname(), ".")
			if _, ok := resources.MemberOrdinal(c, host); ok && u == opts.PeerURL(c, host) {
				return host
			}
		}
	}
	return etcd.FormatID(m.ID)
}

// bootstrap creates the claims and pods of every initial member at once, all with
// --initial-cluster-state=new and the full --initial-cluster: they start in parallel and form the
// cluster as soon as they can reach each other.
func (r *EtcdClusterReconciler) bootstrap(ctx context.Context, s *scope) (ctrl.Result, error) {
	c := s.cluster
	names := desiredMembers(c)
	initial := r.Options.InitialCluster(c, names)
	if len(s.foreignPVCs) > 0 {
		sort.Strings(s.foreignPVCs)
		s.blocked = &progress{etcdv1alpha1.ReasonInvalidSpec, fmt.Sprintf(
			"Claims %s hold the data of an earlier cluster named %s (kept by storage.retainPolicy Retain); a new cluster does not start on them: delete them, or give this cluster another name",
			strings.Join(s.foreignPVCs, ", "), c.Name)}
		r.event(c, corev1.EventTypeWarning, "ForeignClaims", "Bootstrap", "%s", s.blocked.message)
		return ctrl.Result{}, nil
	}
	plan, err := r.restorePlan(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	if (recovering(c) || c.Spec.Bootstrap != nil && c.Spec.Bootstrap.Restore != nil) && plan == nil {
		return ctrl.Result{}, nil // s says what the restore waits for
	}
	var created []string
	for _, name := range names {
		if _, ok := s.pods[name]; ok {
			continue
		}
		m := resources.Member{Name: name, InitialClusterState: resources.StateNew, InitialCluster: initial}
		if pvc, ok := s.pvcs[resources.PVCName(name)]; ok {
			m = memberFromPVC(pvc, name)
		} else if want := r.Options.BuildPVC(c, m); want != nil {
			if err := r.Create(ctx, want); apierrors.IsAlreadyExists(err) {
				// not seen by this pass (still going away, or not ours): never start a member on a claim
				// this pass did not see as ours; the next pass looks again
				continue
			} else if err != nil {
				return ctrl.Result{}, fmt.Errorf("create persistentvolumeclaim %s: %w", want.Name, err)
			}
		}
		if err := r.createPod(ctx, s, m); err != nil || s.blocked != nil {
			return ctrl.Result{}, err
		}
		created = append(created, name)
	}
	if len(created) > 0 {
		r.event(c, corev1.EventTypeNormal, "CreatedMembers", "Create", "Created members %s to bootstrap a %d-member cluster", strings.Join(created, ", "), len(names))
		if plan != nil {
			r.event(c, corev1.EventTypeNormal, "RestoringFromBackup", "Restore", "Members %s restore snapshot %s before they start", strings.Join(created, ", "), plan.Key)
		}
	}
	s.progress = &progress{etcdv1alpha1.ReasonBootstrapping,
		fmt.Sprintf("Waiting for the %d initial members to start and form a cluster", len(names))}
	if plan != nil {
		s.progress.message = fmt.Sprintf("Waiting for the %d initial members to restore snapshot %s, start and form a new cluster", len(names), plan.Key)
		if failed := restoreFailures(s); len(failed) > 0 {
			s.progress.message += fmt.Sprintf("; the restore fails (fix what it says, it is retried): %s", strings.Join(failed, "; "))
		}
	}
	return ctrl.Result{}, nil
}

// neverStarted reports whether etcd lists member name as never started (it has no name yet): an
// initial member of a restored cluster whose restore did not finish still needs the snapshot, and the
// cluster token the others were restored with.
func (r *EtcdClusterReconciler) neverStarted(s *scope, name string) bool {
	if s.etcd == nil {
		return false
	}
	for _, m := range s.etcd.members {
		if m.Name == "" && memberName(r.Options, s.cluster, m) == name {
			return true
		}
	}
	return false
}

// memberFromPVC returns how member name was first started, as its claim records it.
func memberFromPVC(pvc *corev1.PersistentVolumeClaim, name string) resources.Member {
	state := pvc.Annotations[etcdv1alpha1.AnnotationInitialClusterState]
	if state == "" {
		state = resources.StateNew
	}
	return resources.Member{Name: name, InitialClusterState: state,
		InitialCluster: pvc.Annotations[etcdv1alpha1.AnnotationInitialCluster]}
}

// createPod creates member m's pod; one that already exists is left as it is. A member of the initial
// bootstrap of a cluster created from a backup gets the init container that restores the snapshot;
// while that snapshot cannot be resolved, no pod is created and s says why.
func (r *EtcdClusterReconciler) createPod(ctx context.Context, s *scope, m resources.Member) error {
	if m.InitialClusterState == resources.StateNew && (!formed(s) || r.neverStarted(s, m.Name)) {
		// only before the cluster first forms, or for an initial member that never started: afterwards
		// a recreated member starts on its own data and must not depend on the backup storage (its
		// credentials, its availability) to restart
		plan, err := r.restorePlan(ctx, s)
		if err != nil {
			return err
		}
		if plan == nil && (s.blocked != nil || s.progress != nil) {
			return nil
		}
		m.Restore = plan
	}
	pod := r.Options.BuildPod(s.cluster, m)
	if err := r.Create(ctx, pod); apierrors.IsAlreadyExists(err) {
		// a pod of that name that this pass did not see as a member (its labels were changed, or it is
		// not ours): never replace it blindly, and do not retry in a loop
		s.blocked = &progress{etcdv1alpha1.ReasonForeignObject, fmt.Sprintf(
			"Pod %s exists but is not labelled as a member of this cluster (%s=%s): restore its labels or delete it", m.Name, etcdv1alpha1.LabelCluster, s.cluster.Name)}
		return nil
	} else if err != nil {
		return fmt.Errorf("create pod %s: %w", m.Name, err)
	}
	s.pods[m.Name] = pod
	return nil
}

// syncClaimOwnership makes the cluster own its members' claims under retainPolicy Delete and releases
// them under Retain, so that a change of the policy applies to the claims that exist, not only to new
// ones.
func (r *EtcdClusterReconciler) syncClaimOwnership(ctx context.Context, s *scope) error {
	c := s.cluster
	retain := c.Spec.Storage.RetainPolicy == etcdv1alpha1.RetainPolicyRetain
	for _, pvc := range s.pvcs {
		owned := metav1.IsControlledBy(pvc, c)
		if owned != retain || pvc.DeletionTimestamp != nil {
			continue
		}
		patch := client.MergeFrom(pvc.DeepCopy())
		if retain {
			pvc.OwnerReferences = nil
		} else {
			pvc.OwnerReferences = []metav1.OwnerReference{resources.OwnerReference(c)}
		}
		if err := r.Patch(ctx, pvc, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("set the owner of persistentvolumeclaim %s for retainPolicy %s: %w", pvc.Name, c.Spec.Storage.RetainPolicy, err)
		}
	}
	return nil
}
