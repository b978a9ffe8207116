package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
	"github.com/etcdkit/etcd-operator/internal/webhook"
)

// namespacedTimeout bounds each wait for the namespace-scoped operator to act on the API server.
const namespacedTimeout = 60 * time.Second

// TestNamespacedInstall runs the manager as the Deployment of dist/install-namespaced.yaml does: with
// its args, POD_NAMESPACE, and as its ServiceAccount, bound only by the Roles, ClusterRole and webhook
// configurations of that file, read from it. The API server authorizes with RBAC (envtest's default),
// so a permission the install lacks fails the manager's start or its reconciles.
func TestNamespacedInstall(t *testing.T) {
	env, k8s := startEnv(t)
	const ns, other = "etcd-operator-system", "elsewhere"
	file := filepath.Join(filepath.Dir(testenv.InstallFile()), "install-namespaced.yaml")
	installFrom(t, k8s, file, "Namespace", "Secret", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
		"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POD_NAMESPACE", ns)
	sa := "system:serviceaccount:" + ns + ":etcd-operator"
	operator := envtest.User{Name: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}}
	// outside a pod, the Lease's namespace is not found from the ServiceAccount's mount
	args := append(deploymentArgs(t, file), fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", testutil.FreePort(t)), "--leader-election-namespace="+ns)
	// ready: the caches of the watched namespace synced, the webhook certificate injected
	startManagerWith(t, env, operator, &managerOptions{skipNameValidation: true}, args...)

	t.Run("RBAC is enforced and namespaced", func(t *testing.T) { testNamespacedRBAC(t, env.Config, sa, ns, other) })
	t.Run("webhooks only in the watched namespace", func(t *testing.T) { testWebhooksOnlyWatched(t, k8s, ns, other) })
	// the API server here cannot reach the webhook Service: without the webhooks from now on
	for _, o := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.DefaultValidatingConfiguration}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhook.DefaultMutatingConfiguration}},
	} {
		if err := k8s.Delete(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	// the API server drops a deleted webhook configuration from its admission chain asynchronously
	testutil.Eventually(t, namespacedTimeout, "admission without the webhooks", func(ctx context.Context) error {
		return k8s.Create(ctx, testutil.EtcdCluster("probe", testutil.InNamespace(ns), testutil.WithStorageSize("1Gi")), client.DryRunAll)
	})
	t.Run("reconciles the watched namespace", func(t *testing.T) { testReconcilesWatched(t, k8s, ns) })
	t.Run("leaves other namespaces alone", func(t *testing.T) { testLeavesOthersAlone(t, k8s, other) })
	t.Run("foreign Service without labels", func(t *testing.T) { testForeignUnlabelledService(t, k8s, ns) })
}

// deploymentArgs returns the args of the operator's container in the Deployment of file, without
// the subcommand and the listen addresses (the test chooses free ones).
func deploymentArgs(t *testing.T, file string) []string {
	t.Helper()
	for _, u := range readManifest(t, file) {
		if u.GetKind() != "Deployment" {
			continue
		}
		containers, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		if err != nil || len(containers) == 0 {
			t.Fatalf("the Deployment of %s has no container: %v", file, err)
		}
		raw, _, err := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		if err != nil {
			t.Fatal(err)
		}
		var args []string
		for _, a := range raw {
			if a != "manager" && !strings.HasPrefix(a, "--metrics-bind-address") && !strings.HasPrefix(a, "--health-probe-bind-address") {
				args = append(args, a)
			}
		}
		if !slices.Contains(args, "--namespaced") {
			t.Fatalf("the Deployment of %s does not run the operator with --namespaced: %v", file, raw)
		}
		return args
	}
	t.Fatalf("no Deployment in %s", file)
	return nil
}

// testNamespacedRBAC: the operator's ServiceAccount may list pods in its namespace and not in another
// one, nor cluster-wide; so the API server enforces RBAC and the install grants no ClusterRole on
// namespaced resources.
func testNamespacedRBAC(t *testing.T, admin *rest.Config, sa, ns, other string) {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: sa}
	as, err := client.New(cfg, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := as.List(ctx, &corev1.PodList{}, client.InNamespace(ns)); err != nil {
		t.Errorf("the operator may not list pods in its own namespace: %v", err)
	}
	for _, where := range []string{other, ""} {
		err := as.List(ctx, &corev1.PodList{}, client.InNamespace(where))
		if !apierrors.IsForbidden(err) {
			t.Errorf("listing pods in namespace %q as the operator: want Forbidden, got %v", where, err)
		}
		err = as.List(ctx, &etcdv1beta1.EtcdClusterList{}, client.InNamespace(where))
		if !apierrors.IsForbidden(err) {
			t.Errorf("listing EtcdClusters in namespace %q as the operator: want Forbidden, got %v", where, err)
		}
	}
}

// testWebhooksOnlyWatched: the webhooks are called for an EtcdCluster of the watched namespace (here
// they fail: the API server cannot reach the webhook Service), and not for one of another namespace.
func testWebhooksOnlyWatched(t *testing.T, k8s client.Client, ns, other string) {
	ctx := context.Background()
	if err := k8s.Create(ctx, testutil.EtcdCluster("ignored", testutil.InNamespace(other), testutil.WithStorageSize("1Gi"))); err != nil {
		t.Fatalf("an EtcdCluster of namespace %s went to the webhooks of the operator of %s: %v", other, ns, err)
	}
	err := k8s.Create(ctx, testutil.EtcdCluster("webhooked", testutil.InNamespace(ns), testutil.WithStorageSize("1Gi")))
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("an EtcdCluster of the watched namespace: want it sent to the (unreachable) webhooks, got %v", err)
	}
}

// testReconcilesWatched: the operator creates, with the namespaced permissions only, what an
// EtcdCluster of its namespace needs before its members run (envtest runs no pod): its finalizer,
// certificate Secrets, Services, claims, pods, events.
func testReconcilesWatched(t *testing.T, k8s client.Client, ns string) {
	ctx := context.Background()
	c := testutil.EtcdCluster("demo", testutil.InNamespace(ns), testutil.WithReplicas(3), testutil.WithStorageSize("1Gi"),
		func(c *etcdv1beta1.EtcdCluster) {
			c.Spec.TLS = &etcdv1beta1.TLSSpec{Client: &etcdv1beta1.TLSListenerSpec{Enabled: true}, Peer: &etcdv1beta1.TLSListenerSpec{Enabled: true}}
		})
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	want := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-ca"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-server-tls"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-peer-tls"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-client-tls"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "demo-peer"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "demo-client"}},
	}
	for i := range 3 {
		want = append(want,
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-demo-%d", i)}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("demo-%d", i)}})
	}
	testutil.Eventually(t, namespacedTimeout, "the cluster's finalizer, Secrets, Services, claims and pods", func(ctx context.Context) error {
		var errs []error
		got := &etcdv1beta1.EtcdCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
			errs = append(errs, err)
		} else if len(got.Finalizers) == 0 {
			errs = append(errs, errors.New("no finalizer on the cluster"))
		}
		for _, o := range want {
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: o.GetName()}, o); err != nil {
				errs = append(errs, err)
			} else if _, claim := o.(*corev1.PersistentVolumeClaim); !claim && len(o.GetOwnerReferences()) == 0 {
				errs = append(errs, fmt.Errorf("%s has no owner", o.GetName()))
			}
		}
		return errors.Join(errs...)
	})
	testutil.Eventually(t, namespacedTimeout, "an event of the operator about the cluster", func(ctx context.Context) error {
		events := &eventsv1.EventList{}
		if err := k8s.List(ctx, events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "demo" && e.Reason == "CreatedServices" {
				return nil
			}
		}
		return fmt.Errorf("no CreatedServices event among %d", len(events.Items))
	})
}

// testLeavesOthersAlone: an EtcdCluster of a namespace the operator does not watch gets no finalizer,
// no status, and nothing created beside it.
func testLeavesOthersAlone(t *testing.T, k8s client.Client, other string) {
	testutil.Consistently(t, 3*time.Second, "nothing done for the cluster of another namespace", func(ctx context.Context) error {
		c := &etcdv1beta1.EtcdCluster{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: other, Name: "ignored"}, c); err != nil {
			return err
		}
		if len(c.Finalizers) > 0 || len(c.Status.Conditions) > 0 {
			return fmt.Errorf("the operator acted on %s/ignored: finalizers %v, conditions %v", other, c.Finalizers, c.Status.Conditions)
		}
		for _, l := range []client.ObjectList{&corev1.ServiceList{}, &corev1.SecretList{}, &corev1.PodList{}} {
			if err := k8s.List(ctx, l, client.InNamespace(other)); err != nil {
				return err
			}
			if n := meta.LenList(l); n > 0 {
				return fmt.Errorf("%d objects (%T) in namespace %s", n, l, other)
			}
		}
		return nil
	})
}

// testForeignUnlabelledService: a Service of a name the cluster needs, without the operator's labels
// (so not in its cache) and not owned by the cluster, blocks the cluster instead of being taken for
// its own: the read that misses the cache asks the API server.
func testForeignUnlabelledService(t *testing.T, k8s client.Client, ns string) {
	ctx := context.Background()
	foreign := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "other-client", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, testutil.EtcdCluster("other", testutil.InNamespace(ns), testutil.WithStorageSize("1Gi"))); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, namespacedTimeout, "the cluster blocked by the foreign Service", func(ctx context.Context) error {
		c := &etcdv1beta1.EtcdCluster{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "other"}, c); err != nil {
			return err
		}
		p := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionProgressing)
		if p == nil || p.Status != metav1.ConditionFalse || !strings.Contains(p.Message, "Service other-client exists and is not owned") {
			return fmt.Errorf("Progressing: %+v", p)
		}
		return nil
	})
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{etcdv1beta1.LabelCluster: "other"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Errorf("the cluster started %d members beside a foreign Service of its name", len(pods.Items))
	}
}

// TestNamespacedNeedsNamespaces: --namespaced watches --watch-namespaces, else the operator's own
// namespace, and without either the manager stops at once with a message that says what to set,
// before it reaches the API server.
func TestNamespacedNeedsNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name, podNamespace string
		args               []string
		want               []string
	}{
		{name: "own namespace", podNamespace: "ops", args: []string{"--namespaced"}, want: []string{"ops"}},
		{name: "listed namespaces", podNamespace: "ops", args: []string{"--namespaced", "--watch-namespaces=a,b"}, want: []string{"a", "b"}},
		{name: "cluster-wide", podNamespace: "ops", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &managerOptions{}
			if err := managerCommand(o).ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			o.webhook.Namespace = tc.podNamespace
			if err := o.scopeNamespaces(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(o.watchNamespaces, tc.want) {
				t.Errorf("watched namespaces %v, want %v", o.watchNamespaces, tc.want)
			}
		})
	}
	t.Run("no namespace", func(t *testing.T) {
		t.Setenv("POD_NAMESPACE", "")
		t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "absent"))
		cmd := newManagerCommand()
		cmd.SetArgs([]string{"--namespaced"})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.ExecuteContext(context.Background()); !errors.Is(err, errNoNamespace) {
			t.Fatalf("want the manager to refuse to start: %v", err)
		}
	})
}

// TestInstallNamespacedScript: hack/install-namespaced.sh for a list of namespaces binds the Role in
// each of them to the operator's ServiceAccount in its own namespace, tells the operator and its
// webhooks the list, and grants no ClusterRole on namespaced resources.
func TestInstallNamespacedScript(t *testing.T) {
	out := filepath.Join(t.TempDir(), "install.yaml")
	script := filepath.Join(filepath.Dir(testenv.InstallFile()), "..", "hack", "install-namespaced.sh")
	cmd := exec.Command("bash", "-c", `bash "$0" --namespace ops --watch apps,db > "$1"`, script, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, b)
	}
	roles := map[string]bool{}
	for _, u := range readManifest(t, out) {
		where := u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
		switch u.GetKind() {
		case "Role", "RoleBinding":
			roles[where] = true
			subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			for _, s := range subjects {
				if ns := s.(map[string]any)["namespace"]; ns != "ops" {
					t.Errorf("%s binds a ServiceAccount of namespace %v, want ops", where, ns)
				}
			}
		case "ClusterRole", "ClusterRoleBinding":
			if u.GetName() == "etcd-operator" {
				t.Errorf("%s: the namespace-scoped install grants the cluster-wide role", where)
			}
		case "Deployment":
			if args := deploymentArgs(t, out); !slices.Contains(args, "--watch-namespaces=apps,db") {
				t.Errorf("the operator does not watch apps and db: %v", args)
			}
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
			for _, h := range hooks {
				exprs, _, _ := unstructured.NestedSlice(h.(map[string]any), "namespaceSelector", "matchExpressions")
				if got := fmt.Sprint(exprs); got != "[map[key:kubernetes.io/metadata.name operator:In values:[apps db]]]" {
					t.Errorf("%s selects namespaces %s", where, got)
				}
			}
		}
	}
	for _, want := range []string{"Role apps/etcd-operator", "RoleBinding apps/etcd-operator", "Role db/etcd-operator",
		"RoleBinding db/etcd-operator", "Role ops/etcd-operator-own-pod", "Role ops/etcd-operator-leader-election"} {
		if !roles[want] {
			t.Errorf("no %s among %v", want, roles)
		}
	}
	if roles["Role ops/etcd-operator"] {
		t.Error("the operator may manage its own namespace, which it does not watch")
	}
}

// TestNamespacedOverlayMatchesDist: the kustomize overlay config/namespaced and the script's
// dist/install-namespaced.yaml are the same objects, so either way of installing grants the same.
func TestNamespacedOverlayMatchesDist(t *testing.T) {
	root := filepath.Join(filepath.Dir(testenv.InstallFile()), "..")
	out := filepath.Join(t.TempDir(), "overlay.yaml")
	cmd := exec.Command("bash", "-c", `go tool -modfile=hack/tools/go.mod kustomize build config/namespaced > "$0"`, out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kustomize build config/namespaced: %v\n%s", err, b)
	}
	byKey := func(file string) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, u := range readManifest(t, file) {
			m[u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName()] = u
		}
		return m
	}
	overlay, dist := byKey(out), byKey(filepath.Join(root, "dist", "install-namespaced.yaml"))
	for k, u := range dist {
		if o, ok := overlay[k]; !ok {
			t.Errorf("%s is in dist/install-namespaced.yaml, not in config/namespaced", k)
		} else if !reflect.DeepEqual(o.Object, u.Object) {
			t.Errorf("%s differs between dist/install-namespaced.yaml and config/namespaced", k)
		}
	}
	for k := range overlay {
		if _, ok := dist[k]; !ok {
			t.Errorf("%s is in config/namespaced, not in dist/install-namespaced.yaml", k)
		}
	}
	if len(dist) < 10 {
		t.Errorf("only %d objects in dist/install-namespaced.yaml", len(dist))
	}
}
