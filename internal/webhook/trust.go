package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// trustTimeout bounds one trust check: a TLS handshake with the local webhook server and two reads of
// the webhook configurations.
const trustTimeout = 3 * time.Second

// trustCheck tells whether the API server can call the webhooks as it will: over TLS, trusting only
// the caBundle of each webhook, for the Service's DNS name. It connects to the webhook server, takes
// the certificate chain the server presents at that moment (after any reload), and verifies it
// against the caBundle of every webhook of both configurations.
type trustCheck struct {
	// reader reads the webhook configurations (uncached: the operator does not watch them otherwise).
	reader client.Reader
	// addr is host:port of the webhook server.
	addr string
	// dnsName is the name the API server verifies, <service>.<namespace>.svc; empty when the
	// namespace is unknown, and then only the chain is verified.
	dnsName string
	// validating and mutating name the webhook configurations.
	validating, mutating string
}

// check returns the caBundle of the validating configuration's first webhook when the served
// certificate verifies against every caBundle, and otherwise an error naming the webhook whose
// caBundle does not trust it (or the step that failed).
func (c *trustCheck) check(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, trustTimeout)
	defer cancel()
	chain, err := c.served(ctx)
	if err != nil {
		return nil, err
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.reader.Get(ctx, client.ObjectKey{Name: c.validating}, v); err != nil {
		return nil, fmt.Errorf("read ValidatingWebhookConfiguration %s: %w", c.validating, err)
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.reader.Get(ctx, client.ObjectKey{Name: c.mutating}, m); err != nil {
		return nil, fmt.Errorf("read MutatingWebhookConfiguration %s: %w", c.mutating, err)
	}
	if len(v.Webhooks) == 0 {
		return nil, fmt.Errorf("ValidatingWebhookConfiguration %s has no webhook", c.validating)
	}
	for _, w := range v.Webhooks {
		if err := c.trusts(chain, w.ClientConfig.CABundle); err != nil {
			return nil, fmt.Errorf("webhook %s of ValidatingWebhookConfiguration %s: %w", w.Name, v.Name, err)
		}
	}
	for _, w := range m.Webhooks {
		if err := c.trusts(chain, w.ClientConfig.CABundle); err != nil {
			return nil, fmt.Errorf("webhook %s of MutatingWebhookConfiguration %s: %w", w.Name, m.Name, err)
		}
	}
	return v.Webhooks[0].ClientConfig.CABundle, nil
}

// served returns the certificate chain the webhook server presents, leaf first.
func (c *trustCheck) served(ctx context.Context) ([]*x509.Certificate, error) {
	d := &tls.Dialer{Config: &tls.Config{
		// Verified below against the caBundles, which is what matters; the handshake only fetches it.
		InsecureSkipVerify: true, //nolint:gosec // the chain is verified by trusts
		ServerName:         c.dnsName,
		MinVersion:         tls.VersionTLS12,
	}}
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, fmt.Errorf("the webhook server does not accept TLS connections on %s: %w", c.addr, err)
	}
	defer conn.Close() //nolint:errcheck // only the handshake was wanted
	chain := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(chain) == 0 {
		return nil, fmt.Errorf("the webhook server on %s presents no certificate", c.addr)
	}
	return chain, nil
}

// trusts returns nil when chain verifies against caBundle (PEM) for c.dnsName and server
// authentication, and otherwise an error saying what to do.
func (c *trustCheck) trusts(chain []*x509.Certificate, caBundle []byte) error {
	if len(caBundle) == 0 {
		return fmt.Errorf("its caBundle is empty: the CA is not injected yet (with the self provisioner the operator injects it; with external, cert-manager's CA injector does)")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBundle) {
		return fmt.Errorf("its caBundle holds no PEM certificate")
	}
	inter := x509.NewCertPool()
	for _, ca := range chain[1:] {
		inter.AddCert(ca)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{
		DNSName:       c.dnsName,
		Roots:         roots,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return fmt.Errorf("its caBundle does not trust the certificate the webhook server presents (serial %s, issuer %q): %w",
			chain[0].SerialNumber, chain[0].Issuer.String(), err)
	}
	return nil
}

// newTrustCheck returns the trust check of o (with its defaults set) reading through reader.
func newTrustCheck(reader client.Reader, o Options) *trustCheck {
	host := o.Host
	if host == "" {
		host = "localhost"
	}
	c := &trustCheck{
		reader:     reader,
		addr:       net.JoinHostPort(host, strconv.Itoa(o.Port)),
		validating: o.ValidatingConfiguration,
		mutating:   o.MutatingConfiguration,
	}
	if o.Namespace != "" {
		c.dnsName = fmt.Sprintf("%s.%s.svc", o.ServiceName, o.Namespace)
	}
	return c
}
