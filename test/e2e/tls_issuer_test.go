//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// startCertManager makes cert-manager issue certificates in the cluster for the test: with
// E2E_CERT_MANAGER=cluster the cluster runs it already; otherwise its certificate controllers run as a
// process of the test's (testenv.StartCertManager: the CRDs installed, the binary make test-e2e builds).
func startCertManager(t *testing.T, ns string) {
	t.Helper()
	if os.Getenv("E2E_CERT_MANAGER") == "cluster" {
		return
	}
	testenv.StartCertManager(t, config, ns)
}

// createCertManagerObject creates the cert-manager.io/v1 object kind named name in ns, with spec.
func createCertManagerObject(t *testing.T, kind, ns, name string, spec map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(resources.CertificateGVK.GroupVersion().WithKind(kind))
	u.SetNamespace(ns)
	u.SetName(name)
	if err := k8s.Create(context.Background(), u); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create %s %s: %v", kind, name, err)
	}
}

// TestCertManagerIssuer: a cluster whose certificates a cert-manager CA Issuer issues
// (spec.tls.issuerRef) becomes Available with no CA of the operator's; its members serve certificates
// of the Issuer's CA on both ports, and a client with the issued client certificate reads and writes
// through the client Service. When cert-manager renews the server certificate (a renewal triggered as
// `cmctl renew` does), every member serves the new one without a restart while a writer runs, and no
// acknowledged write is lost.
func TestCertManagerIssuer(t *testing.T) {
	t.Parallel() // mostly waits: runs with the others of its kind once the serial tests are done (suite_test.go)
	ctx := context.Background()
	const ns, name = "e2e-tls-issuer", "demo"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	startCertManager(t, ns)
	// a CA Issuer whose CA a SelfSigned Issuer issues, as cert-manager's documentation sets one up
	createCertManagerObject(t, "Issuer", ns, "selfsigned", map[string]any{"selfSigned": map[string]any{}})
	createCertManagerObject(t, "Certificate", ns, "root", map[string]any{"isCA": true, "commonName": "e2e root CA", "secretName": "root-ca",
		"privateKey": map[string]any{"algorithm": "ECDSA", "size": int64(256)}, "issuerRef": map[string]any{"name": "selfsigned", "kind": "Issuer"}})
	createCertManagerObject(t, "Issuer", ns, "ca", map[string]any{"ca": map[string]any{"secretName": "root-ca"}})

	c := newCluster(t, ns, name, 3, testutil.WithTLS(true, true), testutil.WithIssuer("ca", ""))
	took, got := assertAvailable(t, c, availableTimeout)
	t.Logf("apply -> Available with certificates from cert-manager in %s", took.Round(100*time.Millisecond))
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + resources.CASecretSuffix}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the operator created a CA Secret for a cluster whose certificates cert-manager issues: %v", err)
	}
	if got.Status.TLS == nil || got.Status.TLS.ClientSecret != resources.ClientTLSSecretName(c) || got.Status.TLS.RenewAt == nil {
		t.Errorf("status.tls %+v, want the client Secret and cert-manager's renewal time", got.Status.TLS)
	}
	rootSecret := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "root-ca"}, rootSecret); err != nil {
		t.Fatal(err)
	}
	root, err := pki.ParseCert(rootSecret.Data[resources.TLSCertKey])
	if err != nil {
		t.Fatal(err)
	}
	uids := assertServedCA(t, c, root, "the Issuer's CA")
	before, err := secretCert(ctx, c, resources.ServerTLSSecretName(c))
	if err != nil {
		t.Fatal(err)
	}

	ep := clientServiceEndpoint(t, c) // dials with the issued client Secret (clusterClientTLS)
	w := startWriter(t, ep)
	renewCertificate(t, ns, resources.IssuedTLSSecretName(c, resources.ServerTLSSecretSuffix))
	took = assertRenewedInPlace(t, c, uids, w, ep, func(ctx context.Context) (*big.Int, error) {
		renewed, err := secretCert(ctx, c, resources.ServerTLSSecretName(c))
		if err != nil {
			return nil, err
		}
		if renewed.SerialNumber.Cmp(before.SerialNumber) == 0 {
			return nil, fmt.Errorf("cert-manager has not renewed the server certificate yet (serial %s)", before.SerialNumber)
		}
		return renewed.SerialNumber, nil
	})
	t.Logf("cert-manager renewal triggered -> every member serves the new certificate in %s", took.Round(time.Second))

	replaceIssuerCA(t, c, ep)
}

// replaceIssuerCA replaces the CA of cluster c's Issuer "ca" with a new one and has cert-manager renew
// the cluster's three certificates by it, while a writer dials ep with what the users' client Secret
// holds at each handshake: the operator adds the new CA to the members' trust, serves the new
// certificates once they trust it, and then drops the old CA. A quorum stays available throughout, no
// write fails for a certificate reason, no acknowledged write is lost, and the members end serving
// certificates of the new CA and refusing the old CA's client certificate.
func replaceIssuerCA(t *testing.T, c *etcdv1beta1.EtcdCluster, ep string) {
	ctx := context.Background()
	createCertManagerObject(t, "Certificate", c.Namespace, "root-2", map[string]any{"isCA": true, "commonName": "e2e root CA 2", "secretName": "root-ca-2",
		"privateKey": map[string]any{"algorithm": "ECDSA", "size": int64(256)}, "issuerRef": map[string]any{"name": "selfsigned", "kind": "Issuer"}})
	poll.Eventually(t, statusTimeout, "cert-manager issues the new CA", func(ctx context.Context) error {
		_, err := secretCert(ctx, c, "root-ca-2")
		return err
	})
	oldClient := tlsFor(ep)
	endpointTLS.Store(ep, reloadingClientTLS(c.Namespace, c.Name))
	w := startWriter(t, ep)
	stopSampling := sampleStatus(c, func(got *etcdv1beta1.EtcdCluster) string {
		if got.Status.TLS != nil && got.Status.TLS.CARotation != nil {
			return string(got.Status.TLS.CARotation.Phase)
		}
		return "none"
	})
	issuer := &unstructured.Unstructured{}
	issuer.SetGroupVersionKind(resources.CertificateGVK.GroupVersion().WithKind("Issuer"))
	issuer.SetNamespace(c.Namespace)
	issuer.SetName("ca")
	if err := k8s.Patch(ctx, issuer, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"ca":{"secretName":"root-ca-2"}}}`))); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, suffix := range []string{resources.ServerTLSSecretSuffix, resources.PeerTLSSecretSuffix, resources.ClientTLSSecretSuffix} {
		renewCertificate(t, c.Namespace, resources.IssuedTLSSecretName(c, suffix))
	}
	var newRoot *x509.Certificate
	took := poll.Eventually(t, 15*time.Minute, "the members moved to the Issuer's new CA", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		// cert-manager may issue the new CA more than once: the Issuer's CA is what its Secret holds now
		if newRoot, err = secretCert(ctx, c, "root-ca-2"); err != nil {
			return err
		}
		for _, name := range []string{resources.ServerTLSSecretName(c), resources.PeerTLSSecretName(c), resources.ClientTLSSecretName(c)} {
			s := &corev1.Secret{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s); err != nil {
				return err
			}
			cert, err := pki.ParseCert(s.Data[resources.TLSCertKey])
			if err != nil {
				return err
			}
			if cert.CheckSignatureFrom(newRoot) != nil {
				return fmt.Errorf("secret %s holds a certificate of the old CA", name)
			}
			if trust := pki.Certs(s.Data[resources.CAKey]); len(trust) != 1 || !trust[0].Equal(newRoot) {
				return fmt.Errorf("secret %s trusts %d CAs", name, len(trust))
			}
		}
		switch {
		case got.Status.TLS == nil || got.Status.TLS.CARotation != nil:
			return fmt.Errorf("CA change under way: %+v", got.Status.TLS)
		case got.Status.ReadyReplicas != 3:
			return fmt.Errorf("%d/3 ready", got.Status.ReadyReplicas)
		}
		return nil
	})
	s := stopSampling()
	t.Logf("the Issuer's CA replaced and its certificates renewed -> the members moved to the new CA in %s (since the renewals: %s); phases: %s",
		took.Round(time.Second), time.Since(start).Round(time.Second), strings.Join(s.steps, ", "))
	if len(s.unavailable) > 0 {
		t.Errorf("quorum not available throughout the change of CA: %v", s.unavailable)
	}
	assertServedCA(t, c, newRoot, "the Issuer's new CA")
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range pods {
		if err := getKey(ctx, "https://"+p.Status.PodIP+":2379", oldClient); err == nil {
			t.Errorf("%s still trusts the Issuer's old CA", name)
		}
	}
	assertNoCertificateFailures(t, w)
	w.stopAndVerify(t, ep)
}

// renewCertificate asks cert-manager to issue Certificate name in ns again now, as `cmctl renew`
// does: its Issuing condition set True with reason ManuallyTriggered.
func renewCertificate(t *testing.T, ns, name string) {
	t.Helper()
	poll.Eventually(t, statusTimeout, "Certificate "+name+" marked for renewal", func(ctx context.Context) error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(resources.CertificateGVK)
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			return err
		}
		all, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		var conds []any
		for _, x := range all {
			if m, ok := x.(map[string]any); !ok || m["type"] != "Issuing" {
				conds = append(conds, x)
			}
		}
		conds = append(conds, map[string]any{"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
			"message": "renewal triggered by the test", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
		if err := unstructured.SetNestedSlice(u.Object, conds, "status", "conditions"); err != nil {
			return err
		}
		return k8s.Status().Update(ctx, u)
	})
}
