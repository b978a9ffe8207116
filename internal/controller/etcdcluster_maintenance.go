package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/rollout"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// defragTimeout bounds one member's defragmentation: etcd rewrites the whole database file, seconds per
// GiB, and the quota allows up to 100 GiB.
const defragTimeout = 10 * time.Minute

// reconcileMaintenance carries out spec.maintenance.defragmentation on a settled cluster (every member
// a healthy voter on the current spec; the phases before it act otherwise): it records the members
// that are due in status.maintenance and defragments the first of them, one member per pass, the
// leader last after moving leadership to a follower.
func (r *EtcdClusterReconciler) reconcileMaintenance(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	if c.Spec.Maintenance == nil || c.Spec.Maintenance.Defragmentation == nil {
		if st := c.Status.Maintenance; st != nil && st.RequestedDefragmentation == "" {
			st.PendingDefragmentation = nil // the policy was removed: nothing is due any more
		}
		return nil, nil
	}
	if !s.m.Answered() {
		return nil, nil
	}
	plan, err := verdict.PlanDefragmentation(s.m, time.Now())
	if err != nil {
		return verdict.Blocked(etcdv1beta1.ReasonInvalidSpec, err.Error()), nil
	}
	if c.Status.Maintenance == nil {
		c.Status.Maintenance = &etcdv1beta1.MaintenanceStatus{}
	}
	st := c.Status.Maintenance
	if !plan.ScheduleTime.IsZero() {
		st.LastScheduleTime = &metav1.Time{Time: plan.ScheduleTime}
	}
	st.PendingDefragmentation = plan.Pending
	for _, n := range plan.Pending {
		if why := plan.Why[n]; why != "" {
			log.FromContext(ctx).Info("Defragmentation due", "etcdcluster", klog.KObj(c), "member", n, "reason", why)
		}
	}
	if len(plan.Pending) == 0 {
		return nil, nil
	}
	return r.defragmentOne(ctx, s, s.m.Member(plan.Pending[0]), "it is due")
}

// defragmentOne defragments mem, or, when it leads a cluster of several voters, first moves
// leadership to a healthy follower (why says why mem is defragmented, for the move's event). It returns
// nil when mem did not answer in this pass.
func (r *EtcdClusterReconciler) defragmentOne(ctx context.Context, s *scope, mem *model.Member, why string) (*verdict.Step, error) {
	if leader := s.m.Leader(); leader != nil && leader == mem && s.m.Voters() > 1 {
		for _, f := range s.m.Listed() {
			if f != mem && f.Voter() && f.Healthy() {
				return r.moveLeader(ctx, s, rollout.Action{Member: mem.Name, ID: mem.ID(), Target: f.Name, TargetID: f.ID(),
					Reason: fmt.Sprintf("%s is to be defragmented (%s), and leads", mem.Name, why)})
			}
		}
	}
	if mem.Status == nil {
		return nil, nil // it did not answer; the phases before this one wait for it
	}
	return r.defragment(ctx, s, mem.Name, mem.Status.Endpoint, mem.Status.DBSizeBytes)
}

// defragment defragments member name at endpoint, whose database file was before bytes, and records
// it in an event and in status.maintenance (no longer pending).
func (r *EtcdClusterReconciler) defragment(ctx context.Context, s *scope, name, endpoint string, before int64) (*verdict.Step, error) {
	c := s.cluster
	if c.Status.Maintenance == nil {
		c.Status.Maintenance = &etcdv1beta1.MaintenanceStatus{}
	}
	st := c.Status.Maintenance
	callCtx, cancel := context.WithTimeout(ctx, defragTimeout)
	defer cancel()
	start := time.Now()
	err := s.etcdClient.Defragment(callCtx, endpoint)
	took := time.Since(start)
	if err != nil {
		r.eventAbout(c, memberRef(c, name), corev1.EventTypeWarning, "DefragmentationFailed", "Defragment", "Defragmenting %s failed after %s: %v; retrying", name, took.Round(time.Millisecond), err)
		return nil, fmt.Errorf("defragment %s: %w", name, err)
	}
	after := before
	statusCtx, cancelStatus := context.WithTimeout(ctx, r.etcdTimeout())
	defer cancelStatus()
	if now, err := s.etcdClient.Status(statusCtx, endpoint); err == nil {
		after = now.DBSizeBytes
	}
	st.PendingDefragmentation = slices.DeleteFunc(st.PendingDefragmentation, func(n string) bool { return n == name })
	st.LastDefragmentation = &etcdv1beta1.DefragmentationRecord{Member: name, Time: metav1.Now(),
		DurationMillis: took.Milliseconds(), DBSizeBeforeBytes: before, DBSizeAfterBytes: after}
	msg := fmt.Sprintf("Defragmented %s in %s: its database file went from %s to %s", name, took.Round(time.Millisecond),
		verdict.FormatBytes(before), verdict.FormatBytes(after))
	if rest := st.PendingDefragmentation; len(rest) > 0 {
		msg += "; next: " + strings.Join(rest, ", ")
	}
	r.eventAbout(c, memberRef(c, name), corev1.EventTypeNormal, "Defragmented", "Defragment", "%s", msg)
	return verdict.Acting(etcdv1beta1.ReasonDefragmenting, msg), nil
}
