//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdkit/etcd-operator/internal/testutil"
)

const (
	// leaseName is the operator's leader election Lease, in its namespace.
	leaseName = "etcd-operator.etcd.etcdkit.dev"
	// failoverTimeout bounds a leader pod's death -> the other replica leads and acts: the Lease's
	// duration (15 s) and retry period (2 s) when the dead leader could not hand it back, and a pass.
	failoverTimeout = 45 * time.Second
	// helmNamespace is where TestHelmInstall installs the chart ("e2e-": a run that dies leaves it to
	// the next run's removeLeftovers).
	helmNamespace = "e2e-helm-operator"
	// helmRelease is the name of TestHelmInstall's release.
	helmRelease = "etcd-operator-e2e"
)

// operatorLeader returns the name of the operator pod in namespace ns that holds the Lease (its
// identity is the pod's hostname, its name, and a suffix).
func operatorLeader(ctx context.Context, ns string) (string, error) {
	l := &coordinationv1.Lease{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: leaseName}, l); err != nil {
		return "", fmt.Errorf("the operator's Lease: %w", err)
	}
	holder := ptr.Deref(l.Spec.HolderIdentity, "")
	if holder == "" {
		return "", errors.New("no operator replica holds the Lease")
	}
	pod, _, _ := strings.Cut(holder, "_")
	return pod, nil
}

// dryRunsDuring makes a server-side dry run of an EtcdCluster create every 200 ms until the function
// it returns is called (at the latest when t ends), which returns how many were accepted and the
// errors of those refused.
func dryRunsDuring(t *testing.T) func() (int, []string) {
	var (
		mu       sync.Mutex
		once     sync.Once
		accepted int
		refused  []string
	)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := dryRunCreate(ctx)
			cancel()
			mu.Lock()
			if err != nil {
				refused = append(refused, time.Now().Format("15:04:05.000")+" "+err.Error())
			} else {
				accepted++
			}
			mu.Unlock()
		}
	}()
	end := func() (int, []string) {
		once.Do(func() { close(stop) })
		<-done
		mu.Lock()
		defer mu.Unlock()
		return accepted, refused
	}
	t.Cleanup(func() { end() })
	return end
}

// TestOperatorFailover: the leading operator replica's pod is killed (no grace period, so it cannot
// hand the Lease back) at the moment a member pod of a cluster is deleted. The other replica, which
// kept serving admission, takes the Lease and recreates the member. The test reports both times:
// kill -> the Lease held by the other replica, and kill -> the member pod made again (the failover as
// a user sees it), bounded by failoverTimeout: the lease duration (15 s), its retry period (2 s) and
// one pass; and how many EtcdCluster creates (dry runs every 200 ms) were refused meanwhile, while
// the Service still routed to the killed pod.
func TestOperatorFailover(t *testing.T) {
	ctx := context.Background()
	if _, err := waitAdmission(admissionTimeout); err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator"}, d); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(d.Spec.Replicas, 1) < 2 {
		t.Fatalf("the operator runs %d replica, want 2: no other replica to take over", ptr.Deref(d.Spec.Replicas, 1))
	}
	// on a claim: its pod, deleted, is recreated on its data (an emptyDir member's would be lost)
	c := newCluster(t, "e2e-failover", "demo", 1)
	assertAvailable(t, c, availableTimeout)
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	member := pods["demo-0"]
	leader, err := operatorLeader(ctx, operatorNamespace)
	if err != nil {
		t.Fatal(err)
	}

	dryRuns := dryRunsDuring(t)
	start := time.Now()
	if err := k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: leader}}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, member, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	var newLeader string
	leaseTook := poll.Eventually(t, failoverTimeout, "another replica holds the Lease", func(ctx context.Context) error {
		var err error
		if newLeader, err = operatorLeader(ctx, operatorNamespace); err != nil {
			return err
		}
		if newLeader == leader {
			return fmt.Errorf("%s, killed, still holds the Lease", leader)
		}
		return nil
	})
	poll.Eventually(t, failoverTimeout, "the member pod made again", func(ctx context.Context) error {
		p := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(member), p); err != nil {
			return err
		}
		if p.UID == member.UID {
			return errors.New("the old member pod is still there")
		}
		return nil
	})
	actTook := time.Since(start)
	accepted, refused := dryRuns()
	t.Logf("leader %s killed -> %s leads in %s; the deleted member pod made again %s after the kill; meanwhile %d EtcdCluster creates (dry runs) admitted, %d refused%s",
		leader, newLeader, leaseTook.Round(100*time.Millisecond), actTook.Round(100*time.Millisecond), accepted, len(refused), strings.Join(append([]string{""}, refused...), "\n  "))
	if accepted == 0 {
		t.Error("no EtcdCluster admitted while the other replica took over: it does not serve the webhooks")
	}
	assertAvailable(t, c, availableTimeout)
	if _, err := waitAdmission(admissionTimeout); err != nil {
		t.Fatal(err)
	}
}

// helm runs the repository's helm (hack/tools/helm/go.mod) against KUBECONFIG and returns its output.
func helm(args ...string) (string, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", append([]string{"tool", "-modfile=" + filepath.Join(root, "hack/tools/helm/go.mod"), "helm"}, args...)...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// clusterScoped are the cluster-scoped objects of an install, besides the CRDs: one install per
// Kubernetes cluster may hold them.
var clusterScoped = []struct{ kind, name string }{
	{"ClusterRole", "etcd-operator"}, {"ClusterRole", "etcd-operator-cluster-scoped"}, {"ClusterRole", "etcd-operator-metrics-reader"},
	{"ClusterRoleBinding", "etcd-operator"}, {"ClusterRoleBinding", "etcd-operator-cluster-scoped"},
	{"MutatingWebhookConfiguration", "etcd-operator-mutating-webhook-configuration"},
	{"ValidatingWebhookConfiguration", "etcd-operator-validating-webhook-configuration"},
}

// clusterScopedObject returns an empty object of kind and name in clusterScoped.
func clusterScopedObject(kind, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	group := "rbac.authorization.k8s.io"
	if strings.HasSuffix(kind, "WebhookConfiguration") {
		group = "admissionregistration.k8s.io"
	}
	o.SetAPIVersion(group + "/v1")
	o.SetKind(kind)
	o.SetName(name)
	return o
}

// setAsideInstalledOperator stops the operator the suite installed (its Deployment scaled to 0) and
// takes away its cluster-scoped objects, which a second install cannot share; when t ends, they are
// made again and the operator scaled back, and the suite waits for admission as before.
func setAsideInstalledOperator(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator"}, d); err != nil {
		t.Fatal(err)
	}
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	var saved []*unstructured.Unstructured
	for _, cs := range clusterScoped {
		o := clusterScopedObject(cs.kind, cs.name)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), o); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		saved = append(saved, o)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, o := range saved {
			o := o.DeepCopy()
			o.SetResourceVersion("")
			o.SetUID("")
			o.SetManagedFields(nil)
			o.SetCreationTimestamp(metav1.Time{})
			if err := k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Errorf("make %s %s again: %v", o.GetKind(), o.GetName(), err)
			}
		}
		scaleOperator(t, replicas)
		if _, err := waitAdmission(admissionTimeout); err != nil {
			t.Errorf("the suite's operator after the other install was removed: %v", err)
		}
	})
	scaleOperator(t, 0)
	poll.Eventually(t, admissionTimeout, "the suite's operator pods gone", func(ctx context.Context) error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(operatorNamespace), operatorSelector); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d operator pods left", len(pods.Items))
		}
		return nil
	})
	for _, o := range saved {
		if err := k8s.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
}

// scaleOperator sets the replicas of the suite's operator Deployment.
func scaleOperator(t *testing.T, replicas int32) {
	t.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator"}, d); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To(replicas)
	if err := k8s.Patch(ctx, d, patch); err != nil {
		t.Fatal(err)
	}
}

// chartValues returns the --set flags that give the chart's operator the image and flags of the
// suite's (the image loaded on the local cluster, the shortened waits of OPERATOR_ARGS).
func chartValues(t *testing.T) []string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator"}, d); err != nil {
		t.Fatal(err)
	}
	ctr := d.Spec.Template.Spec.Containers[0]
	repo, tag, ok := strings.Cut(ctr.Image, ":")
	if !ok || strings.Contains(tag, "/") {
		t.Fatalf("operator image %q has no tag", ctr.Image)
	}
	sets := []string{"--set", "image.repository=" + repo, "--set", "image.tag=" + tag}
	if ctr.ImagePullPolicy != "" {
		sets = append(sets, "--set", "image.pullPolicy="+string(ctr.ImagePullPolicy))
	}
	fixed := map[string]bool{"manager": true, "--leader-elect": true, "--metrics-bind-address=:8443": true, "--health-probe-bind-address=:8081": true}
	var extra []string
	for _, a := range ctr.Args {
		if v, ok := strings.CutPrefix(a, "--etcd-image-repository="); ok {
			sets = append(sets, "--set", "etcdImageRepository="+v)
		} else if !fixed[a] {
			extra = append(extra, a)
		}
	}
	if len(extra) > 0 {
		b, err := json.Marshal(extra)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, "--set-json", "extraArgs="+string(b))
	}
	return sets
}

// TestHelmInstall: the operator installed with `helm install` of charts/etcd-operator into a
// namespace of its own (in place of the suite's, set aside meanwhile) admits EtcdClusters and makes
// a 1-member cluster Available; `helm uninstall` removes the operator and its cluster-scoped objects
// but not the CRDs.
func TestHelmInstall(t *testing.T) {
	ctx := context.Background()
	setAsideInstalledOperator(t)
	t.Cleanup(func() {
		if out, err := helm("uninstall", helmRelease, "--namespace", helmNamespace, "--ignore-not-found"); err != nil {
			t.Errorf("%v: %s", err, out)
		}
		_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: helmNamespace}})
	})
	args := append([]string{"install", helmRelease, "charts/etcd-operator", "--namespace", helmNamespace, "--create-namespace"}, chartValues(t)...)
	if out, err := helm(args...); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("helm %s:\n%s", strings.Join(args, " "), out)
	}
	took, err := waitAdmissionIn(helmNamespace, admissionTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install -> EtcdClusters admitted in %s", took.Round(100*time.Millisecond))

	c := newCluster(t, "e2e-helm", "demo", 1, testutil.WithEmptyDir())
	took, _ = assertAvailable(t, c, availableTimeout)
	t.Logf("1-member cluster Available in %s under the chart's operator", took.Round(100*time.Millisecond))
	if leader, err := operatorLeader(ctx, helmNamespace); err != nil {
		t.Error(err)
	} else {
		t.Logf("the chart's operator leads from pod %s", leader)
	}
	// The cluster goes while its operator runs (its finalizer is handled), then the release.
	if err := k8s.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	awaitClusterGone(t, c)
	if out, err := helm("uninstall", helmRelease, "--namespace", helmNamespace, "--wait"); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("helm uninstall: %s", strings.TrimSpace(out))
	}
	for _, cs := range clusterScoped {
		o := clusterScopedObject(cs.kind, cs.name)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%s %s after helm uninstall: %v, want it gone", cs.kind, cs.name, err)
		}
	}
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: "etcd-operator"}, d); !apierrors.IsNotFound(err) {
		t.Errorf("the chart's Deployment after helm uninstall: %v, want it gone", err)
	}
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := k8s.Get(ctx, client.ObjectKey{Name: "etcdclusters.etcd.etcdkit.dev"}, crd); err != nil {
		t.Errorf("the CRD after helm uninstall: %v, want it kept", err)
	}
}
