package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
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
		if !verdict.HasCondition(c, etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, v.Full) {
			r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonNoSpace, "Disarm", "%s", v.Full)
		}
		return verdict.Blocked(etcdv1alpha1.ReasonNoSpace, v.Full), nil
	}
	if len(v.Disarm) == 0 {
		return nil, nil
	}
	var names []string
	for _, m := range v.Disarm {
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
	return verdict.Acting(etcdv1alpha1.ReasonNoSpace, fmt.Sprintf("Disarmed the NOSPACE alarm of %s", strings.Join(names, ", "))), nil
}
