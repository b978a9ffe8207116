package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"k8s.io/apimachinery/pkg/util/wait"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
	"github.com/etcdkit/etcd-operator/internal/webhook"
)

// readyTimeout bounds the time from the manager's start to /readyz passing: caches synced, the webhook
// certificate generated, written and injected, the webhook server started.
const readyTimeout = 60 * time.Second

// installFromDist creates the objects of dist/install.yaml of the given kinds.
func installFromDist(t *testing.T, k8s client.Client, kinds ...string) {
	t.Helper()
	installFrom(t, k8s, testenv.InstallFile(), kinds...)
}

// installFrom creates the objects of the manifest file of the given kinds.
func installFrom(t *testing.T, k8s client.Client, file string, kinds ...string) {
	t.Helper()
	for _, u := range readManifest(t, file) {
		if slices.Contains(kinds, u.GetKind()) {
			if err := k8s.Create(context.Background(), u); err != nil {
				t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}
}

// readManifest returns the objects of a multi-document YAML file.
func readManifest(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() //nolint:errcheck // read only
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// startEnv starts envtest and returns it with a client of its admin.
func startEnv(t *testing.T) (*envtest.Environment, client.Client) {
	t.Helper()
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	k8s, err := client.New(cfg, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return env, k8s
}

// startManager runs `etcd-operator manager` as user, with its probes and webhooks on free loopback
// ports and args, until the test ends; it returns the verbose /readyz body once /readyz passes, and
// the webhook port.
func startManager(t *testing.T, env *envtest.Environment, user envtest.User, args ...string) (readyz string, webhookPort int) {
	t.Helper()
	return startManagerWith(t, env, user, &managerOptions{}, args...)
}

// startManagerWith is startManager with the options that no flag sets taken from o.
func startManagerWith(t *testing.T, env *envtest.Environment, user envtest.User, o *managerOptions, args ...string) (readyz string, webhookPort int) {
	t.Helper()
	u, err := env.AddUser(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfigPath)

	probePort, webhookPort := testutil.FreePort(t), testutil.FreePort(t)
	mo := &managerOptions{zap: zap.Options{TimeEncoder: zapcore.ISO8601TimeEncoder}, skipNameValidation: o.skipNameValidation}
	if o.skipNameValidation {
		mo.webhook.RotatorName = "webhook-cert-rotator-" + strings.ToLower(t.Name()) // not the manager's to skip
	}
	cmd := managerCommand(mo)
	cmd.SetArgs(append([]string{
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
		fmt.Sprintf("--webhook-port=%d", webhookPort),
		"--webhook-cert-dir=" + filepath.Join(t.TempDir(), "certs"),
	}, args...))
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	exited := false
	t.Cleanup(func() {
		cancel()
		if exited {
			return
		}
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	url := fmt.Sprintf("http://127.0.0.1:%d/readyz?verbose", probePort)
	var body string
	var last error
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, readyTimeout, true, func(context.Context) (bool, error) {
		select {
		case err := <-done:
			exited = true
			return false, fmt.Errorf("the manager stopped before it was ready: %w", err)
		default:
		}
		resp, err := http.Get(url)
		if last = err; err != nil {
			return false, nil
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close() //nolint:errcheck // read
		body = string(b)
		return resp.StatusCode == http.StatusOK, nil
	})
	switch {
	case exited:
		t.Fatal(err)
	case err != nil:
		t.Fatalf("/readyz not passing within %s: %v %s", readyTimeout, last, body)
	}
	return body, webhookPort
}

// TestManagerAsDeployed runs the manager as the Deployment does: its flags' defaults, POD_NAMESPACE,
// the objects of dist/install.yaml, and the identity of the operator's ServiceAccount, whose requests
// the installed RBAC authorizes. (One manager per process: controller names are unique.)
func TestManagerAsDeployed(t *testing.T) {
	env, k8s := startEnv(t)
	const ns = "etcd-operator-system"
	installFromDist(t, k8s, "Namespace", "Secret", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
		"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
	t.Setenv("POD_NAMESPACE", ns)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	operator := envtest.User{Name: "system:serviceaccount:" + ns + ":etcd-operator", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}}
	readyz, webhookPort := startManager(t, env, operator, "--metrics-bind-address="+metricsAddr)
	t.Run("webhooks served once ready", func(t *testing.T) { testWebhooksServedOnceReady(t, k8s, readyz, webhookPort) })
	t.Run("metrics need an authorized token", func(t *testing.T) { testMetricsNeedAnAuthorizedToken(t, env, k8s, metricsAddr) })
}

// testWebhooksServedOnceReady: the manager generated the webhook certificate and injected its CA;
// /readyz passed only with the webhook check among its checks, and by then the CA is in both webhook
// configurations and the webhooks are served under the Service's name.
func testWebhooksServedOnceReady(t *testing.T, k8s client.Client, readyz string, webhookPort int) {
	const ns = "etcd-operator-system"
	if !strings.Contains(readyz, "[+]webhook ok") {
		t.Errorf("/readyz passes without the webhook check: %s", readyz)
	}
	ctx := context.Background()

	// Ready means the CA is in both configurations and the webhooks are served with it.
	secret := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: webhook.DefaultSecretName}, secret); err != nil {
		t.Fatal(err)
	}
	ca := secret.Data["ca.crt"]
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: webhook.DefaultValidatingConfiguration}, v); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Name: webhook.DefaultMutatingConfiguration}, m); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{v.Name: v.Webhooks[0].ClientConfig.CABundle, m.Name: m.Webhooks[0].ClientConfig.CABundle} {
		if len(ca) == 0 || string(b) != string(ca) {
			t.Errorf("ready, but the caBundle of %s is not the generated CA", name)
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", webhookPort), &tls.Config{
		RootCAs: pool, ServerName: webhook.DefaultServiceName + "." + ns + ".svc", MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		t.Fatalf("ready, but the webhook server is not trusted through the caBundle: %v", err)
	}
	_ = conn.Close()
}
