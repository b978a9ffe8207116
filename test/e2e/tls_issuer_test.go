//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	renewCertificate(t, ns, resources.ServerTLSSecretName(c))
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
