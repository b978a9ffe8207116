package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/version"
)

// validateSpec refuses, before any pod is touched, a spec the admission webhook would have refused but
// that got in anyway (the webhook was not installed or was bypassed): a version the members cannot
// move to from what they run, or extraArgs that override flags the operator owns. It blocks the pass;
// the Valid condition says what to change.
func (r *EtcdClusterReconciler) validateSpec(_ context.Context, s *scope) (*step, error) {
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
		return nil, nil
	}
	msg := strings.Join(problems, "; ") + "; no member is changed until the spec is fixed"
	s.report.invalid = &progress{etcdv1alpha1.ReasonInvalidSpec, msg}
	if !hasCondition(c, etcdv1alpha1.ConditionValid, metav1.ConditionFalse, msg) {
		r.event(c, corev1.EventTypeWarning, etcdv1alpha1.ReasonInvalidSpec, "Validate", "%s", msg)
	}
	return blockedStep(etcdv1alpha1.ReasonInvalidSpec, msg), nil
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
