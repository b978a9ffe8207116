package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestMetricsOptions: by default the metrics server serves HTTPS behind the API server's
// authentication and authorization, over HTTP/1.1 only; --enable-http2 lets it offer HTTP/2, and
// --metrics-secure=false serves plain HTTP without the filter.
func TestMetricsOptions(t *testing.T) {
	protos := func(opts []func(*tls.Config)) string {
		cfg := &tls.Config{NextProtos: []string{"h2"}} // what controller-runtime starts from
		for _, opt := range opts {
			opt(cfg)
		}
		return strings.Join(cfg.NextProtos, ",")
	}
	for _, tc := range []struct {
		args       []string
		secure     bool
		nextProtos string
	}{
		{nil, true, "http/1.1"},
		{[]string{"--enable-http2"}, true, "h2"},
		{[]string{"--metrics-secure=false"}, false, "h2"},
	} {
		o := &managerOptions{}
		if err := managerCommand(o).Flags().Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		m := metricsOptions(o)
		if m.BindAddress != ":8443" || m.SecureServing != tc.secure || (m.FilterProvider != nil) != tc.secure {
			t.Errorf("%v: bind address %q, secure serving %v, filter set %v; want :8443, %v, %v",
				tc.args, m.BindAddress, m.SecureServing, m.FilterProvider != nil, tc.secure, tc.secure)
		}
		if got := protos(m.TLSOpts); got != tc.nextProtos {
			t.Errorf("%v: ALPN protocols %q, want %q", tc.args, got, tc.nextProtos)
		}
	}
	o := &managerOptions{}
	if err := managerCommand(o).Flags().Parse([]string{"--metrics-cert-dir=/certs"}); err != nil {
		t.Fatal(err)
	}
	if m := metricsOptions(o); m.CertDir != "/certs" {
		t.Errorf("--metrics-cert-dir: CertDir %q, want /certs", m.CertDir)
	}
}

// testMetricsNeedAnAuthorizedToken: the manager serves its metrics on metricsAddr over HTTPS (a
// certificate it generated, HTTP/1.1 only) to a ServiceAccount bound to the metrics-reader ClusterRole
// of dist/install.yaml; a request without a token gets 401, one with the token of a ServiceAccount
// without that role 403.
func testMetricsNeedAnAuthorizedToken(t *testing.T, env *envtest.Environment, k8s client.Client, metricsAddr string) {
	reader, stranger := serviceAccountToken(t, env, k8s, "prometheus", "etcd-operator-metrics-reader"), serviceAccountToken(t, env, k8s, "stranger", "")

	// The served certificate: controller-runtime's, generated at start (a CA and a certificate for
	// localhost); ALPN settles on HTTP/1.1 although the client prefers HTTP/2.
	conn, err := tls.Dial("tcp", metricsAddr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // learning the generated certificate
	if err != nil {
		t.Fatalf("metrics server: %v", err)
	}
	state := conn.ConnectionState()
	_ = conn.Close()
	if state.NegotiatedProtocol != "http/1.1" {
		t.Errorf("negotiated protocol %q, want http/1.1", state.NegotiatedProtocol)
	}
	roots := x509.NewCertPool()
	for _, c := range state.PeerCertificates {
		roots.AddCert(c)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12},
	}}
	scrape := func(token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "https://"+metricsAddr+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
		defer resp.Body.Close() //nolint:errcheck // read
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := scrape(""); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d %q, want 401", code, body)
	}
	if code, body := scrape(stranger); code != http.StatusForbidden {
		t.Errorf("with the token of a ServiceAccount without the metrics-reader role: %d %q, want 403", code, body)
	}
	code, body := scrape(reader)
	if code != http.StatusOK || !strings.Contains(body, `controller_runtime_max_concurrent_reconciles{controller="etcdcluster"}`) {
		t.Errorf("with the token of a metrics reader: %d, want 200 and the operator's metrics:\n%.2000s", code, body)
	}
	// Plain HTTP gets Go's TLS server's answer to it, 400.
	if resp, err := http.Get("http://" + metricsAddr + "/metrics"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP: %s, want 400", resp.Status)
		}
	}
}

// serviceAccountToken creates ServiceAccount name in namespace "monitoring", binds it to clusterRole
// unless that is empty, and returns a token of it.
func serviceAccountToken(t *testing.T, env *envtest.Environment, k8s client.Client, name, clusterRole string) string {
	t.Helper()
	ctx := context.Background()
	const ns = "monitoring"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	if clusterRole != "" {
		if err := k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + clusterRole},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}
