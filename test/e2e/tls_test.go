//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/certs"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// TestTLSByDefault: a cluster created without spec.tls serves TLS on both ports with certificates of its
// own CA. A client with the certificate the operator issued for users reads and writes through the
// client Service; a plain-text client, a TLS client without a certificate and a plain-text peer are
// refused; no pod mounts the CA's key; no private key the operator created appears in its logs or in the
// cluster's events.
func TestTLSByDefault(t *testing.T) {
	c := newCluster(t, "e2e-tls", "demo", 3)
	if !c.Spec.ClientTLS() || !c.Spec.PeerTLS() {
		t.Fatalf("created with spec.tls %+v; admission should have turned TLS on for both ports", c.Spec.TLS)
	}
	took, _ := assertAvailable(t, c, availableTimeout)
	t.Logf("apply -> Available with TLS on both ports in %s", took.Round(100*time.Millisecond))
	ctx := context.Background()

	kv := etcdClient(t, clientServiceEndpoint(t, c))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := kv.Put(wctx, "tls", "on"); err != nil {
		t.Fatalf("put through the client Service with the users' certificate: %v", err)
	}

	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range pods {
		ip := p.Status.PodIP
		if !resources.ServesClientTLS(p) {
			t.Errorf("%s does not serve TLS on its client port: %q", name, p.Spec.Containers[0].Command)
		}
		if err := getKey(ctx, "http://"+ip+":2379", nil); err == nil {
			t.Errorf("%s served a plain-text client", name)
		}
		noCert := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true} //nolint:gosec // the client's certificate is what is tested
		if err := getKey(ctx, "https://"+ip+":2379", noCert); err == nil {
			t.Errorf("%s served a TLS client without a certificate", name)
		}
		if err := getKey(ctx, podEndpoint(p), tlsFor(podEndpoint(p))); err != nil {
			t.Errorf("%s refused the users' certificate: %v", name, err)
		}
		// the peer port: no plain HTTP (which would list the members), no TLS peer without a certificate
		hc := &http.Client{Timeout: 3 * time.Second}
		if resp, err := hc.Get("http://" + ip + ":2380/members"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			t.Errorf("%s's peer port answered plain HTTP: %s %s", name, resp.Status, body)
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", ip+":2380", noCert)
		if err == nil {
			err = conn.Handshake()
			if err == nil {
				// TLS 1.3 reports a refused client certificate on the first read
				_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
				_, err = conn.Read(make([]byte, 1))
			}
			_ = conn.Close()
		}
		if err == nil {
			t.Errorf("%s's peer port accepted a TLS peer without a certificate", name)
		}
		// nor the users' client certificate, although the same CA issued it: only members are peers
		users := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsFor(podEndpoint(p))}}
		if resp, err := users.Get("https://" + ip + ":2380/members"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Errorf("%s's peer port served the users' client certificate: %s %s", name, resp.Status, body)
			}
		}
		for _, v := range p.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == c.Name+resources.CASecretSuffix {
				t.Errorf("%s mounts the CA's Secret", name)
			}
		}
	}

	assertNoKeyMaterialLeaked(t, c)
}

// getKey reads key "tls" through exactly endpoint.
func getKey(ctx context.Context, endpoint string, cfg *tls.Config) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, TLS: cfg, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err = cli.Get(ctx, "tls")
	return err
}

// assertNoKeyMaterialLeaked fails when the body of any private key of cluster c's TLS Secrets, or a PEM
// private key at all, appears in the operator's logs or in the events of c's namespace.
func assertNoKeyMaterialLeaked(t *testing.T, c interface {
	GetNamespace() string
	GetName() string
}) {
	t.Helper()
	ctx := context.Background()
	secrets := &corev1.SecretList{}
	if err := k8s.List(ctx, secrets, client.InNamespace(c.GetNamespace())); err != nil {
		t.Fatal(err)
	}
	var needles []string
	for _, s := range secrets.Items {
		if k := s.Data[corev1.TLSPrivateKeyKey]; len(k) > 0 {
			for _, line := range strings.Split(string(k), "\n") {
				if len(line) >= 40 && !strings.HasPrefix(line, "-----") {
					needles = append(needles, line)
				}
			}
			needles = append(needles, base64.StdEncoding.EncodeToString(k)[:40])
		}
	}
	if len(needles) == 0 {
		t.Fatalf("no private key found in the Secrets of namespace %s", c.GetNamespace())
	}
	needles = append(needles, "PRIVATE KEY")

	var haystack bytes.Buffer
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace("etcd-operator-system"), client.MatchingLabels{"app.kubernetes.io/name": "etcd-operator"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		raw, err := kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("logs of %s: %v", p.Name, err)
		}
		haystack.Write(raw)
	}
	events, err := kube.EventsV1().Events(c.GetNamespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	issued := 0
	for _, e := range events.Items {
		fmt.Fprintln(&haystack, e.Reason, e.Note)
		if e.Reason == "IssuedCertificate" {
			issued++
		}
	}
	if issued == 0 {
		t.Error("no IssuedCertificate event: the events searched are not the ones the operator records")
	}
	for _, n := range needles {
		if bytes.Contains(haystack.Bytes(), []byte(n)) {
			t.Errorf("key material %.12q... appears in the operator's logs or events", n)
		}
	}
	t.Logf("searched %d bytes of operator logs and %d events for %d pieces of key material: none found", haystack.Len(), len(events.Items), len(needles))
}

// TestLeafCertificatesRenewedUnderLoad: renewing every leaf certificate of a running cluster (asked for
// with the etcd.etcdkit.dev/renew-certificates annotation, the same path as a renewal before expiry)
// under a continuous writer: the members serve the new certificates on both ports without a restart,
// 3 of 3 members stay healthy voters throughout, no write fails for a certificate reason, and no
// acknowledged write is lost.
func TestLeafCertificatesRenewedUnderLoad(t *testing.T) {
	t.Parallel() // mostly waits: runs with the others of its kind once the serial tests are done (suite_test.go)
	c := newCluster(t, "e2e-tls-renew", "demo", 3)
	assertAvailable(t, c, availableTimeout)
	ctx := context.Background()
	ep := clientServiceEndpoint(t, c)
	w := startWriter(t, ep)
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	before := restarts(pods)

	// sample the status while the certificates change: every member a healthy voter, throughout
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan []string, 1)
	go func() {
		var bad []string
		for sampleCtx.Err() == nil {
			if got, err := getCluster(sampleCtx, c); err == nil && got.Status.ReadyReplicas != 3 {
				bad = append(bad, fmt.Sprintf("%s: %d/3 ready, phase %s", time.Now().Format(time.TimeOnly), got.Status.ReadyReplicas, got.Status.Phase))
			}
			select {
			case <-sampleCtx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
		sampled <- bad
	}()

	start := time.Now()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, etcdv1beta1.AnnotationRenewCertificates, start.UTC().Format(time.RFC3339))
	if err := k8s.Patch(ctx, c, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	issued := poll.Eventually(t, time.Minute, "the three leaf certificates issued again", func(ctx context.Context) error {
		for _, s := range []string{resources.ServerTLSSecretSuffix, resources.PeerTLSSecretSuffix, resources.ClientTLSSecretSuffix} {
			cert, err := secretCert(ctx, c, c.Name+s)
			if err != nil {
				return err
			}
			if cert.NotBefore.Add(5 * time.Minute).Before(start.Truncate(time.Second)) {
				return fmt.Errorf("%s is still the certificate issued at %s", c.Name+s, cert.NotBefore.Add(5*time.Minute))
			}
		}
		return nil
	})
	t.Logf("annotation -> three leaf certificates issued again in %s", issued.Round(100*time.Millisecond))

	cfg := tlsFor(ep)
	served := poll.Eventually(t, 3*time.Minute, "every member serving the new certificates on both ports", func(ctx context.Context) error {
		server, err := secretCert(ctx, c, c.Name+resources.ServerTLSSecretSuffix)
		if err != nil {
			return err
		}
		peer, err := secretCert(ctx, c, c.Name+resources.PeerTLSSecretSuffix)
		if err != nil {
			return err
		}
		for name, p := range pods {
			if got := servedSerial(p.Status.PodIP+":2379", cfg); got != server.SerialNumber.String() {
				return fmt.Errorf("%s serves certificate %s on its client port, not the new %s", name, got, server.SerialNumber)
			}
			if got := servedSerial(p.Status.PodIP+":2380", cfg); got != peer.SerialNumber.String() {
				return fmt.Errorf("%s serves certificate %s on its peer port, not the new %s", name, got, peer.SerialNumber)
			}
		}
		return nil
	})
	t.Logf("annotation -> every member serving the new certificates in %s (the kubelet updates mounted Secrets on its own sync period)", (issued + served).Round(time.Second))

	// a client with the new client certificate gets in
	fresh, err := clusterClientTLS(ctx, c.Namespace, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range pods {
		if err := getKey(ctx, "https://"+p.Status.PodIP+":2379", fresh); err != nil {
			t.Errorf("%s refuses the new client certificate: %v", name, err)
		}
	}
	stopSampling()
	if bad := <-sampled; len(bad) > 0 {
		t.Errorf("members not all healthy voters while certificates were renewed: %v", bad)
	}
	if now, err := memberPods(ctx, c); err == nil {
		for name, n := range restarts(now) {
			if n != before[name] || now[name].UID != pods[name].UID {
				t.Errorf("%s was restarted for the renewal (restarts %d -> %d)", name, before[name], n)
			}
		}
	}
	assertNoCertificateFailures(t, w)
	w.stopAndVerify(t, ep)
}

// secretCert returns the certificate in Secret name of cluster c's namespace.
func secretCert(ctx context.Context, c *etcdv1beta1.EtcdCluster, name string) (*x509.Certificate, error) {
	s := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s); err != nil {
		return nil, err
	}
	return pki.ParseCert(s.Data[corev1.TLSCertKey])
}

// servedSerial returns the serial number of the certificate the TLS server at addr presents ("" when
// none), whether or not it then accepts the client.
func servedSerial(addr string, cfg *tls.Config) string {
	var serial string
	c := cfg.Clone()
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) > 0 {
			serial = cs.PeerCertificates[0].SerialNumber.String()
		}
		return nil
	}
	if conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, c); err == nil {
		_ = conn.Close()
	}
	return serial
}

// TestCARotationUnderLoad rotates a cluster's CA (annotation etcd.etcdkit.dev/rotate-ca) while a writer,
// which loads the users' client Secret again on every handshake as a client mounting it does, writes
// through the client Service. The rotation goes through its three phases and ends with every member
// serving certificates of the new CA on both ports and trusting only it (a client with the old CA's
// certificate is refused); a quorum stays available throughout, no write fails for a certificate reason
// and no acknowledged write is lost.
func TestCARotationUnderLoad(t *testing.T) {
	t.Parallel() // mostly waits: runs with the others of its kind once the serial tests are done (suite_test.go)
	c := newCluster(t, "e2e-tls-rotate-ca", "demo", 3)
	assertAvailable(t, c, availableTimeout)
	ctx := context.Background()
	ep := clientServiceEndpoint(t, c)
	oldClient := tlsFor(ep)
	endpointTLS.Store(ep, reloadingClientTLS(c.Namespace, c.Name))
	w := startWriter(t, ep)
	oldCA, err := secretCert(ctx, c, c.Name+resources.CASecretSuffix)
	if err != nil {
		t.Fatal(err)
	}

	// sample the status: a quorum available throughout, and the phases the rotation goes through
	start := time.Now()
	stopSampling := sampleStatus(c, func(got *etcdv1beta1.EtcdCluster) string {
		if got.Status.TLS != nil && got.Status.TLS.CARotation != nil {
			return string(got.Status.TLS.CARotation.Phase)
		}
		return "none"
	})

	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, etcdv1beta1.AnnotationRotateCA, start.Add(time.Second).UTC().Format(time.RFC3339))
	if err := k8s.Patch(ctx, c, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	took := poll.Eventually(t, 15*time.Minute, "the CA rotation finished", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		ca, err := secretCert(ctx, c, c.Name+resources.CASecretSuffix)
		if err != nil {
			return err
		}
		switch {
		case ca.Equal(oldCA):
			return errors.New("the old CA still issues")
		case got.Status.TLS == nil || got.Status.TLS.CARotation != nil:
			return fmt.Errorf("rotation under way: %+v", got.Status.TLS)
		case got.Status.ReadyReplicas != 3:
			return fmt.Errorf("%d/3 ready", got.Status.ReadyReplicas)
		}
		return nil
	})
	t.Logf("annotation -> CA rotation finished in %s", took.Round(time.Second))
	s := stopSampling()
	t.Logf("phases: %s", strings.Join(s.steps, ", "))
	if len(s.unavailable) > 0 {
		t.Errorf("quorum not available throughout the rotation: %v", s.unavailable)
	}

	newCA, err := secretCert(ctx, c, c.Name+resources.CASecretSuffix)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := clusterClientTLS(ctx, c.Namespace, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range pods {
		for _, port := range []string{":2379", ":2380"} {
			cert, err := certs.ServedCertificate(ctx, p.Status.PodIP+port)
			if err != nil || cert.CheckSignatureFrom(newCA) != nil {
				t.Errorf("%s does not serve a certificate of the new CA on port %s (%v)", name, port, err)
			}
		}
		if err := getKey(ctx, "https://"+p.Status.PodIP+":2379", fresh); err != nil {
			t.Errorf("%s refuses the client certificate of the new CA: %v", name, err)
		}
		if err := getKey(ctx, "https://"+p.Status.PodIP+":2379", oldClient); err == nil {
			t.Errorf("%s still trusts the old CA", name)
		}
	}
	assertNoCertificateFailures(t, w)
	w.stopAndVerify(t, ep)
}

// assertNoCertificateFailures fails the test for every write of w that failed for a certificate reason.
func assertNoCertificateFailures(t *testing.T, w *writer) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for msg, n := range w.errs {
		if strings.Contains(msg, "certificate") || strings.Contains(msg, "tls:") || strings.Contains(msg, "x509") {
			t.Errorf("%d writes failed for a certificate reason: %s", n, msg)
		}
	}
}
