package certs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// ErrCertificateIssuing is wrapped by EnsureFor's error while cert-manager is issuing a certificate of
// spec.tls.issuerRef that the cluster needs and has no usable one yet: the pass waits for it.
var ErrCertificateIssuing = errors.New("being issued by cert-manager")

// ErrCertificateNotReady is wrapped by EnsureFor's error when a certificate of spec.tls.issuerRef that
// the cluster needs cannot be issued: cert-manager is not installed, the issuer does not exist or is not
// Ready, or the Certificate's last issuance failed. The message says what cert-manager says.
var ErrCertificateNotReady = errors.New("not ready")

// ensureIssued keeps the cert-manager Certificates of cluster c's spec.tls.issuerRef for the ports that
// need them (resources.Options.IssuedCertificates), then checks the Secrets cert-manager writes as it
// checks those of spec.tls.secrets (ensureUser) and copies them into the Secrets the pods mount
// (syncIssued, trust.go). While a Secret is missing or not yet usable, it returns
// ErrCertificateIssuing or ErrCertificateNotReady with what the Certificate's conditions say. RenewAt is
// the earliest renewal time cert-manager reports.
func (k *Keeper) ensureIssued(ctx context.Context, c *etcdv1beta1.EtcdCluster, ports Ports) (Result, error) {
	wanted := k.Options.IssuedCertificates(c, ports.Client, ports.Peer)
	current := make([]*unstructured.Unstructured, 0, len(wanted))
	var applied []Changed
	for _, w := range wanted {
		got, why, err := k.applyCertificate(ctx, c, w.Object)
		if err != nil {
			return Result{Changed: applied}, err
		}
		current = append(current, got)
		if why != "" {
			applied = append(applied, Changed{Secret: w.Object.GetName(), Reason: why})
		}
	}
	res, err := k.useIssued(ctx, c, ports, current)
	res.Changed = append(applied, res.Changed...)
	return res, err
}

// useIssued is ensureIssued once the Certificates are current: it checks the Secrets cert-manager
// wrote and copies them into the operator's (syncIssued).
func (k *Keeper) useIssued(ctx context.Context, c *etcdv1beta1.EtcdCluster, ports Ports, current []*unstructured.Unstructured) (Result, error) {
	res, leaves, err := k.checkUser(ctx, c, ports)
	if err != nil {
		if !errors.Is(err, ErrUnusableSecret) {
			return Result{}, err
		}
		if ierr := k.issuerReady(ctx, c); ierr != nil {
			return Result{}, ierr
		}
		// what cert-manager says of the Certificate of the Secret that is not usable
		var bad *unusableSecret
		if !errors.As(err, &bad) {
			return Result{}, err
		}
		for _, got := range current {
			if got.GetName() != bad.name {
				continue
			}
			if perr := certificatePending(got); perr != nil {
				return Result{}, fmt.Errorf("%w; %s", perr, err.Error())
			}
		}
		return Result{}, err
	}
	for _, got := range current {
		s, _, _ := unstructured.NestedString(got.Object, "status", "renewalTime")
		if at, perr := time.Parse(time.RFC3339, s); perr == nil && (res.RenewAt.IsZero() || at.Before(res.RenewAt)) {
			res.RenewAt = at
		}
	}
	res.Issuer = issuerOf(c)
	if res.issued, res.Changed, err = k.syncIssued(ctx, c, leaves, ports); err != nil {
		return Result{}, err
	}
	res.TrustedCAsHash, res.Rotation, res.RotationStarted = issuedTrust(res.issued)
	servedExpiry(c, res.issued, &res)
	if ports.Client {
		server, client := res.issued[0].mirrors[0], res.issued[0].mirrors[1]
		return res, k.userOperator(c, &userLeaf{kind: "server", name: server.Name, secret: server},
			&userLeaf{kind: "client", name: client.Name, secret: client})
	}
	return res, nil
}

// applyCertificate creates Certificate want, or updates the spec fields the operator sets of the one of
// its name that cluster c controls, and returns it as the API server has it, and what it did for the
// cluster's events ("" when nothing). An update that conflicts with cert-manager's own (of the status)
// is tried again on a fresh read.
func (k *Keeper) applyCertificate(ctx context.Context, c *etcdv1beta1.EtcdCluster, want *unstructured.Unstructured) (*unstructured.Unstructured, string, error) {
	var got *unstructured.Unstructured
	var why string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		got, why, err = k.applyCertificateOnce(ctx, c, want)
		return err
	})
	return got, why, err
}

// applyCertificateOnce is one attempt of applyCertificate; its error wraps the API server's, so that a
// conflict is seen as one.
func (k *Keeper) applyCertificateOnce(ctx context.Context, c *etcdv1beta1.EtcdCluster, want *unstructured.Unstructured) (*unstructured.Unstructured, string, error) {
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(resources.CertificateGVK)
	err := k.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: want.GetName()}, got)
	switch {
	case meta.IsNoMatchError(err):
		return nil, "", fmt.Errorf("certificate %s of spec.tls.issuerRef is %w: cert-manager is not installed in this Kubernetes cluster "+
			"(the API server serves no %s): install cert-manager, or delete the EtcdCluster and create it without spec.tls.issuerRef",
			want.GetName(), ErrCertificateNotReady, resources.CertificateGVK.GroupKind())
	case apierrors.IsNotFound(err):
		if err := k.Client.Create(ctx, want); err != nil {
			return nil, "", fmt.Errorf("create certificate %s: %w", want.GetName(), err)
		}
		return want, "cert-manager Certificate created, for the " + issuerOf(c), nil
	case err != nil:
		return nil, "", fmt.Errorf("read certificate %s: %w", want.GetName(), err)
	}
	if !metav1.IsControlledBy(got, c) {
		return nil, "", fmt.Errorf("certificate %s exists and is %w (no owner reference to it): rename or delete it, or give the cluster another name; "+
			"the operator creates its own", want.GetName(), ErrForeignSecret)
	}
	spec, _, _ := unstructured.NestedMap(got.Object, "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	var changed []string
	for field, v := range want.Object["spec"].(map[string]any) {
		a, _ := json.Marshal(spec[field])
		b, _ := json.Marshal(v)
		if string(a) != string(b) {
			spec[field], changed = v, append(changed, "spec."+field)
		}
	}
	if len(changed) == 0 {
		return got, "", nil
	}
	if err := unstructured.SetNestedMap(got.Object, spec, "spec"); err != nil {
		return nil, "", fmt.Errorf("certificate %s: %w", want.GetName(), err)
	}
	if err := k.Client.Update(ctx, got); err != nil {
		return nil, "", fmt.Errorf("update certificate %s: %w", want.GetName(), err)
	}
	slices.Sort(changed)
	return got, "cert-manager Certificate updated: " + strings.Join(changed, ", ") + " set back to what the cluster needs", nil
}

// certificatePending returns why Certificate u has not written a usable Secret, from its Ready and
// Issuing conditions (cert-manager's): ErrCertificateNotReady when its last issuance failed (Issuing
// False with reason Failed, or a failure time and no issuance under way: cert-manager then retries with
// a backoff of its own); ErrCertificateIssuing otherwise while it is not Ready for its spec (being
// issued, or about to be: cert-manager marks a Certificate not Ready before it starts issuing it); nil
// when it is Ready for its spec.
func certificatePending(u *unstructured.Unstructured) error {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var ready, issuing map[string]any
	for _, x := range conds {
		if m, ok := x.(map[string]any); ok {
			switch m["type"] {
			case "Ready":
				ready = m
			case "Issuing":
				issuing = m
			}
		}
	}
	observed, _, _ := unstructured.NestedInt64(ready, "observedGeneration")
	failedAt, _, _ := unstructured.NestedString(u.Object, "status", "lastFailureTime")
	failed := (issuing != nil && issuing["status"] == "False" && issuing["reason"] == "Failed") || (issuing == nil && failedAt != "")
	switch {
	case ready != nil && ready["status"] == "True" && observed >= u.GetGeneration():
		return nil
	case failed:
		return fmt.Errorf("certificate %s is %w: its issuance failed%s%s: see `kubectl describe certificate -n %s %s` and its CertificateRequests",
			u.GetName(), ErrCertificateNotReady, conditionText(issuing), conditionText(ready), u.GetNamespace(), u.GetName())
	case ready == nil && issuing == nil:
		return fmt.Errorf("certificate %s is %w: it has no status yet (cert-manager's controller sets one within seconds: check that it runs)",
			u.GetName(), ErrCertificateIssuing)
	case issuing != nil:
		return fmt.Errorf("certificate %s is %w%s", u.GetName(), ErrCertificateIssuing, conditionText(issuing))
	}
	return fmt.Errorf("certificate %s is %w%s", u.GetName(), ErrCertificateIssuing, conditionText(ready))
}

// conditionText is ": <reason>: <message>" of condition m, or "" when it has neither.
func conditionText(m map[string]any) string {
	var parts []string
	for _, k := range []string{"reason", "message"} {
		if s, _ := m[k].(string); s != "" {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ": ")
}

// issuerOf names cluster c's issuer for messages: "Issuer ca" or "ClusterIssuer ca".
func issuerOf(c *etcdv1beta1.EtcdCluster) string {
	ref := c.Spec.TLS.IssuerRef.Defaulted()
	return ref.Kind + " " + ref.Name
}

// issuerReady returns ErrCertificateNotReady, saying why, when the issuer of cluster c's
// spec.tls.issuerRef is one of cert-manager's (group cert-manager.io) and does not exist or is not
// Ready; nil otherwise (an external issuer's kinds are not known here).
func (k *Keeper) issuerReady(ctx context.Context, c *etcdv1beta1.EtcdCluster) error {
	ref := c.Spec.TLS.IssuerRef.Defaulted()
	if ref.Group != resources.CertificateGVK.Group {
		return nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(resources.CertificateGVK.GroupVersion().WithKind(ref.Kind))
	key := types.NamespacedName{Name: ref.Name}
	where := ""
	if u.GetKind() == "Issuer" {
		key.Namespace, where = c.Namespace, " in namespace "+c.Namespace
	}
	err := k.Client.Get(ctx, key, u)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("the %s of spec.tls.issuerRef is %w: it does not exist%s; create it, or name another in spec.tls.issuerRef "+
			"(admitted until the cluster has had its first certificates)", issuerOf(c), ErrCertificateNotReady, where)
	case err != nil:
		return nil // not readable (RBAC of an older install, say): the Certificates' conditions tell
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range conds {
		if m, ok := x.(map[string]any); ok && m["type"] == "Ready" && m["status"] != "True" {
			return fmt.Errorf("the %s of spec.tls.issuerRef is %w%s", issuerOf(c), ErrCertificateNotReady, conditionText(m))
		}
	}
	return nil
}

// The annotations cert-manager puts on a Secret it writes: the issuer it was issued by.
const (
	issuerNameAnnotation  = "cert-manager.io/issuer-name"
	issuerKindAnnotation  = "cert-manager.io/issuer-kind"
	issuerGroupAnnotation = "cert-manager.io/issuer-group"
)

// issuedFor returns an unusable-Secret error when l is a Secret of spec.tls.issuerRef that cert-manager
// did not write for that issuer (its annotations name another, or none): one left from a cluster of the
// same name, or written before the issuer was changed, until cert-manager issues it again.
func issuedFor(c *etcdv1beta1.EtcdCluster, l *userLeaf) error {
	if !l.issued {
		return nil
	}
	a := l.secret.Annotations
	got := etcdv1beta1.IssuerReference{Name: a[issuerNameAnnotation], Kind: a[issuerKindAnnotation], Group: a[issuerGroupAnnotation]}.Defaulted()
	if got == c.Spec.TLS.IssuerRef.Defaulted() {
		return nil
	}
	if got.Name == "" {
		return unusable(l, errors.New("cert-manager has not written it (it has no cert-manager.io/issuer-name annotation)"))
	}
	return unusable(l, fmt.Errorf("it was issued by %s %s (group %s), not by the %s of spec.tls.issuerRef", got.Kind, got.Name, got.Group, issuerOf(c)))
}

// servedExpiry makes the expiry res reports, and the expiry metric of each certificate, those of the
// certificates the members serve and the clients mount (the operator's Secrets): while a change of the
// issuer's CA waits, they are older than those cert-manager has issued.
func servedExpiry(c *etcdv1beta1.EtcdCluster, ports []*issuedPort, res *Result) {
	for _, p := range ports {
		for i, m := range p.mirrors {
			cert, err := pki.ParseCert(m.Data[resources.TLSCertKey])
			if err != nil {
				continue
			}
			metrics.CertificateNotAfter.WithLabelValues(c.Namespace, c.Name, p.sources[i].kind).Set(float64(cert.NotAfter.Unix()))
			if cert.NotAfter.Before(res.NotAfter) {
				res.NotAfter = cert.NotAfter
			}
		}
	}
}
