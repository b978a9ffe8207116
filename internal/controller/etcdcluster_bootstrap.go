package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// bootstrap creates the claims and pods of every initial member of a cluster that has not formed yet
// (a new one, or one an automatic restore recreates) at once, all with --initial-cluster-state=new and
// the full --initial-cluster: they start in parallel and form the cluster as soon as they can reach
// each other.
func (r *EtcdClusterReconciler) bootstrap(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	if s.m.Formed() {
		return nil, nil
	}
	names := resources.InitialMemberNames(c)
	initial := r.Options.InitialCluster(c, names)
	if len(s.m.ForeignClaims) > 0 {
		st := verdict.Blocked(etcdv1alpha1.ReasonInvalidSpec, fmt.Sprintf(
			"Claims %s hold the data of an earlier cluster named %s (kept by storage.retainPolicy Retain); a new cluster does not start on them: delete them, or give this cluster another name",
			strings.Join(s.m.ForeignClaims, ", "), c.Name))
		r.event(c, corev1.EventTypeWarning, "ForeignClaims", "Bootstrap", "%s", st.Message)
		return st, nil
	}
	plan, wait, err := r.restorePlan(ctx, s)
	if err != nil || wait != nil {
		return wait, err
	}
	var created []string
	for _, name := range names {
		have := s.m.Member(name)
		if have != nil && have.Pod != nil {
			continue
		}
		m := resources.Member{Name: name, InitialClusterState: resources.StateNew, InitialCluster: initial}
		if have != nil && have.Claim != nil {
			m = have.StartedAs()
		} else if want := r.Options.BuildPVC(c, m); want != nil {
			if err := r.Create(ctx, want); apierrors.IsAlreadyExists(err) {
				// not seen by this pass (still going away, or not ours): never start a member on a claim
				// this pass did not see as ours; the next pass looks again
				continue
			} else if err != nil {
				return nil, fmt.Errorf("create persistentvolumeclaim %s: %w", want.Name, err)
			}
		}
		if st, err := r.createPod(ctx, s, m); err != nil || st != nil {
			return st, err
		}
		created = append(created, name)
	}
	if len(created) > 0 {
		r.event(c, corev1.EventTypeNormal, "CreatedMembers", "Create", "Created members %s to bootstrap a %d-member cluster", strings.Join(created, ", "), len(names))
		if plan != nil {
			r.event(c, corev1.EventTypeNormal, "RestoringFromBackup", "Restore", "Members %s restore snapshot %s before they start", strings.Join(created, ", "), plan.Key)
		}
	}
	reason, msg := etcdv1alpha1.ReasonBootstrapping, fmt.Sprintf("Waiting for the %d initial members to start and form a cluster", len(names))
	if verdict.Recovering(c) {
		reason = etcdv1alpha1.ReasonRestoringFromBackup
	}
	if plan != nil {
		msg = fmt.Sprintf("Waiting for the %d initial members to restore snapshot %s, start and form a new cluster", len(names), plan.Key)
		if failed := verdict.RestoreFailures(s.m); len(failed) > 0 {
			msg += fmt.Sprintf("; the restore fails (fix what it says, it is retried): %s", strings.Join(failed, "; "))
		}
	}
	return verdict.Acting(reason, msg), nil
}
