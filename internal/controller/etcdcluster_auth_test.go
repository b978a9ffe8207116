package controller

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestAuthAndTLSLeakNoSecrets: a cluster with TLS on both ports and spec.auth, its members real etcd
// serving the operator's certificates: the operator creates the root Secret, turns authentication on
// once the members are voters (status.auth, an event), keeps observing and hashing the members as root
// (HashesMatch needs the root user), and a client without the password is refused. Throughout, neither
// the operator's log (every verbosity), nor any Event, nor the cluster's status holds the root password
// or any private key of the cluster's Secrets.
func TestAuthAndTLSLeakNoSecrets(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-authtls"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	c := testutil.EtcdCluster("authtls", testutil.InNamespace(ns.Name), testutil.WithReplicas(3),
		testutil.WithTLS(true, true), testutil.WithAuth(true, ""))
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	retireAtEnd(t, c)
	secrets := map[string]*corev1.Secret{}
	testutil.Eventually(t, waitTimeout, "the cluster's Secrets", func(ctx context.Context) error {
		for _, name := range []string{"authtls-ca", "authtls-server-tls", "authtls-peer-tls", "authtls-client-tls", "authtls-root-credentials"} {
			s := &corev1.Secret{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: name}, s); err != nil {
				return err
			}
			secrets[name] = s
		}
		return nil
	})
	root := secrets["authtls-root-credentials"]
	if pw := root.Data["password"]; len(pw) < 32 || !metav1.IsControlledBy(root, c) || root.Labels["app.kubernetes.io/managed-by"] != "etcd-operator" {
		t.Fatalf("root Secret: %d-byte password, owners %v, labels %v", len(pw), root.OwnerReferences, root.Labels)
	}

	names := []string{"authtls-0", "authtls-1", "authtls-2"}
	hosts := []string{"127.0.0.122", "127.0.0.123", "127.0.0.124"}
	testenv.StartEtcdClientTLS(t, names, hosts, secretFiles(t, secrets["authtls-server-tls"], true))
	runPods(t, c, map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]})

	testutil.Eventually(t, 2*waitTimeout, "authentication on, hashes compared as root", func(context.Context) error {
		c = getCluster(t, c)
		if c.Status.Auth == nil || !c.Status.Auth.Enabled || c.Status.Auth.RootSecret != "authtls-root-credentials" {
			return fmt.Errorf("status.auth %+v", c.Status.Auth)
		}
		if d := condition(c, etcdv1beta1.ConditionDataInconsistent); d == nil || d.Reason != etcdv1beta1.ReasonHashesMatch {
			return fmt.Errorf("DataInconsistent %+v", d)
		}
		if c.Status.Phase != etcdv1beta1.PhaseRunning || c.Status.ReadyReplicas != 3 {
			return fmt.Errorf("phase %s, %d ready", c.Status.Phase, c.Status.ReadyReplicas)
		}
		return nil
	})

	// etcd agrees: the users' certificate alone may not write; with the root password it may.
	endpoints := []string{"https://" + hosts[0] + ":2379"}
	userTLS := clientTLS(t, secrets["authtls-client-tls"], c)
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	anon := etcdClient(t, clientv3.Config{Endpoints: endpoints, TLS: userTLS})
	if _, err := anon.Put(pctx, "k", "v"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("put with the users' certificate only: %v, want permission denied", err)
	}
	pctx, cancel = context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	asRoot := etcdClient(t, clientv3.Config{Endpoints: endpoints, TLS: userTLS, Username: "root", Password: string(root.Data["password"])})
	if _, err := asRoot.Put(pctx, "k", "v"); err != nil {
		t.Errorf("put as root: %v", err)
	}
	events := clusterEvents(t, ns.Name)
	if !bytes.Contains(events, []byte("Enabled etcd authentication with user root (password in Secret authtls-root-credentials)")) ||
		!bytes.Contains(events, []byte("Created Secret authtls-root-credentials with a random password")) {
		t.Errorf("no events for the root Secret and enabling authentication: %s", events)
	}

	status, err := json.Marshal(getCluster(t, c).Status)
	if err != nil {
		t.Fatal(err)
	}
	secretBytes := map[string][]byte{"root password": root.Data["password"]}
	for name, s := range secrets {
		if k := s.Data["tls.key"]; len(k) > 0 {
			secretBytes[name+" tls.key"] = k
			secretBytes[name+" tls.key body"] = pemBody(k)
		}
	}
	if len(secretBytes) != 9 {
		t.Fatalf("%d secrets to look for, want the password and 4 keys twice", len(secretBytes))
	}
	logs := operatorLogs.Bytes()
	// the search finds what it looks for: a password planted in a copy of the log is caught
	if leaked(append(bytes.Clone(logs), root.Data["password"]...), secretBytes) == nil {
		t.Fatal("the search does not find a planted password")
	}
	for what, b := range map[string][]byte{"the operator's log": logs, "the events": events, "the status": status} {
		if err := leaked(b, secretBytes); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	if len(logs) == 0 || len(events) == 0 {
		t.Errorf("nothing searched: %d bytes of log, %d of events", len(logs), len(events))
	}
}

// leaked returns an error naming each secret whose bytes (or a line of at least 16 bytes of them) are in b.
func leaked(b []byte, secrets map[string][]byte) error {
	var errs []error
	for name, s := range secrets {
		for _, line := range bytes.Split(s, []byte("\n")) {
			if len(line) >= 16 && !bytes.HasPrefix(line, []byte("-----")) && bytes.Contains(b, line) {
				errs = append(errs, fmt.Errorf("holds %s", name))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// pemBody returns the base64 lines of a PEM block, joined without newlines.
func pemBody(p []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(p, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("-----")) {
			out = append(out, line...)
		}
	}
	return out
}

// secretFiles writes the certificate, key and CA of a TLS Secret to files for an etcd member.
func secretFiles(t *testing.T, s *corev1.Secret, clientCertAuth bool) transport.TLSInfo {
	t.Helper()
	dir := t.TempDir()
	info := transport.TLSInfo{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
		TrustedCAFile: filepath.Join(dir, "ca.crt"), ClientCertAuth: clientCertAuth}
	for key, file := range map[string]string{"tls.crt": info.CertFile, "tls.key": info.KeyFile, "ca.crt": info.TrustedCAFile} {
		if err := os.WriteFile(file, s.Data[key], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return info
}

// clientTLS is the TLS configuration of a client certificate Secret of cluster c, as the operator's
// own: the members' certificate names their DNS names, not the loopback address dialled, so
// VerifyConnection checks that it is the CA's and names the client Service.
func clientTLS(t *testing.T, s *corev1.Secret, c *etcdv1beta1.EtcdCluster) *tls.Config {
	t.Helper()
	pair, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	roots, err := pki.Pool(s.Data["ca.crt"])
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12,
		InsecureSkipVerify: true, //nolint:gosec // verified by VerifyConnection
		VerifyConnection:   pki.VerifyServer(roots, c.Name+"-client."+c.Namespace+".svc")}
}

// etcdClient creates a clientv3 client, closed when the test ends.
func etcdClient(t *testing.T, cfg clientv3.Config) *clientv3.Client {
	t.Helper()
	cfg.DialTimeout, cfg.Logger = 5*time.Second, zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// clusterEvents returns every Event of namespace ns, both APIs, as JSON.
func clusterEvents(t *testing.T, ns string) []byte {
	t.Helper()
	v1 := &eventsv1.EventList{}
	core := &corev1.EventList{}
	if err := k8s.List(context.Background(), v1, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.List(context.Background(), core, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal([]any{v1.Items, core.Items})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
