package certs_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/certs"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
)

var (
	k8s     client.Client
	restCfg *rest.Config
)

func TestMain(m *testing.M) {
	env, cfg, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	restCfg = cfg
	k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// newCluster creates an EtcdCluster with TLS on both ports in a namespace of its own.
func newCluster(t *testing.T) *etcdv1beta1.EtcdCluster {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "certs-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns.Name},
		Spec: etcdv1beta1.EtcdClusterSpec{TLS: &etcdv1beta1.TLSSpec{
			Client: &etcdv1beta1.TLSListenerSpec{Enabled: true}, Peer: &etcdv1beta1.TLSListenerSpec{Enabled: true}}}}
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	return c
}

func secret(t *testing.T, c *etcdv1beta1.EtcdCluster, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: c.Namespace, Name: name}, s); err != nil {
		t.Fatalf("secret %s: %v", name, err)
	}
	return s
}

func secretNames(res certs.Result) []string {
	var names []string
	for _, ch := range res.Changed {
		names = append(names, ch.Secret)
	}
	return names
}

func TestEnsureCreatesThenKeeps(t *testing.T) {
	c := newCluster(t)
	k := &certs.Keeper{Client: k8s}
	changed, err := k.Ensure(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"demo-ca", "demo-server-tls", "demo-client-tls", "demo-peer-tls"}
	if got := secretNames(changed); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("created %v, want %v", got, want)
	}
	ca := secret(t, c, "demo-ca")
	parsed, err := pki.ParseCA(ca.Data["tls.crt"], ca.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range want {
		s := secret(t, c, name)
		if s.Type != corev1.SecretTypeTLS || !metav1.IsControlledBy(s, c) {
			t.Errorf("secret %s: type %s, controlled by the cluster %v", name, s.Type, metav1.IsControlledBy(s, c))
		}
		if name != "demo-ca" && !bytes.Equal(s.Data["ca.crt"], parsed.CertPEM) {
			t.Errorf("secret %s: ca.crt is not the cluster's CA", name)
		}
	}
	if k.ClientTLS(c.Namespace, c.Name) == nil {
		t.Error("no operator client configuration after Ensure")
	}
	if changed.ClientSecret != "demo-client-tls" || !changed.CANotAfter.Equal(parsed.Cert.NotAfter) ||
		changed.NotAfter.IsZero() || !changed.RenewAt.Before(changed.NotAfter) {
		t.Errorf("result %+v: want the client Secret, the CA's expiry, the first leaf's expiry and its renewal before it", changed)
	}
	again, err := k.Ensure(context.Background(), c)
	if err != nil || len(again.Changed) != 0 {
		t.Fatalf("second Ensure changed %v, err %v; want nothing", secretNames(again), err)
	}
}

func TestEnsureRenewsLeavesBeforeExpiry(t *testing.T) {
	c := newCluster(t)
	now := time.Now()
	k := &certs.Keeper{Client: k8s, Now: func() time.Time { return now }}
	if _, err := k.Ensure(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	before := secret(t, c, "demo-server-tls").Data["tls.crt"]
	caBefore := secret(t, c, "demo-ca").Data["tls.crt"]

	now = now.Add(7 * 30 * 24 * time.Hour) // 7 months of 12: more than a third of the life left
	if changed, err := k.Ensure(context.Background(), c); err != nil || len(changed.Changed) != 0 {
		t.Fatalf("after 7 months: changed %v, err %v; want nothing", secretNames(changed), err)
	}
	now = now.Add(2 * 30 * 24 * time.Hour) // 9 months: due
	changed, err := k.Ensure(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(secretNames(changed), ","); got != "demo-server-tls,demo-client-tls,demo-peer-tls" {
		t.Fatalf("after 9 months renewed %s; want the three leaves", got)
	}
	if !strings.Contains(changed.Changed[0].Reason, "due for renewal") {
		t.Errorf("reason %q does not say the certificate was due", changed.Changed[0].Reason)
	}
	if bytes.Equal(before, secret(t, c, "demo-server-tls").Data["tls.crt"]) {
		t.Error("the serving certificate was not issued again")
	}
	if !bytes.Equal(caBefore, secret(t, c, "demo-ca").Data["tls.crt"]) {
		t.Error("the CA changed; only leaves are renewed")
	}
}

func TestEnsureRepairsMismatchedKey(t *testing.T) {
	c := newCluster(t)
	k := &certs.Keeper{Client: k8s}
	if _, err := k.Ensure(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	server, client := secret(t, c, "demo-server-tls"), secret(t, c, "demo-client-tls")
	server.Data["tls.key"] = client.Data["tls.key"] // another certificate's key
	if err := k8s.Update(context.Background(), server); err != nil {
		t.Fatal(err)
	}
	changed, err := k.Ensure(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(changed.Changed) != 1 || changed.Changed[0].Secret != "demo-server-tls" || !strings.Contains(changed.Changed[0].Reason, "does not match") {
		t.Fatalf("changed %+v; want demo-server-tls issued again because its key does not match", changed.Changed)
	}
	s := secret(t, c, "demo-server-tls")
	if _, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"]); err != nil {
		t.Fatalf("the repaired Secret is not a pair: %v", err)
	}
}

func TestEnsureRefusesForeignAndBrokenSecrets(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-ca", Namespace: c.Namespace},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("x"), "tls.key": []byte("y")}}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	k := &certs.Keeper{Client: k8s}
	if _, err := k.Ensure(ctx, c); !errors.Is(err, certs.ErrForeignSecret) || !strings.Contains(err.Error(), "demo-ca") {
		t.Fatalf("Ensure with a foreign demo-ca: %v; want ErrForeignSecret naming it", err)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: "demo-server-tls"}, &corev1.Secret{}); err == nil {
		t.Error("a leaf was issued although the CA Secret is not the cluster's")
	}

	// the cluster's own CA Secret, unreadable: never overwritten, the error names it
	foreign.OwnerReferences = []metav1.OwnerReference{resources.OwnerReference(c)}
	if err := k8s.Update(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	_, err := k.Ensure(ctx, c)
	if err == nil || !strings.Contains(err.Error(), "secret demo-ca does not hold this cluster's CA") {
		t.Fatalf("Ensure with a broken CA: %v", err)
	}
	if got := secret(t, c, "demo-ca"); string(got.Data["tls.crt"]) != "x" {
		t.Error("the broken CA Secret was overwritten")
	}
}

// writeSecret writes the keys of s into a new directory and returns it.
func writeSecret(t *testing.T, s *corev1.Secret) string {
	t.Helper()
	dir := t.TempDir()
	for k, v := range s.Data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMembersCertificatesServeMutualTLS starts a real etcd member with the serving certificate the keeper
// issued, as the member pods' flags configure it, and checks who gets in: the operator (dialling the
// member's IP, checking the client Service's name) and a client with the users' certificate do; a
// plain-text client, a TLS client without a certificate and one with another CA's do not.
func TestMembersCertificatesServeMutualTLS(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	k := &certs.Keeper{Client: k8s}
	if _, err := k.Ensure(ctx, c); err != nil {
		t.Fatal(err)
	}
	const host = "127.0.0.91"
	startTLSMember(t, host, writeSecret(t, secret(t, c, "demo-server-tls")), "")

	list := func(endpoint string, tc *tls.Config) error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		cl, err := etcd.New(ctx, etcd.Config{Endpoints: []string{endpoint}, TLS: tc, DialTimeout: 2 * time.Second})
		if err != nil {
			return err
		}
		defer func() { _ = cl.Close() }()
		_, _, err = cl.MemberList(ctx)
		return err
	}
	if err := list("https://"+host+":2379", k.ClientTLS(c.Namespace, c.Name)); err != nil {
		t.Fatalf("the operator's client configuration is refused: %v", err)
	}

	users := writeSecret(t, secret(t, c, "demo-client-tls"))
	userTLS, err := transport.TLSInfo{CertFile: users + "/tls.crt", KeyFile: users + "/tls.key", TrustedCAFile: users + "/ca.crt"}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	// this test cannot resolve the client Service's name: it dials the member's IP and checks that name
	userTLS.InsecureSkipVerify = true
	userTLS.VerifyConnection = pki.VerifyServer(userTLS.RootCAs, "demo-client."+c.Namespace+".svc")
	if err := list("https://"+host+":2379", userTLS); err != nil {
		t.Fatalf("the users' client certificate is refused: %v", err)
	}

	if err := list("http://"+host+":2379", nil); err == nil {
		t.Error("a plain-text client was served")
	}
	noCert := userTLS.Clone()
	noCert.Certificates, noCert.GetClientCertificate = nil, nil // TLSInfo presents its files through the callback
	if err := list("https://"+host+":2379", noCert); err == nil {
		t.Error("a TLS client without a certificate was served")
	}
	other, err := pki.NewCA("another CA", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := other.Issue(resources.ClientCertRequest(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	foreign := userTLS.Clone()
	foreign.Certificates, foreign.GetClientCertificate = []tls.Certificate{pair}, nil
	if err := list("https://"+host+":2379", foreign); err == nil {
		t.Error("a client with another CA's certificate was served")
	}
}

func TestRenewalRequestedByAnnotation(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	now := time.Now()
	k := &certs.Keeper{Client: k8s, Now: func() time.Time { return now }}
	if _, err := k.Ensure(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Annotations = map[string]string{etcdv1beta1.AnnotationRenewCertificates: "not a time"}
	if changed, err := k.Ensure(ctx, c); err != nil || len(changed.Changed) != 0 {
		t.Fatalf("with an annotation that is not a time: changed %v, err %v; want nothing", secretNames(changed), err)
	}
	now = now.Add(time.Minute)
	c.Annotations[etcdv1beta1.AnnotationRenewCertificates] = now.UTC().Format(time.RFC3339)
	now = now.Add(time.Second)
	changed, err := k.Ensure(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(secretNames(changed), ","); got != "demo-server-tls,demo-client-tls,demo-peer-tls" ||
		!strings.Contains(changed.Changed[0].Reason, "renewal requested by annotation") {
		t.Fatalf("renewed %s (%+v); want the three leaves, saying the annotation asked", got, changed.Changed)
	}
	if again, err := k.Ensure(ctx, c); err != nil || len(again.Changed) != 0 {
		t.Fatalf("the annotation renewed %v again; want each certificate renewed once", secretNames(again))
	}
}

func TestLostCAIsNotReplacedUnderRunningCertificates(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	k := &certs.Keeper{Client: k8s}
	if _, err := k.Ensure(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, secret(t, c, "demo-ca")); err != nil {
		t.Fatal(err)
	}
	_, err := k.Ensure(ctx, c)
	if reason, blocked := certs.Blocked(err); !blocked || reason != etcdv1beta1.ReasonCALost || !strings.Contains(err.Error(), "restore the CA Secret") {
		t.Fatalf("Ensure after the CA Secret was deleted: %v (reason %q); want it blocked, saying to restore the Secret", err, reason)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: "demo-ca"}, &corev1.Secret{}); err == nil {
		t.Error("a new CA was issued while the members' certificates of the old one are in use")
	}
}

func TestRenewalAnnotationInTheFutureWaits(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	now := time.Now()
	k := &certs.Keeper{Client: k8s, Now: func() time.Time { return now }}
	if _, err := k.Ensure(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Annotations = map[string]string{etcdv1beta1.AnnotationRenewCertificates: now.Add(time.Hour).UTC().Format(time.RFC3339)}
	for range 3 {
		if res, err := k.Ensure(ctx, c); err != nil || len(res.Changed) != 0 {
			t.Fatalf("a renewal asked for an hour from now renewed %v (err %v) at once; every certificate issued now would be renewed again on every pass", secretNames(res), err)
		}
	}
	now = now.Add(time.Hour + time.Minute)
	if res, err := k.Ensure(ctx, c); err != nil || len(res.Changed) != 3 {
		t.Fatalf("an hour later: renewed %v, err %v; want the three leaves", secretNames(res), err)
	}
}
