package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// reconcileNoSpace handles etcd's NOSPACE alarm once every member runs the current spec: it disarms
// the alarm of each member whose database now fits its quota with room to spare (the quota was raised
// in spec.options, or the database was compacted and defragmented), and otherwise says, in the
// Progressing condition and a Warning event, what would let writes in again (verdict.JudgeNoSpace).
func (r *EtcdClusterReconciler) reconcileNoSpace(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	quota := resources.QuotaBackendBytes(c)
	v := verdict.JudgeNoSpace(s.m, quota)
	if v.Full != "" {
		if !verdict.HasCondition(c, etcdv1beta1.ConditionProgressing, metav1.ConditionFalse, v.Full) &&
			!verdict.HasCondition(c, etcdv1beta1.ConditionProgressing, metav1.ConditionTrue, v.Full) {
			r.event(c, corev1.EventTypeWarning, etcdv1beta1.ReasonNoSpace, "Disarm", "%s", v.Full)
		}
		if len(v.Defragment) > 0 {
			if st, err := r.defragmentOne(ctx, s, v.Defragment[0], "its data fits the quota, its file does not (NOSPACE)"); err != nil || st != nil {
				return verdict.Acting(etcdv1beta1.ReasonNoSpace, v.Full), err
			}
		}
		return verdict.Blocked(etcdv1beta1.ReasonNoSpace, v.Full), nil
	}
	if len(v.Disarm) == 0 {
		return nil, nil
	}
	var names []string
	var ids []uint64
	for _, m := range v.Disarm {
		names, ids = append(names, m.Name), append(ids, m.ID())
	}
	if err := r.disarm(ctx, ids, s.etcdClient.DisarmNoSpace); err != nil {
		return nil, err
	}
	sort.Strings(names)
	r.event(c, corev1.EventTypeNormal, "DisarmedNoSpace", "Disarm", "Disarmed the NOSPACE alarm of %s: the databases fit the %d-byte quota again; writes are accepted", strings.Join(names, ", "), quota)
	return verdict.Acting(etcdv1beta1.ReasonNoSpace, fmt.Sprintf("Disarmed the NOSPACE alarm of %s", strings.Join(names, ", "))), nil
}

// disarmCorrupt disarms the CORRUPT alarms of members etcd no longer lists (replaced): they only block writes.
func (r *EtcdClusterReconciler) disarmCorrupt(ctx context.Context, s *scope) (*verdict.Step, error) {
	ids := verdict.CorruptToDisarm(s.m)
	if len(ids) == 0 {
		return nil, nil
	}
	if err := r.disarm(ctx, ids, s.etcdClient.DisarmCorrupt); err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("Disarmed the CORRUPT alarm of removed members %016x: writes are accepted again", ids)
	r.event(s.cluster, corev1.EventTypeNormal, "DisarmedCorrupt", "Disarm", "%s", msg)
	return verdict.Acting(etcdv1beta1.ReasonCorrupt, msg), nil
}

// disarm calls disarm for each member ID, each call bounded by the etcd timeout; it stops at an error.
func (r *EtcdClusterReconciler) disarm(ctx context.Context, ids []uint64, disarm func(context.Context, uint64) error) error {
	for _, id := range ids {
		callCtx, cancel := context.WithTimeout(ctx, r.etcdTimeout())
		err := disarm(callCtx, id)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}
