package certs_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/certs"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// certManagerObject creates the cert-manager object kind named name in namespace ns, with spec.
func certManagerObject(t *testing.T, kind, ns, name string, spec map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(resources.CertificateGVK.GroupVersion().WithKind(kind))
	u.SetNamespace(ns)
	u.SetName(name)
	if err := k8s.Create(context.Background(), u); err != nil {
		t.Fatalf("create %s %s: %v", kind, name, err)
	}
}

// caSecret writes a new CA named commonName into Secret name of namespace ns, as a cert-manager CA
// Issuer reads it (tls.crt, tls.key), and returns its certificate.
func caSecret(t *testing.T, ns, name, commonName string) *x509.Certificate {
	t.Helper()
	ca, err := pki.NewCA(commonName, 90*24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, err := ca.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: key}}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatalf("create CA Secret %s: %v", name, err)
	}
	return ca.Cert
}

// certificate reads the Certificate named name of cluster c.
func certificate(t *testing.T, c *etcdv1beta1.EtcdCluster, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(resources.CertificateGVK)
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: c.Namespace, Name: name}, u); err != nil {
		t.Fatalf("certificate %s: %v", name, err)
	}
	return u
}

// leaf parses the first certificate of the tls.crt of Secret name of cluster c.
func leaf(t *testing.T, c *etcdv1beta1.EtcdCluster, name string) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(secret(t, c, name).Data[resources.TLSCertKey])
	if b == nil {
		t.Fatalf("secret %s: tls.crt holds no PEM block", name)
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestIssuedCertificates: with spec.tls.issuerRef the keeper creates one cert-manager Certificate per
// Secret, controlled by the cluster, and issues nothing itself. While the Issuer is missing it blocks,
// saying so; once a CA Issuer exists, real cert-manager issues the Secrets and the keeper reports them
// (issuer, expiries, cert-manager's renewal time), and the operator reaches a real member serving them
// with the issued client certificate. A Secret deleted is issued again; a Certificate of the cluster's
// name that is not its own blocks it.
func TestIssuedCertificates(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	c.Spec.TLS.IssuerRef = &etcdv1beta1.IssuerReference{Name: "ca"}
	if err := k8s.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	testenv.StartCertManager(t, restCfg, c.Namespace)
	opts := resources.Options{}
	k := &certs.Keeper{Client: k8s, Options: opts}

	first, err := k.Ensure(ctx, c)
	if len(first.Changed) != 3 || !strings.Contains(first.Changed[0].Reason, "Certificate created, for the Issuer ca") {
		t.Errorf("the first pass: changes %+v; want the three Certificates created, for the cluster's events", first.Changed)
	}
	if reason, blocked := certs.Blocked(err); !blocked || reason != etcdv1beta1.ReasonCertificateNotReady ||
		!strings.Contains(err.Error(), "the Issuer ca of spec.tls.issuerRef is not ready: it does not exist in namespace "+c.Namespace) {
		t.Fatalf("the Issuer is missing: %v (reason %q); want it blocked, naming the Issuer", err, reason)
	}
	for _, name := range []string{"demo-cm-server-tls", "demo-cm-peer-tls", "demo-cm-client-tls"} {
		u := certificate(t, c, name)
		if ref := metav1.GetControllerOf(u); ref == nil || ref.UID != c.UID {
			t.Errorf("certificate %s is not controlled by the cluster: %v", name, u.GetOwnerReferences())
		}
		if got, _, _ := unstructured.NestedString(u.Object, "spec", "secretName"); got != name {
			t.Errorf("certificate %s writes Secret %q", name, got)
		}
		if got, _, _ := unstructured.NestedString(u.Object, "spec", "issuerRef", "name"); got != "ca" {
			t.Errorf("certificate %s names issuer %q, want ca", name, got)
		}
		if got, _, _ := unstructured.NestedString(u.Object, "spec", "secretTemplate", "labels", etcdv1beta1.LabelCluster); got != "demo" {
			t.Errorf("certificate %s does not label its Secret with the cluster: %q", name, got)
		}
	}
	if cn, _, _ := unstructured.NestedString(certificate(t, c, "demo-cm-peer-tls").Object, "spec", "commonName"); cn != resources.PeerCommonName(c) {
		t.Errorf("the peer Certificate's common name is %q, want %q (the members' --peer-cert-allowed-cn)", cn, resources.PeerCommonName(c))
	}
	dns, _, _ := unstructured.NestedStringSlice(certificate(t, c, "demo-cm-server-tls").Object, "spec", "dnsNames")
	if svc := "demo-client." + c.Namespace + ".svc.cluster.local"; !slices.Contains(dns, svc) || !slices.Contains(dns, "*.demo-peer."+c.Namespace+".svc.cluster.local") {
		t.Errorf("the server Certificate's names %v lack the client Service %s or the members' wildcard", dns, svc)
	}

	// a CA Issuer of a CA Secret written here (cert-manager's SelfSigned issuance can issue a root
	// twice within a second, which would be a CA change the test does not make)
	rootCA := caSecret(t, c.Namespace, "root-ca", "test root CA")
	certManagerObject(t, "Issuer", c.Namespace, "ca", map[string]any{"ca": map[string]any{"secretName": "root-ca"}})
	var res certs.Result
	var seen []string
	took := testutil.Eventually(t, 60*time.Second, "cert-manager issues the cluster's certificates", func(ctx context.Context) error {
		res, err = k.Ensure(ctx, c)
		if err != nil && !errors.Is(err, certs.ErrCertificateIssuing) && !errors.Is(err, certs.ErrCertificateNotReady) {
			t.Fatalf("while cert-manager issues: %v; want ErrCertificateIssuing or ErrCertificateNotReady", err)
		}
		if err != nil {
			seen = append(seen, err.Error())
			return err
		}
		if res.RenewAt.IsZero() { // cert-manager writes the Secret, then the Certificate's status
			return errors.New("no renewal time yet")
		}
		return nil
	})
	t.Logf("issued %.1f s after the Issuer was created; waited through: %q", took.Seconds(), seen)
	if !res.UserSecrets || res.Issuer != "Issuer ca" || res.ClientSecret != "demo-client-tls" || res.TrustedCAsHash == "" || res.Rotation != "" ||
		!res.CANotAfter.Equal(rootCA.NotAfter) || res.NotAfter.IsZero() || res.RenewAt.IsZero() || !res.RenewAt.Before(res.NotAfter) {
		t.Errorf("result %+v: want the issuer, the client Secret, a trust hash, the root CA's expiry, a renewal before expiry and no CA change", res)
	}
	// the members and clients mount the operator's copies: cert-manager's certificates, ca.crt the root
	for _, kind := range []string{"server", "peer", "client"} {
		assertMirror(t, c, kind, rootCA)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: "demo-ca"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the operator created a CA Secret of its own: %v", err)
	}
	if cn := leaf(t, c, "demo-cm-peer-tls").Subject.CommonName; cn != resources.PeerCommonName(c) {
		t.Errorf("the issued peer certificate's common name is %q, want %q", cn, resources.PeerCommonName(c))
	}

	// a pass over Certificates that are as they should be writes none of them
	gen := certificate(t, c, "demo-cm-server-tls").GetGeneration()
	for range 2 {
		if _, err := k.Ensure(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if got := certificate(t, c, "demo-cm-server-tls").GetGeneration(); got != gen {
		t.Errorf("passes over an unchanged cluster updated its server Certificate (generation %d, then %d)", gen, got)
	}

	// the operator reaches a real member serving the issued certificates, with the issued client certificate
	const host = "127.0.0.96"
	startTLSMember(t, host, writeSecret(t, secret(t, c, "demo-server-tls")), writeSecret(t, secret(t, c, "demo-peer-tls")))
	dial := func() error {
		opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		cl, err := etcd.New(opCtx, etcd.Config{Endpoints: []string{"https://" + host + ":2379"}, TLS: k.ClientTLS(c.Namespace, c.Name), DialTimeout: 2 * time.Second})
		if err != nil {
			return err
		}
		defer func() { _ = cl.Close() }()
		_, _, err = cl.MemberList(opCtx)
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("the operator's client configuration from the issued Secrets is refused: %v", err)
	}

	// a Secret deleted is issued again by cert-manager, and the keeper waits for it meanwhile
	before := leaf(t, c, "demo-cm-server-tls").SerialNumber
	if err := k8s.Delete(ctx, secret(t, c, "demo-cm-server-tls")); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Ensure(ctx, c); !errors.Is(err, certs.ErrCertificateIssuing) && !errors.Is(err, certs.ErrUnusableSecret) && err != nil {
		t.Errorf("the server Secret deleted: %v", err)
	}
	testutil.Eventually(t, 60*time.Second, "the server certificate is issued again", func(ctx context.Context) error {
		if _, err := k.Ensure(ctx, c); err != nil {
			return err
		}
		if leaf(t, c, "demo-cm-server-tls").SerialNumber.Cmp(before) == 0 {
			return fmt.Errorf("serial %s unchanged", before)
		}
		return nil
	})
	assertMirror(t, c, "server", rootCA) // renewed by the CA it had: copied at once

	// a Secret cert-manager wrote for another issuer (one of a cluster of the same name, say) is not
	// used: the keeper waits until cert-manager issues it again for this one
	peerSecret := secret(t, c, "demo-cm-peer-tls")
	peerSecret.Annotations["cert-manager.io/issuer-name"] = "someone-elses"
	if err := k8s.Update(ctx, peerSecret); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Ensure(ctx, c); err != nil && !strings.Contains(err.Error(), "it was issued by Issuer someone-elses (group cert-manager.io), not by the Issuer ca") {
		t.Errorf("a peer Secret of another issuer: %v; want it refused, naming the issuer", err)
	}
	testutil.Eventually(t, 60*time.Second, "cert-manager issues the peer certificate again for Issuer ca", func(ctx context.Context) error {
		_, err := k.Ensure(ctx, c)
		return err
	})

	// a Certificate changed by hand is put back; fields the operator does not set are kept
	// (cert-manager writes the status meanwhile: the edit is made again on a conflict)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := certificate(t, c, "demo-cm-peer-tls")
		if err := unstructured.SetNestedStringSlice(u.Object, []string{"elsewhere.example"}, "spec", "dnsNames"); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, "2160h", "spec", "duration"); err != nil {
			return err
		}
		return k8s.Update(ctx, u)
	}); err != nil {
		t.Fatal(err)
	}
	edited, err := k.Ensure(ctx, c)
	if err != nil && !errors.Is(err, certs.ErrCertificateIssuing) && !errors.Is(err, certs.ErrUnusableSecret) {
		t.Fatalf("after the peer Certificate was changed by hand: %v", err)
	}
	if len(edited.Changed) == 0 || edited.Changed[0].Secret != "demo-cm-peer-tls" || !strings.Contains(edited.Changed[0].Reason, "spec.dnsNames set back") {
		t.Errorf("the pass after a hand edit: changes %+v; want the peer Certificate's names set back, for the cluster's events", edited.Changed)
	}
	u := certificate(t, c, "demo-cm-peer-tls")
	dns, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "dnsNames")
	duration, _, _ := unstructured.NestedString(u.Object, "spec", "duration")
	if !slices.Contains(dns, "*.demo-peer."+c.Namespace+".svc.cluster.local") || slices.Contains(dns, "elsewhere.example") || duration != "2160h" {
		t.Errorf("the peer Certificate after a pass: names %v, duration %q; want the members' names back and the duration kept", dns, duration)
	}
	// cert-manager issues the peer certificate again for the names set back (under load this takes
	// seconds; the CA change below starts from certificates that are all issued)
	testutil.Eventually(t, 60*time.Second, "cert-manager issues the peer certificate again for the members' names", func(ctx context.Context) error {
		_, err := k.Ensure(ctx, c)
		return err
	})

	replaceIssuerCA(t, k, c, rootCA)

	// a Certificate of the name the cluster needs that is not its own
	other := newCluster(t)
	other.Spec.TLS.IssuerRef = &etcdv1beta1.IssuerReference{Name: "ca"}
	if err := k8s.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	certManagerObject(t, "Certificate", other.Namespace, "demo-cm-server-tls", map[string]any{"secretName": "someone-else", "commonName": "x",
		"issuerRef": map[string]any{"name": "ca"}})
	if _, err := k.Ensure(ctx, other); !errors.Is(err, certs.ErrForeignSecret) || !strings.Contains(err.Error(), "certificate demo-cm-server-tls exists") {
		t.Errorf("a Certificate of the cluster's name that is someone else's: %v; want ErrForeignSecret naming it", err)
	}
}

// assertMirror checks that the operator's Secret of kind ("server", "peer", "client") of cluster c holds
// the certificate and key of cert-manager's Secret, and ca.crt the CAs trust alone.
func assertMirror(t *testing.T, c *etcdv1beta1.EtcdCluster, kind string, trust ...*x509.Certificate) {
	t.Helper()
	issued, mirror := secret(t, c, "demo-cm-"+kind+"-tls"), secret(t, c, "demo-"+kind+"-tls")
	if !bytes.Equal(issued.Data[resources.TLSCertKey], mirror.Data[resources.TLSCertKey]) || !bytes.Equal(issued.Data[resources.TLSKeyKey], mirror.Data[resources.TLSKeyKey]) {
		t.Errorf("secret %s does not hold the certificate cert-manager wrote into %s", mirror.Name, issued.Name)
	}
	assertTrust(t, mirror, trust...)
}

// assertTrust checks that the ca.crt of Secret s holds the CAs trust, and no other.
func assertTrust(t *testing.T, s *corev1.Secret, trust ...*x509.Certificate) {
	t.Helper()
	got := pki.Certs(s.Data[resources.CAKey])
	if len(got) != len(trust) {
		t.Errorf("secret %s: ca.crt holds %d CAs, want %d", s.Name, len(got), len(trust))
	}
	for _, ca := range trust {
		if !pki.ContainsCert(s.Data[resources.CAKey], ca) {
			t.Errorf("secret %s: ca.crt lacks CA %q", s.Name, ca.Subject.CommonName)
		}
	}
}

// replaceIssuerCA replaces the CA of cluster c's Issuer "ca" (whose CA is old) with a new one and has
// cert-manager issue every certificate again: the keeper adds the new CA to the trust bundles and
// keeps serving the old certificates (TrustNewCA: the members restart to trust it), copies the new
// ones only once the rotation step is taken CARotationDwell later on a settled cluster
// (IssueFromNewCA), drops the old CA the same dwell later (DropOldCA), then ends the change.
func replaceIssuerCA(t *testing.T, k *certs.Keeper, c *etcdv1beta1.EtcdCluster, old *x509.Certificate) {
	ctx := context.Background()
	// member pods mount the Secrets of both ports
	mounted := certs.Ports{Client: true, Peer: true, MountedClient: true, MountedPeer: true}
	newCA := caSecret(t, c.Namespace, "root-ca-2", "test root CA 2")
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(resources.CertificateGVK.GroupVersion().WithKind("Issuer"))
		if err := k8s.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: "ca"}, u); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, "root-ca-2", "spec", "ca", "secretName"); err != nil {
			return err
		}
		return k8s.Update(ctx, u)
	}); err != nil {
		t.Fatal(err)
	}
	before, err := k.EnsureFor(ctx, c, mounted)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"server", "peer", "client"} { // as `cmctl renew` would, with a new key
		if err := k8s.Delete(ctx, secret(t, c, "demo-cm-"+kind+"-tls")); err != nil {
			t.Fatal(err)
		}
	}
	var res certs.Result
	testutil.Eventually(t, 60*time.Second, "cert-manager issues the certificates from the new CA", func(ctx context.Context) error {
		if res, err = k.EnsureFor(ctx, c, mounted); err != nil {
			return err
		}
		for _, kind := range []string{"server", "peer", "client"} {
			if l := leaf(t, c, "demo-cm-"+kind+"-tls"); l.CheckSignatureFrom(newCA) != nil {
				return fmt.Errorf("the %s certificate is not of the new CA yet", kind)
			}
		}
		return nil
	})
	res, err = k.EnsureFor(ctx, c, mounted)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rotation != etcdv1beta1.CARotationTrustNewCA || res.TrustedCAsHash == before.TrustedCAsHash || res.RotationStarted.IsZero() {
		t.Errorf("certificates of a new CA: rotation %q started %s, trust hash %s (before %s); want TrustNewCA and a new hash",
			res.Rotation, res.RotationStarted, res.TrustedCAsHash, before.TrustedCAsHash)
	}
	for _, kind := range []string{"server", "peer", "client"} {
		s := secret(t, c, "demo-"+kind+"-tls")
		if l := leaf(t, c, s.Name); l.CheckSignatureFrom(old) != nil {
			t.Errorf("secret %s serves a certificate of the new CA before the members trust it", s.Name)
		}
		assertTrust(t, s, old, newCA)
	}
	if served := leaf(t, c, "demo-server-tls").NotAfter; res.NotAfter.After(served) {
		t.Errorf("the expiry reported is %s, after that of the certificate the members serve (%s)", res.NotAfter, served)
	}
	// the only member's pod recreated for the change (no pod mounts the Secrets for a moment): the
	// change goes on, the old certificates served
	if res, err := k.EnsureFor(ctx, c, certs.Ports{Client: true, Peer: true}); err != nil || res.Rotation != etcdv1beta1.CARotationTrustNewCA ||
		leaf(t, c, "demo-peer-tls").CheckSignatureFrom(old) != nil {
		t.Errorf("no member pod for a moment during the change: rotation %q, err %v; want TrustNewCA and the old certificates kept", res.Rotation, err)
	}
	// a Secret the members mount deleted during the change cannot be written again safely: blocked,
	// until it is put back
	saved := secret(t, c, "demo-peer-tls")
	if err := k8s.Delete(ctx, saved); err != nil {
		t.Fatal(err)
	}
	c.Status.TLS = &etcdv1beta1.TLSStatus{CARotation: &etcdv1beta1.CARotationStatus{Phase: res.Rotation}} // as the status says
	if _, err := k.EnsureFor(ctx, c, mounted); !errors.Is(err, certs.ErrCALost) || !strings.Contains(err.Error(), "secret demo-peer-tls, which the member pods mount, was deleted") {
		t.Errorf("the peer Secret deleted during the change: %v; want ErrCALost naming it", err)
	}
	saved.ResourceVersion, saved.UID = "", ""
	if err := k8s.Create(ctx, saved); err != nil {
		t.Fatal(err)
	}
	if res, err = k.EnsureFor(ctx, c, mounted); err != nil || res.Rotation != etcdv1beta1.CARotationTrustNewCA {
		t.Fatalf("the peer Secret put back: rotation %q, err %v", res.Rotation, err)
	}
	// deleted again, and no copy: once no member pod is left (the user deleted them together), the
	// port's Secret is written from cert-manager's, trusting the issuer's CA alone
	if err := k8s.Delete(ctx, secret(t, c, "demo-peer-tls")); err != nil {
		t.Fatal(err)
	}
	if res, err = k.EnsureFor(ctx, c, certs.Ports{Client: true, Peer: true, MountedClient: true}); err != nil {
		t.Fatalf("the peer Secret gone and no pod mounting it: %v", err)
	}
	assertMirror(t, c, "peer", newCA)

	// the next steps, on a settled cluster (no members to check here), each a dwell after the last
	now := time.Now()
	step := func(at time.Duration, want etcdv1beta1.CARotationPhase) {
		t.Helper()
		k.Now = func() time.Time { return now.Add(at) }
		if ch, wait, err := k.AdvanceRotation(ctx, c, res, nil); err != nil || ch != nil || !strings.Contains(wait, "waits until") {
			t.Fatalf("a step before the dwell: change %v, wait %q, err %v; want a wait", ch, wait, err)
		}
		k.Now = func() time.Time { return now.Add(at + certs.CARotationDwell) }
		ch, _, err := k.AdvanceRotation(ctx, c, res, nil)
		if err != nil || ch == nil {
			t.Fatalf("the step after the dwell: change %v, err %v", ch, err)
		}
		t.Logf("%s: %s", ch.Secret, ch.Reason)
		if res, err = k.EnsureFor(ctx, c, mounted); err != nil || res.Rotation != want {
			t.Fatalf("after the step: rotation %q, err %v; want %q", res.Rotation, err, want)
		}
	}
	step(0, etcdv1beta1.CARotationIssueFromNewCA)
	for _, kind := range []string{"server", "client"} {
		assertMirror(t, c, kind, old, newCA)
	}
	assertMirror(t, c, "peer", newCA)
	step(certs.CARotationDwell, etcdv1beta1.CARotationDropOldCA)
	for _, kind := range []string{"server", "peer", "client"} {
		assertMirror(t, c, kind, newCA)
	}
	ch, _, err := k.AdvanceRotation(ctx, c, res, nil)
	if err != nil || ch == nil {
		t.Fatalf("ending the change: %v, %v", ch, err)
	}
	if res, err = k.EnsureFor(ctx, c, mounted); err != nil || res.Rotation != "" || !res.CANotAfter.Equal(newCA.NotAfter) {
		t.Errorf("after the change: rotation %q, CA expiry %s, err %v; want none, the new CA's", res.Rotation, res.CANotAfter, err)
	}
	k.Now, c.Status.TLS = nil, nil
}
