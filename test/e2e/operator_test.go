//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

const (
	// operatorNamespace is where dist/install.yaml and config/local install the operator.
	operatorNamespace = "etcd-operator-system"
	// admissionTimeout bounds the wait for the operator to admit EtcdClusters after an install or a
	// restart of its pod.
	admissionTimeout = 120 * time.Second
	// admissionStreak is how many server-side dry runs in a row must be accepted.
	admissionStreak = 3
)

// operatorSelector selects the operator's pods.
var operatorSelector = client.MatchingLabels{"app.kubernetes.io/name": "etcd-operator"}

// waitAdmission waits, as the README's install steps and hack/wait-admission.sh do, until an
// EtcdCluster can be created: the operator's Deployment is rolled out, no operator pod is terminating
// or left from an earlier rollout, and a server-side dry run of creating an EtcdCluster (through the
// mutating and validating webhooks and their Service) is accepted admissionStreak times in a row. It
// returns how long that took, or the last reason after timeout.
func waitAdmission(timeout time.Duration) (time.Duration, error) {
	return waitAdmissionIn(operatorNamespace, timeout)
}

// waitAdmissionIn is waitAdmission of the operator installed in namespace ns.
func waitAdmissionIn(ns string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	streak := 0
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if last = operatorRolledOutIn(ctx, ns); last == nil {
			last = dryRunCreate(ctx)
		}
		if last != nil {
			streak = 0
			return false, nil
		}
		streak++
		return streak == admissionStreak, nil
	})
	if err != nil {
		return time.Since(start), fmt.Errorf("EtcdClusters are not admitted within %s: %w", timeout, last)
	}
	return time.Since(start), nil
}

// operatorRolledOut returns nil when the operator's Deployment has finished its rollout and every
// operator pod is one of it, ready, and not terminating.
func operatorRolledOut(ctx context.Context) error {
	return operatorRolledOutIn(ctx, operatorNamespace)
}

// operatorRolledOutIn is operatorRolledOut of the operator installed in namespace ns.
func operatorRolledOutIn(ctx context.Context, ns string) error {
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "etcd-operator"}, d); err != nil {
		return err
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	st := d.Status
	if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.AvailableReplicas != want || st.Replicas != want {
		return fmt.Errorf("deployment rolling out: generation %d observed %d, %d updated, %d available, %d in all, want %d",
			d.Generation, st.ObservedGeneration, st.UpdatedReplicas, st.AvailableReplicas, st.Replicas, want)
	}
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ns), operatorSelector); err != nil {
		return err
	}
	if int32(len(pods.Items)) != want {
		return fmt.Errorf("%d operator pods, want %d (an old one is still terminating)", len(pods.Items), want)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || !ready(&p) {
			return fmt.Errorf("operator pod %s is terminating or not ready", p.Name)
		}
	}
	return nil
}

// dryRunCreate asks the API server to create an EtcdCluster in namespace default without storing it.
func dryRunCreate(ctx context.Context) error {
	c := testutil.EtcdCluster("", testutil.InNamespace("default"), testutil.WithReplicas(3), testutil.WithStorageSize("1Gi"),
		func(c *etcdv1beta1.EtcdCluster) { c.GenerateName = "admission-check-" })
	return k8s.Create(ctx, c, client.DryRunAll)
}

// TestOperatorRolloutKeepsAdmission: while the operator's Deployment rolls to a new pod (an upgrade of
// the operator), EtcdClusters keep being admitted: the new pod takes requests only once the caBundles
// trust its certificate, and the old one keeps serving through its preStop sleep while the webhook
// Service stops routing to it. A server-side dry run of a create every 200 ms, from before the rollout
// until after the old pod is gone, is never refused.
func TestOperatorRolloutKeepsAdmission(t *testing.T) {
	if took, err := waitAdmission(admissionTimeout); err != nil {
		t.Fatal(err)
	} else if took > 5*time.Second {
		t.Logf("the operator admitted EtcdClusters again after %s", took.Round(100*time.Millisecond))
	}
	dryRuns := dryRunsDuring(t)

	// roll the operator as `kubectl rollout restart` does
	ctx := context.Background()
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator"}, d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	if d.Spec.Template.Annotations == nil {
		d.Spec.Template.Annotations = map[string]string{}
	}
	d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = time.Now().Format(time.RFC3339Nano)
	start := time.Now()
	if err := k8s.Patch(ctx, d, patch); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, admissionTimeout, "the operator rolled out, the old pod gone", operatorRolledOut)
	took := time.Since(start)
	// and a little longer: the API server may still hold connections to the old pod
	poll.Consistently(t, 3*time.Second, "EtcdClusters admitted after the rollout", dryRunCreate)
	accepted, refused := dryRuns()
	t.Logf("operator rolled to a new pod in %s; %d dry-run creates accepted, %d refused", took.Round(100*time.Millisecond), accepted, len(refused))
	if len(refused) > 0 {
		t.Errorf("EtcdClusters refused during the operator's rollout:\n%s", strings.Join(refused, "\n"))
	}
	if accepted < 10 {
		t.Errorf("only %d dry-run creates were made during the rollout; want at least 10 to judge", accepted)
	}
}
