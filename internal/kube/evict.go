package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// evictionTimeout bounds an eviction request: the API server answers a budget it has not computed
// with 429 and Retry-After, which the client would otherwise wait out and retry for minutes.
const evictionTimeout = 5 * time.Second

// Evict takes pod down through the Eviction API, so that the PodDisruptionBudget named budget (in the
// pod's namespace) is honoured against disruptions that started after the caller looked: it returns
// why the budget has no room instead of evicting (it has not been computed yet, or allows no
// disruption now, or the API server refused with 429). With force it deletes the pod instead, past
// any budget (the only member of a 1-member cluster, whose budget never allows an eviction; a pod
// that is not Ready, which takes down nothing that was up). A UID precondition makes sure only the
// pod the caller looked at goes; a pod already gone or replaced is no error.
func Evict(ctx context.Context, c client.Client, pod *corev1.Pod, budget string, force bool) (refused string, err error) {
	pre := &metav1.Preconditions{UID: &pod.UID}
	if force {
		err = c.Delete(ctx, pod, &client.DeleteOptions{Preconditions: pre})
	} else {
		pdb := &policyv1.PodDisruptionBudget{}
		switch err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: budget}, pdb); {
		case err != nil && !apierrors.IsNotFound(err):
			return "", fmt.Errorf("get poddisruptionbudget %s: %w", budget, err)
		case err != nil: // not created yet: the eviction is not limited
		case pdb.Status.ObservedGeneration < pdb.Generation:
			return "the budget has not been computed yet", nil
		case pdb.Status.DisruptionsAllowed < 1:
			return fmt.Sprintf("%d pods healthy, %d required", pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy), nil
		}
		evictCtx, cancel := context.WithTimeout(ctx, evictionTimeout)
		defer cancel()
		err = c.SubResource("eviction").Create(evictCtx, pod, &policyv1.Eviction{DeleteOptions: &metav1.DeleteOptions{Preconditions: pre}})
		if apierrors.IsTooManyRequests(err) || errors.Is(err, context.DeadlineExceeded) {
			return err.Error(), nil
		}
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return "", fmt.Errorf("take pod %s down: %w", pod.Name, err)
	}
	return "", nil
}
