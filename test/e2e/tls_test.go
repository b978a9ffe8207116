//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

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
