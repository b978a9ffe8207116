package verdict

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/version"
)

// Thresholds of the CertificatesExpiring condition. A leaf is renewed a third of its life (four months
// of a year) before it expires, so one within LeafExpiryWarning of expiry has failed to renew for
// months; the CA is rotated two years before it expires, so one within CAExpiryWarning of expiry has
// failed to rotate for a year.
const (
	LeafExpiryWarning = 30 * 24 * time.Hour
	CAExpiryWarning   = 365 * 24 * time.Hour
)

// TLSObservation is what the cluster's certificates were when the pass looked, At.
type TLSObservation struct {
	At           time.Time
	ClientSecret string
	// CANotAfter is when the CA expires; NotAfter when the first leaf does; RenewAt when the first leaf
	// is renewed (zero when there is none).
	CANotAfter, NotAfter, RenewAt time.Time
	// TrustedCAsHash is a short hash of the CA certificates the members trust (empty before the first
	// CA rotation); Rotation is the phase of the CA rotation under way (empty when none is), begun at
	// RotationStarted.
	TrustedCAsHash  string
	Rotation        etcdv1beta1.CARotationPhase
	RotationStarted time.Time
	// UserSecrets is true when the certificates are the Secrets of spec.tls.secrets, which the user
	// renews and rotates.
	UserSecrets bool
	// Issuer names the cert-manager issuer of spec.tls.issuerRef ("Issuer ca") when it issues the
	// certificates (UserSecrets is then true too): cert-manager renews them.
	Issuer string
}

// ApplyTrustedCAs sets status.tls.trustedCAsHash of cluster c from what a pass observed, at once: the
// member pods' spec hash covers it (resources.Options.SpecHash), so the phases after the observation
// roll members onto the CA certificates they must trust now.
func ApplyTrustedCAs(c *etcdv1beta1.EtcdCluster, o *TLSObservation) {
	if o == nil {
		return
	}
	if c.Status.TLS == nil {
		c.Status.TLS = &etcdv1beta1.TLSStatus{}
	}
	c.Status.TLS.TrustedCAsHash = o.TrustedCAsHash
}

// applyTLSStatus sets status.tls and the CertificatesExpiring condition from what the pass observed of
// the certificates, and removes both once no port uses TLS any more (TLS switched off; status.tls keeps
// the client scheme and when it changed until the grace period of that change is over); nothing when it
// did not look (the status keeps what it said) but the client scheme the spec asks for and when it
// changed (model.Cluster.ClientSchemeChangedAt).
func applyTLSStatus(s *scope) {
	st := &s.cluster.Status
	changed := s.m.ClientSchemeChangedAt()
	switch o := s.report.TLS; {
	case s.report.NoTLS:
		st.TLS = nil
		meta.RemoveStatusCondition(&st.Conditions, etcdv1beta1.ConditionCertificatesExpiring)
		if changed.IsZero() || !s.m.Now.Before(changed.Add(s.m.TLSSwitchGrace())) {
			return
		} // else the only member is being recreated within the grace period of a change: keep when
	case o != nil:
		st.TLS = &etcdv1beta1.TLSStatus{ClientSecret: o.ClientSecret, CANotAfter: timeOrNil(o.CANotAfter),
			NotAfter: timeOrNil(o.NotAfter), RenewAt: timeOrNil(o.RenewAt), TrustedCAsHash: o.TrustedCAsHash}
		if o.Rotation != "" {
			st.TLS.CARotation = &etcdv1beta1.CARotationStatus{Phase: o.Rotation, StartedAt: timeOrNil(o.RotationStarted)}
		}
		expiring, reason := CertificatesExpiring(o)
		setCondition(st, s.cluster.Generation, etcdv1beta1.ConditionCertificatesExpiring, expiring, reason)
	}
	if st.TLS == nil && !changed.IsZero() {
		st.TLS = &etcdv1beta1.TLSStatus{} // a switch is under way: record when it began
	}
	if st.TLS != nil {
		st.TLS.ClientScheme, st.TLS.ClientSchemeChangedAt = s.m.ClientScheme(), timeOrNil(changed)
	}
}

// issuedOverdue reports whether a certificate cert-manager issues (o.Issuer) is past its renewal time by
// more than an hour (cert-manager renews at that time, so it failed to), or, when cert-manager reported
// no renewal time, has less than LeafExpiryWarning left.
func issuedOverdue(o *TLSObservation) bool {
	if o.NotAfter.IsZero() {
		return false
	}
	if o.RenewAt.IsZero() {
		return o.NotAfter.Sub(o.At) < LeafExpiryWarning
	}
	return o.At.After(o.RenewAt.Add(time.Hour))
}

// CertificatesExpiring returns whether a certificate of o expires soon (see LeafExpiryWarning and
// CAExpiryWarning), with the condition's reason and a message that says when and what to do.
func CertificatesExpiring(o *TLSObservation) (bool, [2]string) {
	switch {
	case o.Issuer != "" && issuedOverdue(o):
		due := ""
		if !o.RenewAt.IsZero() {
			due = " (due since " + o.RenewAt.UTC().Format(time.RFC3339) + ")"
		}
		return true, [2]string{etcdv1beta1.ReasonCertificateExpiring, fmt.Sprintf(
			"A certificate from cert-manager (%s, spec.tls.issuerRef) expires at %s and was not renewed%s: see the status of the "+
				"cluster's Certificates (kubectl describe certificates in the cluster's namespace) and cert-manager's logs",
			o.Issuer, o.NotAfter.UTC().Format(time.RFC3339), due)}
	case o.Issuer != "" && o.CANotAfter.Sub(o.At) < LeafExpiryWarning:
		return true, [2]string{etcdv1beta1.ReasonCertificateExpiring, fmt.Sprintf(
			"The CA of %s (spec.tls.issuerRef) expires at %s: give the issuer a new CA and renew the cluster's Certificates together; "+
				"the members then restart twice, one at a time (docs/security.md, \"The issuer's CA\")", o.Issuer, o.CANotAfter.UTC().Format(time.RFC3339))}
	case o.Issuer != "":
		// cert-manager renews the certificates, and nothing is overdue
	case o.UserSecrets && !o.NotAfter.IsZero() && o.NotAfter.Sub(o.At) < LeafExpiryWarning:
		return true, [2]string{etcdv1beta1.ReasonCertificateExpiring, fmt.Sprintf(
			"A certificate of spec.tls.secrets expires at %s: renew it (the operator does not renew the Secrets you keep)",
			o.NotAfter.UTC().Format(time.RFC3339))}
	case o.UserSecrets && o.CANotAfter.Sub(o.At) < CAExpiryWarning:
		return true, [2]string{etcdv1beta1.ReasonCertificateExpiring, fmt.Sprintf(
			"A CA certificate in the ca.crt of spec.tls.secrets expires at %s: add its successor to ca.crt, then issue the certificates from it",
			o.CANotAfter.UTC().Format(time.RFC3339))}
	case !o.NotAfter.IsZero() && o.NotAfter.Sub(o.At) < LeafExpiryWarning:
		return true, [2]string{etcdv1beta1.ReasonCertificateExpiring, fmt.Sprintf(
			"A certificate of the cluster expires at %s and was not renewed (due since %s): see the operator's events and logs for why",
			o.NotAfter.UTC().Format(time.RFC3339), o.RenewAt.UTC().Format(time.RFC3339))}
	case o.CANotAfter.Sub(o.At) < CAExpiryWarning:
		return true, [2]string{etcdv1beta1.ReasonCertificateExpiring, fmt.Sprintf(
			"The cluster's CA expires at %s and was not rotated: see the operator's events and logs for why, or rotate it with the annotation "+
				etcdv1beta1.AnnotationRotateCA+"=<now, RFC 3339>",
			o.CANotAfter.UTC().Format(time.RFC3339))}
	}
	msg := fmt.Sprintf("The CA expires at %s", o.CANotAfter.UTC().Format(time.RFC3339))
	if !o.RenewAt.IsZero() {
		msg += fmt.Sprintf("; the first certificate is renewed at %s", o.RenewAt.UTC().Format(time.RFC3339))
	}
	switch {
	case o.Issuer != "":
		msg = fmt.Sprintf("The CA of %s expires at %s, the first certificate at %s", o.Issuer, o.CANotAfter.UTC().Format(time.RFC3339),
			o.NotAfter.UTC().Format(time.RFC3339))
		if !o.RenewAt.IsZero() {
			msg += fmt.Sprintf("; cert-manager renews it at %s", o.RenewAt.UTC().Format(time.RFC3339))
		}
	case o.UserSecrets:
		msg = fmt.Sprintf("The first CA certificate of spec.tls.secrets expires at %s, the first certificate at %s (you renew them)",
			o.CANotAfter.UTC().Format(time.RFC3339), o.NotAfter.UTC().Format(time.RFC3339))
	}
	return false, [2]string{etcdv1beta1.ReasonCertificatesCurrent, msg}
}

// SpecProblems returns what in cluster c's spec the admission webhook would have refused but got in
// anyway (the webhook was not installed or was bypassed), one problem each: a version the members
// cannot move to from what they run, extraArgs etcd must not get (v1beta1.ValidateExtraArgs).
func SpecProblems(c *etcdv1beta1.EtcdCluster) []string {
	var problems []string
	if cur := c.Status.CurrentVersion; cur != "" {
		if err := version.CheckUpgrade(cur, c.Spec.VersionOrDefault()); err != nil {
			problems = append(problems, fmt.Sprintf("spec.version %s: %v", c.Spec.VersionOrDefault(), err))
		}
	}
	if c.Spec.Options != nil {
		problems = append(problems, etcdv1beta1.ValidateExtraArgs(c.Spec.Options.ExtraArgs)...)
	}
	return problems
}

func timeOrNil(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t}
}

// RotatingCA is the step of a pass that advanced a CA rotation (message says how) or waits for one
// (waiting; message says what for, and the pass looks again within 10 s); nil when message is empty.
func RotatingCA(message string, waiting bool) *Step {
	if message == "" {
		return nil
	}
	st := Acting(etcdv1beta1.ReasonRotatingCA, message)
	if waiting {
		st.After = 10 * time.Second
	}
	return st
}
