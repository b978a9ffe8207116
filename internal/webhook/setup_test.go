package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
	webhookv1beta1 "github.com/etcdkit/etcd-operator/internal/webhook/v1beta1"
)

// readyTimeout bounds the time from the manager's start to the webhooks being served: generating the
// certificate, writing it, injecting the CA (the rotator checks the files and the injection with a
// backoff that starts at 1 s).
const readyTimeout = 60 * time.Second

var (
	startOnce sync.Once
	env       *envtest.Environment
	envCfg    *rest.Config
	envErr    error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		_ = env.Stop()
	}
	os.Exit(code)
}

// apiServer starts kube-apiserver and etcd on first use and returns a client of them.
func apiServer(t *testing.T) (*rest.Config, client.Client) {
	t.Helper()
	startOnce.Do(func() {
		ctrl.SetLogger(logr.Discard())
		env, envCfg, envErr = testenv.Start()
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	k8s, err := client.New(envCfg, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return envCfg, k8s
}

// startManager starts a manager whose webhooks Setup arranges with o, and returns Setup's readiness
// check after asserting that it fails before the manager starts. The manager stops when t ends.
func startManager(t *testing.T, cfg *rest.Config, o Options) (healthz.Checker, *capturedLog) {
	t.Helper()
	ready, logs, _ := startReplica(t, cfg, o, false)
	return ready, logs
}

// startReplica is startManager of one replica of the operator: with leaderElect, the manager takes
// part in leader election through a Lease in o.Namespace, as the Deployment's replicas do, and the
// channel it returns is closed once this replica leads.
func startReplica(t *testing.T, cfg *rest.Config, o Options, leaderElect bool) (healthz.Checker, *capturedLog, <-chan struct{}) {
	t.Helper()
	server, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	logs := &capturedLog{}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  testenv.Scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		WebhookServer:           server,
		Logger:                  funcr.New(logs.add, funcr.Options{}),
		LeaderElection:          leaderElect,
		LeaderElectionID:        "etcd-operator.etcd.etcdkit.dev",
		LeaderElectionNamespace: o.Namespace,
		// The Lease is handed back when the test stops the manager, as the operator does.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ready, err := Setup(mgr, o)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	if err := ready(&http.Request{}); err == nil {
		t.Fatal("ready before the manager started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return ready, logs, mgr.Elected()
}

// capturedLog keeps the lines a logger wrote.
type capturedLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *capturedLog) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

// has returns nil when a line holds every one of parts, and otherwise an error listing the lines.
func (l *capturedLog) has(parts ...string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("no log line holds %q among %d lines", parts, len(l.lines))
}

// installWebhookConfigurations creates the webhook configurations of dist/install.yaml, as they are
// installed (no caBundle; a Service nothing in envtest routes to), renamed with prefix.
func installWebhookConfigurations(t *testing.T, k8s client.Client, prefix string) (validating, mutating string) {
	t.Helper()
	objs := readInstall(t)
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	objs.get(t, "ValidatingWebhookConfiguration/"+DefaultValidatingConfiguration, v)
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	objs.get(t, "MutatingWebhookConfiguration/"+DefaultMutatingConfiguration, m)
	// Nothing in this package creates EtcdClusters; keep it so even if something did.
	none := &metav1.LabelSelector{MatchLabels: map[string]string{"test.etcdkit.dev/none": "true"}}
	for _, o := range []client.Object{v, m} {
		o.SetName(prefix + o.GetName())
	}
	v.Webhooks[0].ObjectSelector, m.Webhooks[0].ObjectSelector = none, none
	for _, o := range []client.Object{v, m} {
		if err := k8s.Create(context.Background(), o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}
	return v.Name, m.Name
}

// getWebhookConfigurations reads the webhook configurations named validating and mutating.
func getWebhookConfigurations(t *testing.T, k8s client.Client, validating, mutating string) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	t.Helper()
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: validating}, v); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: mutating}, m); err != nil {
		t.Fatal(err)
	}
	return v, m
}

// issue returns a CA and a serving certificate for dnsName signed by it, valid until notAfter, in PEM,
// made the way the rotator makes them.
func issue(t *testing.T, dnsName string, notAfter time.Time) (caCert, caKey, cert, key []byte) {
	t.Helper()
	gen := &rotator.CertRotator{CAName: caName, CAOrganization: caOrganization, DNSName: dnsName,
		ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	now := time.Now()
	ca, err := gen.CreateCACert(now.Add(-time.Hour), now.Add(10*365*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err = gen.CreateCertPEM(ca, now.Add(-time.Hour), notAfter)
	if err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM, ca.KeyPEM, cert, key
}

// parseCert parses the first certificate of a PEM block.
func parseCert(t *testing.T, pemData []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(pemData)
	if b == nil {
		t.Fatalf("no PEM data in %q", pemData)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tlsClient returns an HTTPS client that trusts only caBundle and expects serverName, as the API
// server does when it calls the webhook through its Service.
func tlsClient(t *testing.T, caBundle []byte, serverName string) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		t.Fatalf("no certificate in the caBundle %q", caBundle)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12},
	}}
}

// servedCert connects to addr as tlsClient does and returns the certificate the server presents.
func servedCert(caBundle []byte, serverName, addr string) ([]byte, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caBundle)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close() //nolint:errcheck // read only
	der := conn.ConnectionState().PeerCertificates[0].Raw
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// review sends an AdmissionReview creating c to the validating webhook at addr and returns the answer.
func review(t *testing.T, hc *http.Client, addr string, c *etcdv1beta1.EtcdCluster) *admissionv1.AdmissionResponse {
	t.Helper()
	c.APIVersion, c.Kind = etcdv1beta1.GroupVersion.String(), "EtcdCluster"
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "test",
			Kind:      metav1.GroupVersionKind{Group: etcdv1beta1.GroupVersion.Group, Version: "v1beta1", Kind: "EtcdCluster"},
			Resource:  metav1.GroupVersionResource{Group: etcdv1beta1.GroupVersion.Group, Version: "v1beta1", Resource: "etcdclusters"},
			Name:      c.Name,
			Namespace: c.Namespace,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Post("https://"+addr+webhookv1beta1.ValidatePath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("call the validating webhook: %v", err)
	}
	defer resp.Body.Close() //nolint:errcheck // read only
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &out); err != nil || out.Response == nil {
		t.Fatalf("answer %q: %v", data, err)
	}
	return out.Response
}

// TestSelfProvisionedCertificate: with the self provisioner, the operator renews a serving certificate
// that is about to expire (keeping its CA), writes it where the webhook server reads it, puts the CA
// into both webhook configurations, and only then registers and serves the webhooks and reports
// ready; when the Secret loses its CA, a new CA and certificate are generated, injected and served.
func TestSelfProvisionedCertificate(t *testing.T) {
	cfg, k8s := apiServer(t)
	ctx := context.Background()
	ns := "webhook-self"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	serverName := DefaultServiceName + "." + ns + ".svc"

	// The Secret as a running operator left it, its serving certificate expiring tomorrow.
	caCert, caKey, oldCert, oldKey := issue(t, serverName, time.Now().Add(24*time.Hour))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: DefaultSecretName, Namespace: ns}, Data: map[string][]byte{
		"ca.crt": caCert, "ca.key": caKey, "tls.crt": oldCert, "tls.key": oldKey,
	}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	validating, mutating := installWebhookConfigurations(t, k8s, "self-")

	port := testutil.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dir := filepath.Join(t.TempDir(), "certs") // created by the operator
	ready, _ := startManager(t, cfg, Options{
		Host: "127.0.0.1", Port: port, CertDir: dir, Namespace: ns,
		ValidatingConfiguration: validating, MutatingConfiguration: mutating,
	})
	testutil.Eventually(t, readyTimeout, "webhooks served", func(context.Context) error { return ready(&http.Request{}) })

	// caBundles returns the caBundle of every webhook of both configurations.
	caBundles := func() [][]byte {
		v, m := getWebhookConfigurations(t, k8s, validating, mutating)
		return [][]byte{v.Webhooks[0].ClientConfig.CABundle, m.Webhooks[0].ClientConfig.CABundle}
	}
	// served checks that the Secret's certificate is the one in the files and the one served, and
	// that it is trusted through the caBundles for the Service's name.
	served := func(s *corev1.Secret) error {
		for _, b := range caBundles() {
			if !bytes.Equal(b, s.Data["ca.crt"]) {
				return fmt.Errorf("caBundle %.60q is not the Secret's CA", b)
			}
		}
		for _, k := range []string{"tls.crt", "tls.key"} {
			got, err := os.ReadFile(filepath.Join(dir, k))
			if err != nil {
				return fmt.Errorf("%s in %s is not the Secret's (%w)", k, dir, err)
			}
			if !bytes.Equal(got, s.Data[k]) {
				return fmt.Errorf("%s in %s is not the Secret's", k, dir)
			}
		}
		got, err := servedCert(s.Data["ca.crt"], serverName, addr)
		if err != nil {
			return fmt.Errorf("TLS through the caBundle for %s: %w", serverName, err)
		}
		if !bytes.Equal(got, s.Data["tls.crt"]) {
			return errors.New("the server presents another certificate than the Secret's")
		}
		return nil
	}

	if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(secret.Data["ca.crt"], caCert) {
		t.Error("the CA was replaced; want it kept while it is valid")
	}
	cert := parseCert(t, secret.Data["tls.crt"])
	if bytes.Equal(secret.Data["tls.crt"], oldCert) || time.Until(cert.NotAfter) < 300*24*time.Hour {
		t.Errorf("the certificate expiring %s was not renewed (it expires %s)", time.Now().Add(24*time.Hour).Format(time.RFC3339), cert.NotAfter.Format(time.RFC3339))
	}
	for _, name := range []string{serverName, serverName + ".cluster.local"} {
		if err := cert.VerifyHostname(name); err != nil {
			t.Errorf("the certificate is not for %s: %v", name, err)
		}
	}
	if err := served(secret); err != nil {
		t.Fatal(err)
	}
	assertConversion(t, k8s, ns, DefaultServiceName, secret.Data["ca.crt"])
	// The webhooks are registered: an even size is refused with the webhook's 422.
	resp := review(t, tlsClient(t, secret.Data["ca.crt"], serverName), addr,
		&etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns1"}, Spec: etcdv1beta1.EtcdClusterSpec{Replicas: ptr.To[int32](2), Version: "3.6.16"}})
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusUnprocessableEntity || !strings.Contains(resp.Result.Message, "must be odd") {
		t.Errorf("an even size: allowed=%v result=%+v, want a 422 that says it must be odd", resp.Allowed, resp.Result)
	}

	// The Secret loses its CA: a new one is made, injected and served.
	secret.Data = nil
	if err := k8s.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, readyTimeout, "a new CA and certificate served", func(context.Context) error {
		s := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), s); err != nil {
			return err
		}
		if len(s.Data["ca.crt"]) == 0 || bytes.Equal(s.Data["ca.crt"], caCert) {
			return errors.New("no new CA in the Secret")
		}
		return served(s)
	})
	// Ready again once the CRDs' conversion webhook trusts the new CA too.
	testutil.Eventually(t, readyTimeout, "ready after the rotation", func(context.Context) error { return ready(&http.Request{}) })
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	assertConversion(t, k8s, ns, DefaultServiceName, secret.Data["ca.crt"])
}

// assertConversion fails unless both CRDs convert through the webhook Service service of namespace
// ns, trusting caBundle.
func assertConversion(t *testing.T, k8s client.Client, ns, service string, caBundle []byte) {
	t.Helper()
	for _, name := range DefaultConversionCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatal(err)
		}
		c := crd.Spec.Conversion
		if c == nil || c.Strategy != apiextensionsv1.WebhookConverter || c.Webhook == nil || c.Webhook.ClientConfig == nil ||
			c.Webhook.ClientConfig.Service == nil {
			t.Errorf("CRD %s converts with %+v, want the operator's webhook", name, c)
			continue
		}
		s := c.Webhook.ClientConfig.Service
		if s.Namespace != ns || s.Name != service || ptr.Deref(s.Path, "") != ConversionPath || ptr.Deref(s.Port, 0) != 443 {
			t.Errorf("CRD %s converts through %s/%s port %d path %s, want %s/%s port 443 path %s", name, s.Namespace, s.Name,
				ptr.Deref(s.Port, 0), ptr.Deref(s.Path, ""), ns, service, ConversionPath)
		}
		if !bytes.Equal(c.Webhook.ClientConfig.CABundle, caBundle) {
			t.Errorf("CRD %s trusts caBundle %.60q, want the webhooks' %.60q", name, c.Webhook.ClientConfig.CABundle, caBundle)
		}
	}
}

// TestReplicasShareOneCertificate: two replicas of the operator (leader election on, as in the
// Deployment) started together on the Secret as installed (empty) generate one CA and one certificate
// between them, not one each: both serve the Secret's certificate, the caBundle of both webhook
// configurations trusts it, the replica that does not lead is ready and answers admission requests,
// and neither replaces the other's CA afterwards.
func TestReplicasShareOneCertificate(t *testing.T) {
	cfg, k8s := apiServer(t)
	ctx := context.Background()
	ns := "webhook-replicas"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	serverName := DefaultServiceName + "." + ns + ".svc"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: DefaultSecretName, Namespace: ns}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	validating, mutating := installWebhookConfigurations(t, k8s, "replicas-")

	type replica struct {
		addr  string
		ready healthz.Checker
		leads <-chan struct{}
	}
	replicas := make([]replica, 2)
	for i, port := range testutil.FreePorts(t, 2) {
		o := Options{Host: "127.0.0.1", Port: port, CertDir: filepath.Join(t.TempDir(), "certs"), Namespace: ns,
			ValidatingConfiguration: validating, MutatingConfiguration: mutating, RotatorName: fmt.Sprintf("replica-%d-cert-rotator", i)}
		ready, _, leads := startReplica(t, cfg, o, true)
		replicas[i] = replica{addr: fmt.Sprintf("127.0.0.1:%d", port), ready: ready, leads: leads}
	}
	for i, r := range replicas {
		testutil.Eventually(t, readyTimeout, fmt.Sprintf("replica %d ready", i), func(context.Context) error { return r.ready(&http.Request{}) })
	}
	leaders := 0
	for _, r := range replicas {
		select {
		case <-r.leads:
			leaders++
		default:
		}
	}
	if leaders != 1 {
		t.Errorf("%d replicas lead, want 1 (one of them ready without leading)", leaders)
	}

	// consistent returns nil when both replicas serve the Secret's certificate, and the caBundles are
	// the Secret's CA, which verifies it for the Service's name.
	consistent := func(ctx context.Context) error {
		s := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), s); err != nil {
			return err
		}
		v, m := getWebhookConfigurations(t, k8s, validating, mutating)
		for _, b := range [][]byte{v.Webhooks[0].ClientConfig.CABundle, m.Webhooks[0].ClientConfig.CABundle} {
			if !bytes.Equal(b, s.Data["ca.crt"]) {
				return fmt.Errorf("caBundle %.60q is not the Secret's CA", b)
			}
		}
		for i, r := range replicas {
			got, err := servedCert(s.Data["ca.crt"], serverName, r.addr)
			if err != nil {
				return fmt.Errorf("replica %d: TLS through the caBundle for %s: %w", i, serverName, err)
			}
			if !bytes.Equal(got, s.Data["tls.crt"]) {
				return fmt.Errorf("replica %d presents another certificate than the Secret's", i)
			}
		}
		return nil
	}
	testutil.Eventually(t, readyTimeout, "both replicas serve the Secret's certificate", consistent)
	first := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), first); err != nil {
		t.Fatal(err)
	}
	// Neither replica rotates what the other made: the Secret keeps its CA and certificate.
	testutil.Consistently(t, 5*time.Second, "one CA and certificate, served by both", func(ctx context.Context) error {
		s := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), s); err != nil {
			return err
		}
		if !bytes.Equal(s.Data["ca.crt"], first.Data["ca.crt"]) || !bytes.Equal(s.Data["tls.crt"], first.Data["tls.crt"]) {
			return errors.New("the Secret's CA or certificate was replaced")
		}
		return consistent(ctx)
	})
	for i, r := range replicas {
		resp := review(t, tlsClient(t, first.Data["ca.crt"], serverName), r.addr,
			&etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns1"}, Spec: etcdv1beta1.EtcdClusterSpec{Replicas: ptr.To[int32](2), Version: "3.6.16"}})
		if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "must be odd") {
			t.Errorf("replica %d: an even size allowed=%v result=%+v, want refused", i, resp.Allowed, resp.Result)
		}
	}
}

// TestExternalCertificate: with the external provisioner nothing is generated: the webhooks are served
// with the certificate found in the directory. The operator is ready only while the caBundle of every
// webhook trusts the certificate the server presents: not before the configurations exist or their
// CA is injected, not with another CA, and not again after the mounted certificate is replaced by one
// from a new CA until the caBundles follow.
func TestExternalCertificate(t *testing.T) {
	cfg, k8s := apiServer(t)
	ctx := context.Background()
	ns := "webhook-external"
	serverName := "webhook." + ns + ".svc"
	caCert, _, cert, key := issue(t, serverName, time.Now().Add(time.Hour))
	dir := t.TempDir()
	writeCert := func(cert, key []byte) {
		t.Helper()
		for name, data := range map[string][]byte{"tls.crt": cert, "tls.key": key} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeCert(cert, key)
	port := testutil.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	o := Options{Host: "127.0.0.1", Port: port, CertDir: dir, Provisioner: ProvisionerExternal, Namespace: ns, ServiceName: "webhook",
		ValidatingConfiguration: "external-" + DefaultValidatingConfiguration, MutatingConfiguration: "external-" + DefaultMutatingConfiguration}
	ready, logs := startManager(t, cfg, o)
	notReadyBecause := func(what, mention string) {
		t.Helper()
		testutil.Eventually(t, readyTimeout, what, func(context.Context) error {
			err := ready(&http.Request{})
			if err == nil {
				return fmt.Errorf("ready, want an error mentioning %q", mention)
			}
			if !strings.Contains(err.Error(), mention) {
				return fmt.Errorf("readiness %w, want an error mentioning %q", err, mention)
			}
			return nil
		})
	}
	notReadyBecause("not ready without the webhook configurations", "not found")

	validating, mutating := installWebhookConfigurations(t, k8s, "external-")
	notReadyBecause("not ready before the CA is injected", "caBundle is empty")
	// /readyz withholds the reason: the operator logs it when it changes.
	if err := logs.has("Not ready: the API server cannot call the admission webhooks", "caBundle is empty"); err != nil {
		t.Error(err)
	}

	// setCABundle puts ca into every webhook of both configurations, as cert-manager's CA injector does.
	setCABundle := func(ca []byte) {
		t.Helper()
		v, m := getWebhookConfigurations(t, k8s, validating, mutating)
		for i := range v.Webhooks {
			v.Webhooks[i].ClientConfig.CABundle = ca
		}
		for i := range m.Webhooks {
			m.Webhooks[i].ClientConfig.CABundle = ca
		}
		if err := k8s.Update(ctx, v); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	otherCA, _, otherCert, otherKey := issue(t, serverName, time.Now().Add(time.Hour))
	setCABundle(otherCA)
	notReadyBecause("not ready with another CA in the caBundles", "does not trust the certificate")

	setCABundle(caCert)
	testutil.Eventually(t, readyTimeout, "ready once the caBundles trust the served certificate", func(context.Context) error { return ready(&http.Request{}) })
	if err := logs.has("Ready: the admission webhooks are served"); err != nil {
		t.Error(err)
	}
	assertConversion(t, k8s, ns, "webhook", caCert)
	got, err := servedCert(caCert, serverName, addr)
	if err != nil || !bytes.Equal(got, cert) {
		t.Fatalf("the server does not present the mounted certificate: %v", err)
	}
	resp := review(t, tlsClient(t, caCert, serverName), addr,
		&etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns1"}, Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.4.30"}})
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "etcd 3.4 is not supported") {
		t.Errorf("etcd 3.4: allowed=%v result=%+v, want refused as not supported", resp.Allowed, resp.Result)
	}

	// The mounted certificate is replaced by one of a new CA (a re-issue): the server reloads it, and
	// the operator is not ready until the caBundles trust the new CA.
	writeCert(otherCert, otherKey)
	notReadyBecause("not ready once the server presents a certificate the caBundles do not trust", "does not trust the certificate")
	both := append(append([]byte{}, caCert...), otherCA...)
	setCABundle(both)
	testutil.Eventually(t, readyTimeout, "ready once the caBundles trust the new CA", func(context.Context) error { return ready(&http.Request{}) })
	// The CRDs follow the caBundle at once, not after the keeper's interval.
	assertConversion(t, k8s, ns, "webhook", both)
}

// TestOptionsRefused: options that cannot work are refused before anything starts, saying what to do.
func TestOptionsRefused(t *testing.T) {
	for _, tc := range []struct {
		o       Options
		mention string
	}{
		{Options{}, "set POD_NAMESPACE"},
		{Options{Provisioner: "cert-manager", Namespace: "x"}, `use "self" or "external"`},
	} {
		if _, err := NewServer(tc.o); err == nil || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("NewServer(%+v): %v, want an error mentioning %q", tc.o, err, tc.mention)
		}
	}
	if _, err := NewServer(Options{Provisioner: ProvisionerExternal}); err != nil {
		t.Errorf("external needs no namespace: %v", err)
	}
}
