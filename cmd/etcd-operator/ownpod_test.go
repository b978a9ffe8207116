package main

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podReader answers Get with errs in turn, then with pod, and counts the calls.
type podReader struct {
	client.Reader
	errs  []error
	pod   corev1.Pod
	calls int
}

func (r *podReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.calls++
	if len(r.errs) > 0 {
		err := r.errs[0]
		r.errs = r.errs[1:]
		return err
	}
	r.pod.DeepCopyInto(obj.(*corev1.Pod))
	return nil
}

// TestOwnPodRetries: the operator reads its own pod again while the API server does not answer, gives
// up with the last error after ownPodBackoff, and at once when the pod is missing or the read is
// forbidden (retrying would not change the answer).
func TestOwnPodRetries(t *testing.T) {
	t.Setenv("POD_NAME", "op")
	t.Setenv("POD_NAMESPACE", "sys")
	defer func(b wait.Backoff) { ownPodBackoff = b }(ownPodBackoff)
	ownPodBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 4}
	ctx := context.Background()
	unavailable := apierrors.NewServiceUnavailable("the API server is starting")
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "op", Namespace: "sys", Labels: map[string]string{"app": "etcd-operator"}}}

	r := &podReader{errs: []error{unavailable, unavailable}, pod: pod}
	got, err := ownPod(ctx, r)
	if err != nil || got.Labels["app"] != "etcd-operator" || r.calls != 3 {
		t.Errorf("after two failed reads: pod %v, err %v, %d reads; want the pod after 3 reads", got, err, r.calls)
	}

	r = &podReader{errs: []error{unavailable, unavailable, unavailable, unavailable, unavailable}, pod: pod}
	if _, err := ownPod(ctx, r); !apierrors.IsServiceUnavailable(err) || r.calls != ownPodBackoff.Steps {
		t.Errorf("an API server that never answers: err %v after %d reads; want ServiceUnavailable after %d", err, r.calls, ownPodBackoff.Steps)
	}

	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "op", nil)
	r = &podReader{errs: []error{forbidden}, pod: pod}
	if _, err := ownPod(ctx, r); !apierrors.IsForbidden(err) || r.calls != 1 {
		t.Errorf("a forbidden read: err %v after %d reads; want Forbidden after 1", err, r.calls)
	}

	t.Setenv("POD_NAME", "")
	r = &podReader{pod: pod}
	if _, err := ownPod(ctx, r); err == nil || r.calls != 0 {
		t.Errorf("without POD_NAME: err %v after %d reads; want an error without a read", err, r.calls)
	}
}
