package kube

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestPodCheckOf: the API server's answers to a pod's creation, as its plugins word them, are told
// apart: the pod refused, refused for now (and a quota's refusal marked), not checked, accepted, or an
// error that says nothing about the pod.
func TestPodCheckOf(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	forbidden := func(msg string) error { return apierrors.NewForbidden(pods, "demo-0", errors.New(msg)) }
	terminating := apierrors.NewForbidden(pods, "demo-0", errors.New("unable to create new content in namespace x because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	for _, tc := range []struct {
		name                         string
		err                          error
		refused, notNow, quota, unch bool
		terminating, isErr           bool
	}{
		{name: "created", err: nil},
		{name: "exists (passed validation and admission)", err: apierrors.NewAlreadyExists(pods, "demo-0")},
		{name: "invalid", err: apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "demo-0", field.ErrorList{field.Invalid(field.NewPath("spec"), 1, "bad")}), refused: true},
		{name: "pod security", err: forbidden(`violates PodSecurity "restricted:latest": runAsNonRoot != true`), refused: true},
		{name: "limit range", err: forbidden("maximum memory usage per Container is 512Mi, but limit is 1Gi"), refused: true},
		{name: "quota", err: forbidden("exceeded quota: pods, requested: pods=1, used: pods=3, limited: pods=3"), notNow: true, quota: true},
		{name: "service account", err: forbidden(`error looking up service account ns/etcd: serviceaccount "etcd" not found`), notNow: true},
		{name: "priority class", err: forbidden(`no PriorityClass with name etcd-critical was found`), notNow: true},
		{name: "rbac", err: apierrors.NewForbidden(pods, "", errors.New(`User "system:serviceaccount:x:y" cannot create resource "pods" in API group "" in the namespace "z"`)), notNow: true},
		{name: "namespace terminating", err: terminating, notNow: true, terminating: true},
		{name: "webhook without dry run", err: apierrors.NewBadRequest(`admission webhook "inject.example.com" does not support dry run`), unch: true},
		{name: "timeout", err: apierrors.NewTimeoutError("request timed out", 1), isErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PodCheckOf(tc.err)
			if (err != nil) != tc.isErr {
				t.Fatalf("error %v, want one: %v", err, tc.isErr)
			}
			if (got.Refused != "") != tc.refused || (got.NotNow != "") != tc.notNow || got.Quota != tc.quota || (got.Unchecked != "") != tc.unch {
				t.Errorf("%+v, want refused %v, not now %v, quota %v, unchecked %v", got, tc.refused, tc.notNow, tc.quota, tc.unch)
			}
			if got.NamespaceTerminating != tc.terminating {
				t.Errorf("NamespaceTerminating %v, want %v", got.NamespaceTerminating, tc.terminating)
			}
			if got.Accepted() != (!tc.refused && !tc.notNow) {
				t.Errorf("Accepted() = %v", got.Accepted())
			}
		})
	}
}
