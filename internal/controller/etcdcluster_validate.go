package controller

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// validateSpec refuses, before any pod is touched, a spec the admission webhook would have refused but
// that got in anyway (the webhook was not installed or was bypassed): a version the members cannot
// move to from what they run, or extraArgs that etcd must not get (v1beta1.ValidateExtraArgs: flags the
// operator owns or refuses, keys that are not flag names, values with control characters). It blocks
// the pass; the Valid condition says what to change.
func (r *EtcdClusterReconciler) validateSpec(_ context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	problems := verdict.SpecProblems(c)
	if len(problems) == 0 {
		return nil, nil
	}
	msg := strings.Join(problems, "; ") + "; no member is changed until the spec is fixed"
	s.report.Invalid = &verdict.Progress{Reason: etcdv1beta1.ReasonInvalidSpec, Message: msg}
	if !verdict.HasCondition(c, etcdv1beta1.ConditionValid, metav1.ConditionFalse, msg) {
		r.event(c, corev1.EventTypeWarning, etcdv1beta1.ReasonInvalidSpec, "Validate", "%s", msg)
	}
	return verdict.Blocked(etcdv1beta1.ReasonInvalidSpec, msg), nil
}
