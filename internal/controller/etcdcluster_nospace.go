package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// noSpaceMargin is the share of the quota a database may fill for its NOSPACE alarm to be disarmed:
// below it, writes have room again; above it, the alarm would come back at once.
const noSpaceMargin = 0.9

// reconcileNoSpace handles etcd's NOSPACE alarm once every member runs the current spec: it disarms
// the alarm of each member whose database now fits its quota with room to spare (the quota was raised
// in spec.options, or the database was compacted and defragmented), and otherwise says, in the
// Progressing condition and a Warning event, what would let writes in again.
func (r *EtcdClusterReconciler) reconcileNoSpace(ctx context.Context, s *scope) (*step, error) {
	c := s.cluster
	quota := resources.QuotaBackendBytes(c)
	var alarmed []*model.Member
	var full []string
	for _, m := range s.m.Listed() {
		if m.NoSpace() {
			alarmed = append(alarmed, m)
		}
		// every member's database counts: one that does not fit would raise the alarm again at once
		if st := m.Status; st == nil || float64(st.DBSizeBytes) >= noSpaceMargin*float64(quota) {
			var size int64
			if st != nil {
				size = st.DBSizeBytes
			}
			full = append(full, fmt.Sprintf("%s (%d bytes)", m.Name, size))
		}
	}
	if len(alarmed) == 0 {
		return nil, nil
	}
	for _, m := range s.m.Listed() {
		if !m.Serving() {
			return nil, nil // a member is still starting: judge the alarms of all at once
		}
	}
	if len(full) > 0 {
		sort.Strings(full)
		msg := fmt.Sprintf("NOSPACE: etcd refuses writes: the database of %s fills more than %d%% of the %d-byte quota; raise spec.options.quotaBackendBytes (the members roll, then the alarm is disarmed), or compact and defragment the members",
			strings.Join(full, ", "), int(noSpaceMargin*100), quota)
		if !hasCondition(c, etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, msg) {
			r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonNoSpace, "Disarm", "%s", msg)
		}
		return blockedStep(etcdv1alpha1.ReasonNoSpace, msg), nil
	}
	var names []string
	for _, m := range alarmed {
		callCtx, cancel := context.WithTimeout(ctx, r.etcdTimeout())
		err := s.etcdClient.DisarmNoSpace(callCtx, m.ID())
		cancel()
		if err != nil {
			return nil, err
		}
		names = append(names, m.Name)
	}
	sort.Strings(names)
	r.event(c, corev1.EventTypeNormal, "DisarmedNoSpace", "Disarm", "Disarmed the NOSPACE alarm of %s: the databases fit the %d-byte quota again; writes are accepted", strings.Join(names, ", "), quota)
	return actingStep(etcdv1alpha1.ReasonNoSpace, fmt.Sprintf("Disarmed the NOSPACE alarm of %s", strings.Join(names, ", "))), nil
}
