package kube

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PodCheck is what the API server answered a dry run of a pod's creation (CheckPod).
type PodCheck struct {
	// Refused is the API server's message when it refuses the pod itself: validation (a request above
	// its limit, a toleration's unknown operator; 422 Invalid) or admission (Pod Security, a LimitRange,
	// a ValidatingAdmissionPolicy or a webhook; 403 Forbidden). "" otherwise.
	Refused string
	// NotNow is the API server's message when it refuses the pod for what may change without the pod
	// changing: a ResourceQuota that is full ("exceeded quota"), a service account or priority class
	// that does not exist (yet), a namespace being deleted, or the caller lacking the right to create
	// pods. "" otherwise.
	NotNow string
	// Quota reports that NotNow is a ResourceQuota's refusal.
	Quota bool
	// NamespaceTerminating reports that NotNow is the refusal of any new object in a namespace being
	// deleted.
	NamespaceTerminating bool
	// Unchecked is why the dry run could not tell (a pod admission webhook that does not support dry
	// runs); "" otherwise. Such a pod is as likely to be accepted as refused.
	Unchecked string
}

// Accepted reports whether the API server would create the pod (or cannot tell, Unchecked).
func (p PodCheck) Accepted() bool { return p.Refused == "" && p.NotNow == "" }

// CheckPod creates pod as a dry run (nothing is written) and says what the API server answered: the
// pod goes through validation and every admission plugin and webhook, as a real creation does. A pod
// of a name that exists passes them first and is then answered AlreadyExists, which counts as
// accepted, so the pod of a member that runs can be checked under its own name. The error is that of
// the request when its answer says nothing about the pod (a timeout, the API server unavailable).
func CheckPod(ctx context.Context, c client.Client, pod *corev1.Pod) (PodCheck, error) {
	return PodCheckOf(c.Create(ctx, pod, client.DryRunAll))
}

// NamespaceTerminating reports whether err is the API server's refusal to create an object in a
// namespace being deleted: Forbidden, with cause NamespaceTerminating (the NamespaceLifecycle admission
// plugin). It is final: a namespace never leaves Terminating, and the namespace controller deletes
// every object in it.
func NamespaceTerminating(err error) bool {
	return apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}

// PodCheckOf classifies err, the answer to the creation of a pod (or its dry run), as CheckPod does.
func PodCheckOf(err error) (PodCheck, error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return PodCheck{}, nil
	case apierrors.IsForbidden(err) && strings.Contains(msg, "exceeded quota"):
		return PodCheck{NotNow: msg, Quota: true}, nil
	case NamespaceTerminating(err):
		return PodCheck{NotNow: msg, NamespaceTerminating: true}, nil
	case apierrors.IsForbidden(err) && (strings.Contains(msg, "error looking up service account") ||
		strings.Contains(msg, "no PriorityClass with name") || strings.Contains(msg, "cannot create resource")):
		// the ServiceAccount and Priority admission plugins (an object the pod names, not created yet);
		// RBAC ("User … cannot create resource \"pods\"")
		return PodCheck{NotNow: msg}, nil
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err):
		return PodCheck{Refused: msg}, nil
	case apierrors.IsBadRequest(err) && strings.Contains(msg, "does not support dry run"):
		return PodCheck{Unchecked: msg}, nil
	}
	return PodCheck{}, err
}
