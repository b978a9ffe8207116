package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// recreateMembers recreates, in a cluster that has formed, the pod of every registered member whose pod
// is gone but whose claim is kept, with the flags the claim recorded: the member restarts on its own
// data with its own ID. This needs no quorum. A failed pod, and once the pod of a member that has been
// down for half of spec.recovery.replaceUnhealthyMemberAfter, is deleted first (verdict.PodToRecreate);
// a member down on a spec no member has run keeps that record onto the current spec (recordRolledOnto).
// A member whose rollback is due (verdict.RollbackDue) is recorded as rolled back (recordRollback), and
// its pod, once gone, is recreated from the spec it last served on; so is, while that holds, any member
// whose claim records the spec it served on, as is, while the rollout tries the current spec on a member
// that has not served on it yet, any other member whose claim records one (verdict.SpecToRestore).
func (r *EtcdClusterReconciler) recreateMembers(ctx context.Context, s *scope) (*verdict.Step, error) {
	if !s.m.Formed() {
		return nil, nil
	}
	var recreated, rolled, rolledBack, kept, waiting []string
	hash := s.m.SpecHash
	rb := s.m.Rollback(hash)
	for _, m := range s.m.Registered() {
		if reason, why := verdict.PodToRecreate(s.m, m, r.Options); reason != "" {
			if err := r.deleteToRecreate(ctx, s, m, hash, reason, why); err != nil {
				return nil, err
			}
			waiting = append(waiting, m.Name)
			continue
		}
		if m.Pod != nil || !m.HasClaim() {
			continue // a claim gone means the data is gone: the planner replaces the member
		}
		served := verdict.SpecToRestore(s.m, m)
		if st, err := r.recreatePod(ctx, s, m, served); err != nil || st != nil {
			return st, err
		}
		switch {
		case served != nil && rb != nil:
			rolledBack = append(rolledBack, m.Name)
		case served != nil:
			kept = append(kept, m.Name) // the rollout tries the current spec on another member
		case m.Claim.Annotations[etcdv1beta1.AnnotationRolledOnto] == hash:
			rolled = append(rolled, m.Name) // restarted by the rollout, onto this spec
		default:
			recreated = append(recreated, m.Name)
		}
	}
	if len(rolledBack) > 0 {
		pods, their, them := podsOf(rolledBack)
		return verdict.Acting(etcdv1beta1.ReasonRolloutFailed,
			fmt.Sprintf("Rolled back %s: recreated on %s data as %s last served, since the current spec did not run; waiting for %s to serve", pods, their, them, them)), nil
	}
	if len(kept) > 0 {
		pods, their, them := podsOf(kept)
		return verdict.Acting(etcdv1beta1.ReasonRecreatingMember,
			fmt.Sprintf("Recreated %s on %s data as %s last served: the current spec %s; waiting for %s to serve", pods, their, them, notRunYet(s.m), them)), nil
	}
	return recreatedStep(recreated, rolled, waiting), nil
}

// deleteToRecreate deletes the pod of m, a member of the cluster s looks at, for verdict.PodToRecreate's
// reason and why, after recording on its claim what its next pod is made from: the rollout's record
// onto the current spec (of hash; recordRolledOnto), or, for a rollback (reason RolloutFailed), the
// rollback (recordRollback), or, while a rollback holds, the spec of the pod it goes from
// (verdict.PodSpecToKeep). Only the pod the pass looked at goes (a newer one is left to show how it
// does); a pod rolled back while its etcd container waits for its image goes at once (grace period 0).
func (r *EtcdClusterReconciler) deleteToRecreate(ctx context.Context, s *scope, m *model.Member, hash, reason, why string) error {
	c, pod := s.cluster, m.Pod
	record := func() error { return r.recordRolledOnto(ctx, s.m, m, hash) }
	switch {
	case reason == etcdv1beta1.ReasonRolloutFailed:
		record = func() error { return r.recordRollback(ctx, m, hash, why) }
	case verdict.PodSpecToKeep(s.m, m):
		record = func() error { return r.recordServedSpec(ctx, m) }
	}
	if err := record(); err != nil {
		return err
	}
	opts := []client.DeleteOption{client.Preconditions{UID: &pod.UID}}
	if reason == etcdv1beta1.ReasonRolloutFailed && m.WaitsForImage() && m.EtcdNeverRan() {
		// its etcd never ran on this pod, so nothing can write to the data as the rolled-back pod starts;
		// the kubelet keeps a pod whose image pull has not returned (a registry that does not answer)
		// until the pull ends, which may be never
		opts = append(opts, client.GracePeriodSeconds(0))
	}
	err := r.Delete(ctx, pod, opts...)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s (%s): %w", m.Name, why, err)
	}
	if reason == etcdv1beta1.ReasonRolloutFailed {
		r.eventAbout(c, memberRef(c, m.Name), corev1.EventTypeWarning, reason, "Delete", "Rolling back member %s to the pod it last served on (%s): deleted its pod to recreate it that way on its data; the rolling update stops", m.Name, why)
	} else {
		r.eventAbout(c, memberRef(c, m.Name), corev1.EventTypeWarning, reason, "Delete", "Deleted pod %s (%s) to recreate it on its data %s", m.Name, why, r.recreatedFrom(s, m))
	}
	return nil
}

// recreatedFrom says what the next pod of m, a member whose pod is deleted to be recreated, is built
// from: a learner's from the spec new members are made from (verdict.SpecToAdd), another member's from
// the spec it served on while the current spec is rolled back or on trial (verdict.SpecToRestore),
// else from the current spec.
func (r *EtcdClusterReconciler) recreatedFrom(s *scope, m *model.Member) string {
	hash := s.m.SpecHash
	if m.Learner() {
		if _, add := verdict.SpecToAdd(s.m); add != "" && add != hash {
			return "from the spec new members are made from (hash " + add + "), not from the current spec, which " + notRunYet(s.m)
		}
		return "with the current spec"
	}
	spec := verdict.SpecToRestore(s.m, m)
	if spec == nil {
		return "with the current spec"
	}
	return "as it last served (spec hash " + r.Options.SpecHash(spec) + "), not from the current spec, which " + notRunYet(s.m)
}

// notRunYet says why pods are not made from the current spec of c now: it was rolled back, or the
// rolling update is trying it on a member that has not served on it yet (model.Cluster.Trial).
func notRunYet(c *model.Cluster) string {
	if rb := c.Rollback(c.SpecHash); rb != nil {
		return "did not run on " + rb.Member + " and was rolled back"
	}
	if t := c.Trial(c.SpecHash); t != nil {
		return "is being tried by the rolling update on " + t.Name + ", which has not served on it yet"
	}
	return "has not run yet"
}

// recreatePod creates the pod of m, a registered member with a claim and no pod: one of served, the
// spec it served on, when the current spec is rolled back or on trial (verdict.SpecToRestore), else a learner's
// joining pod, else a pod of the current spec with the flags its claim recorded; with an event. It
// returns createPod's step when the pod is not created.
func (r *EtcdClusterReconciler) recreatePod(ctx context.Context, s *scope, m *model.Member, served *etcdv1beta1.EtcdCluster) (*verdict.Step, error) {
	c := s.cluster
	var st *verdict.Step
	var err error
	switch {
	case served != nil:
		st, err = r.createMemberPod(ctx, s, r.memberPodOf(s, served, m.StartedAs()))
	case m.Learner():
		st, err = r.createJoiningMember(ctx, s, m.Name, s.m.Etcd.Members)
	default:
		st, err = r.createPod(ctx, s, m.StartedAs())
	}
	if err != nil || st != nil {
		return st, err
	}
	if rb := s.m.Rollback(s.m.SpecHash); served != nil && rb != nil {
		r.eventAbout(c, memberRef(c, m.Name), corev1.EventTypeNormal, "RecreatedMember", "Create", "Recreated pod %s on its data volume %s as it last served (spec hash %s): the current spec did not run, and was rolled back", m.Name, m.Claim.Name, m.ServedSpec())
	} else if t := s.m.Trial(s.m.SpecHash); served != nil && t != nil {
		r.eventAbout(c, memberRef(c, m.Name), corev1.EventTypeNormal, "RecreatedMember", "Create", "Recreated pod %s on its data volume %s as it last served (spec hash %s), not from the current spec: the rolling update is trying that on %s, which has not served on it yet, and restarts %s onto it once it has", m.Name, m.Claim.Name, m.ServedSpec(), t.Name, m.Name)
	} else {
		r.eventAbout(c, memberRef(c, m.Name), corev1.EventTypeNormal, "RecreatedMember", "Create", "Recreated pod %s on its data volume %s", m.Name, m.Claim.Name)
	}
	return nil, nil
}

// recordServedSpec records on m's claim the spec hash of its pod as the spec it served on
// (etcdv1beta1.AnnotationServedSpec), before the pod is deleted to be recreated while a rollback holds
// (verdict.PodSpecToKeep): the pod is made again from that spec's revision (verdict.SpecToRestore).
func (r *EtcdClusterReconciler) recordServedSpec(ctx context.Context, m *model.Member) error {
	if err := r.patchAnnotations(ctx, m.Claim, map[string]string{etcdv1beta1.AnnotationServedSpec: m.PodSpecHash()}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("record on persistentvolumeclaim %s the spec member %s's pod was built from: %w", m.Claim.Name, m.Name, err)
	}
	return nil
}

// recordRollback records on m's claim, before its pod is deleted to roll it back (verdict.RollbackDue,
// why), that it is rolled back from the spec of hash (etcdv1beta1.AnnotationRolledBackFrom, with why as
// AnnotationRollbackReason), and removes the record of the rollout's restart onto it
// (AnnotationRolledOnto): its next pod is made from the spec of the claim's AnnotationServedSpec, and the rollout
// restarts no member onto that spec.
func (r *EtcdClusterReconciler) recordRollback(ctx context.Context, m *model.Member, hash, why string) error {
	if m.RolledBackFrom() == hash && m.Claim.Annotations[etcdv1beta1.AnnotationRolledOnto] == "" {
		return nil // recorded in an earlier pass, whose deletion of the pod failed
	}
	if err := r.patchAnnotations(ctx, m.Claim, map[string]string{
		etcdv1beta1.AnnotationRolledBackFrom: hash, etcdv1beta1.AnnotationRollbackReason: why,
	}, etcdv1beta1.AnnotationRolledOnto, etcdv1beta1.AnnotationUntriedSpecRan); err != nil {
		return fmt.Errorf("record on persistentvolumeclaim %s that member %s is rolled back: %w", m.Claim.Name, m.Name, err)
	}
	return nil
}

// recreatedStep is recreateMembers' step: the members whose pods it recreated (a repair), those it
// recreated for the rolling update (their claims record the current spec), and those whose pods it
// waits to go, by name; nil when it did nothing.
func recreatedStep(recreated, rolled, waiting []string) *verdict.Step {
	switch {
	case len(recreated) > 0:
		pods, their, them := podsOf(recreated)
		return verdict.Acting(etcdv1beta1.ReasonRecreatingMember,
			fmt.Sprintf("Recreated %s on %s data; waiting for %s to rejoin", pods, their, them))
	case len(rolled) > 0:
		pods, their, them := podsOf(rolled)
		return verdict.Acting(etcdv1beta1.ReasonRollingUpdate,
			fmt.Sprintf("Rolling update: recreated %s on %s data with the current spec; waiting for %s to serve", pods, their, them))
	case len(waiting) > 0:
		return verdict.Acting(etcdv1beta1.ReasonRecreatingMember,
			fmt.Sprintf("Waiting for the failed or down member pods %s to go before recreating them", strings.Join(waiting, ", ")))
	}
	return nil
}

// podsOf names the pods of the members names for a message, with the words that refer back to them:
// "the pod of d-1", "its", "it"; "the pods of d-1, d-2", "their", "them".
func podsOf(names []string) (pods, their, them string) {
	if len(names) == 1 {
		return "the pod of " + names[0], "its", "it"
	}
	return "the pods of " + strings.Join(names, ", "), "their", "them"
}
