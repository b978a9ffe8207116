package certs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// CARotateBefore is how long before its CA expires the operator rotates it on its own.
const CARotateBefore = 2 * 365 * 24 * time.Hour

// CARotationDwell is how long a CA rotation keeps the users' client Secret as a phase left it before
// the next phase needs what it holds: clients that mount the Secret see a change within the kubelet's
// sync period and cache TTL (about a minute by default), and must trust the new CA before it issues the
// members' certificates, and present their new certificate before the old CA is dropped.
// resources.Options.CARotationDwell overrides it.
const CARotationDwell = 2 * time.Minute

// dwell returns how long each phase of a CA rotation lasts at least: resources.Options.CARotationDwell,
// or CARotationDwell when the options give none.
func (k *Keeper) dwell() time.Duration {
	if k.Options.CARotationDwell > 0 {
		return k.Options.CARotationDwell
	}
	return CARotationDwell
}

// Keys of a CA Secret besides tls.crt and tls.key (the CA that issues the cluster's certificates):
// ca.crt holds the CA certificates the members trust, once the CA has been rotated (before, they trust
// tls.crt alone); next.crt and next.key hold the new CA while the members restart to trust it.
const (
	nextCertKey = "next.crt"
	nextKeyKey  = "next.key"
)

// caState is a cluster's CA Secret read as a CA: the CA that issues the certificates, the CA
// certificates the members trust, and the rotation under way.
type caState struct {
	secret *corev1.Secret
	// ca issues the cluster's certificates.
	ca *pki.CA
	// trust is the PEM bundle of the CA certificates the members trust.
	trust []byte
	// rotated: the Secret has a trust bundle of its own (ca.crt), which the first rotation writes.
	rotated bool
	// next is the new CA while the members restart to trust it (phase TrustNewCA).
	next *pki.CA
	// phase is the rotation's phase (empty when none is under way), started when the rotation began
	// and since when the phase did.
	phase          etcdv1beta1.CARotationPhase
	started, since time.Time
}

// readCAState reads CA Secret s.
func readCAState(s *corev1.Secret) (*caState, error) {
	ca, err := pki.ParseCA(s.Data[resources.TLSCertKey], s.Data[resources.TLSKeyKey])
	if err != nil {
		return nil, err
	}
	st := &caState{secret: s, ca: ca, trust: ca.CertPEM, phase: etcdv1beta1.CARotationPhase(s.Annotations[etcdv1beta1.AnnotationCARotationPhase])}
	if b, ok := s.Data[resources.CAKey]; ok {
		if _, err := pki.Pool(b); err != nil {
			return nil, fmt.Errorf("%s: %w", resources.CAKey, err)
		}
		st.trust, st.rotated = b, true
	}
	if st.phase != "" {
		st.started, _ = time.Parse(time.RFC3339, s.Annotations[etcdv1beta1.AnnotationCARotationStarted])
		st.since, _ = time.Parse(time.RFC3339, s.Annotations[etcdv1beta1.AnnotationCARotationPhaseSince])
	}
	if st.phase == etcdv1beta1.CARotationTrustNewCA {
		if st.next, err = pki.ParseCA(s.Data[nextCertKey], s.Data[nextKeyKey]); err != nil {
			return nil, fmt.Errorf("the new CA (%s) of the rotation under way: %w", nextCertKey, err)
		}
	}
	return st, nil
}

// trustedHash returns a short hash of the CA certificates the members trust, or "" when the CA has
// never been rotated (so that members started before rotations existed keep their pods).
func (st *caState) trustedHash() string {
	if !st.rotated {
		return ""
	}
	sum := sha256.Sum256(st.trust)
	return hex.EncodeToString(sum[:5])
}

// rotationDue returns why cluster c's CA ca must be rotated now ("" when it need not): the
// etcd.etcdkit.dev/rotate-ca annotation asks for CAs issued before a time that has come, or the CA
// expires within CARotateBefore.
func rotationDue(c *etcdv1beta1.EtcdCluster, ca *x509.Certificate, now time.Time) string {
	if v, ok := c.Annotations[etcdv1beta1.AnnotationRotateCA]; ok {
		before, err := time.Parse(time.RFC3339, v)
		if err == nil && !before.After(now) && pki.IssuedAt(ca).Before(before) {
			return fmt.Sprintf("requested by annotation %s=%s", etcdv1beta1.AnnotationRotateCA, v)
		}
	}
	if ca.NotAfter.Sub(now) < CARotateBefore {
		return "the CA expires at " + ca.NotAfter.UTC().Format(time.RFC3339)
	}
	return ""
}

// AdvanceRotation takes the next step of a rotation of cluster c's CA, or starts one when it is due
// (see AnnotationRotateCA and CARotateBefore). res is what Ensure returned in the same pass: a step is
// only taken on the CA Secret Ensure read, so a pass that raced another writer fails with a conflict
// instead of skipping a phase. Call it only on a settled cluster: every member runs a pod of the
// current spec hash (which covers the CA certificates the members trust) and is healthy. members
// are the IPs of the cluster's member pods by member name, whose served certificates are checked
// before the old CA is dropped.
//
// It returns the change it made (nil when none), or, when it waits, what for ("" when it does not). A
// rotation goes (steps 2 and 3 only once the phase before has lasted CARotationDwell):
//  1. start: a new CA is generated and added to the trust bundle; the members' Secrets get the bundle,
//     and their pods, whose spec hash changed, restart one at a time (etcd reads its trusted CA files
//     only when it starts);
//  2. every member trusts both: the new CA becomes the one that issues, and Ensure issues every
//     certificate again (members load new certificates without a restart);
//  3. every member serves certificates of the new CA on its TLS ports: the old CA leaves the trust
//     bundle, and the members restart one at a time again;
//  4. every member trusts only the new CA: the rotation is over.
func (k *Keeper) AdvanceRotation(ctx context.Context, c *etcdv1beta1.EtcdCluster, res Result, members map[string]string) (*Changed, string, error) {
	if res.issued != nil {
		return k.advanceIssued(ctx, c, res.issued, members)
	}
	st := res.ca
	if st == nil {
		return nil, "", nil
	}
	s := st.secret.DeepCopy()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	now := k.now()
	if st.phase == etcdv1beta1.CARotationTrustNewCA || st.phase == etcdv1beta1.CARotationIssueFromNewCA {
		if until := st.since.Add(k.dwell()); now.Before(until) {
			return nil, fmt.Sprintf("CA rotation (%s) waits until %s for clients that mount Secret %s to load it",
				st.phase, until.UTC().Format(time.RFC3339), resources.ClientTLSSecretName(c)), nil
		}
	}
	s.Annotations[etcdv1beta1.AnnotationCARotationPhaseSince] = now.UTC().Format(time.RFC3339)
	why, wait, err := k.nextPhase(ctx, c, st, s, members, now)
	if why == "" || err != nil {
		return nil, wait, err
	}
	if err := k.Client.Update(ctx, s); err != nil {
		return nil, "", fmt.Errorf("update secret %s: %w", s.Name, err)
	}
	return &Changed{Secret: s.Name, Reason: why}, "", nil
}

// nextPhase writes into s, a copy of the CA Secret st was read from, the next phase of the rotation
// st is in, or the start of one that is due; it returns why (empty when nothing changes) or what the
// rotation waits for.
func (k *Keeper) nextPhase(ctx context.Context, c *etcdv1beta1.EtcdCluster, st *caState, s *corev1.Secret,
	members map[string]string, now time.Time) (why, wait string, err error) {
	switch st.phase {
	case "":
		due := rotationDue(c, st.ca.Cert, now)
		if due == "" {
			return "", "", nil
		}
		if verdict.RestartLosesData(c) {
			return "", "CA rotation is due (" + due + ") but restarts every member, and restarting the only member of an emptyDir " +
				"cluster deletes its data: scale to 3 members first (the new members copy the data)", nil
		}
		next, err := pki.NewCA(resources.CACommonName(c), pki.CAValidity, now)
		if err != nil {
			return "", "", err
		}
		keyPEM, err := next.KeyPEM()
		if err != nil {
			return "", "", err
		}
		s.Data[nextCertKey], s.Data[nextKeyKey] = next.CertPEM, keyPEM
		s.Data[resources.CAKey] = bundle(st.ca.CertPEM, next.CertPEM)
		s.Annotations[etcdv1beta1.AnnotationCARotationPhase] = string(etcdv1beta1.CARotationTrustNewCA)
		s.Annotations[etcdv1beta1.AnnotationCARotationStarted] = now.UTC().Format(time.RFC3339)
		return "CA rotation started (" + due + "): the members restart one at a time to trust the old and the new CA", "", nil
	case etcdv1beta1.CARotationTrustNewCA:
		s.Data[resources.TLSCertKey], s.Data[resources.TLSKeyKey] = s.Data[nextCertKey], s.Data[nextKeyKey]
		delete(s.Data, nextCertKey)
		delete(s.Data, nextKeyKey)
		s.Annotations[etcdv1beta1.AnnotationCARotationPhase] = string(etcdv1beta1.CARotationIssueFromNewCA)
		return "CA rotation: every member trusts the new CA, which now issues the cluster's certificates", "", nil
	case etcdv1beta1.CARotationIssueFromNewCA:
		if wait := k.servedByOld(ctx, c, st.ca, members); wait != "" {
			return "", wait, nil
		}
		s.Data[resources.CAKey] = st.ca.CertPEM
		s.Annotations[etcdv1beta1.AnnotationCARotationPhase] = string(etcdv1beta1.CARotationDropOldCA)
		return "CA rotation: every member serves certificates of the new CA; the members restart one at a time to trust only it", "", nil
	case etcdv1beta1.CARotationDropOldCA:
		delete(s.Annotations, etcdv1beta1.AnnotationCARotationPhase)
		delete(s.Annotations, etcdv1beta1.AnnotationCARotationStarted)
		delete(s.Annotations, etcdv1beta1.AnnotationCARotationPhaseSince)
		return "CA rotation finished: every member trusts only the new CA, which expires at " + st.ca.Cert.NotAfter.UTC().Format(time.RFC3339), "", nil
	}
	return "", "", fmt.Errorf("secret %s: unknown %s %q: set it to one of %s, %s or %s", s.Name,
		etcdv1beta1.AnnotationCARotationPhase, st.phase, etcdv1beta1.CARotationTrustNewCA,
		etcdv1beta1.CARotationIssueFromNewCA, etcdv1beta1.CARotationDropOldCA)
}

// bundle returns the PEM certificates one after the other.
func bundle(certs ...[]byte) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		b.Write(bytes.TrimSpace(c))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// servedByOld returns which member still serves, on a TLS port of cluster c, a certificate that ca did
// not issue, and why the rotation waits for it ("" when every member serves ca's).
func (k *Keeper) servedByOld(ctx context.Context, c *etcdv1beta1.EtcdCluster, ca *pki.CA, members map[string]string) string {
	var ports []int
	if c.Spec.ClientTLS() {
		ports = append(ports, resources.ClientPort)
	}
	if c.Spec.PeerTLS() {
		ports = append(ports, resources.PeerPort)
	}
	name, port, err := notServing(ctx, ports, ca.CertPEM, members)
	switch {
	case err != nil:
		return fmt.Sprintf("CA rotation waits to read the certificate member %s serves on port %d: %v", name, port, err)
	case name != "":
		return fmt.Sprintf("CA rotation waits for member %s to serve its certificate of the new CA on port %d "+
			"(the kubelet updates mounted Secrets within about a minute)", name, port)
	}
	return ""
}

// notServing returns the first member (by name; members are their pods' IPs) and port of ports on
// which the member does not serve a certificate that chains to a CA of trust (PEM), with the error
// when its certificate could not be read; "" when every member serves one on every port.
func notServing(ctx context.Context, ports []int, trust []byte, members map[string]string) (name string, port int, err error) {
	for _, name := range slices.Sorted(maps.Keys(members)) {
		for _, port := range ports {
			chain, err := ServedChain(ctx, net.JoinHostPort(members[name], strconv.Itoa(port)))
			if err != nil {
				return name, port, err
			}
			if !chainsToAny(pki.Bundle(chain...), trust) {
				return name, port, nil
			}
		}
	}
	return "", 0, nil
}

// ServedCertificate returns the certificate the TLS server at addr (host:port) presents, without
// verifying it and whether or not the server then accepts this client, which presents no certificate.
// It gives up after 3 seconds.
func ServedCertificate(ctx context.Context, addr string) (*x509.Certificate, error) {
	chain, err := ServedChain(ctx, addr)
	if err != nil {
		return nil, err
	}
	return chain[0], nil
}

// ServedChain is ServedCertificate with the intermediates the server presents after its certificate.
func ServedChain(ctx context.Context, addr string) ([]*x509.Certificate, error) {
	var served []*x509.Certificate
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 3 * time.Second}, Config: &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, //nolint:gosec // the certificate is read, not trusted
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			for _, r := range raw {
				if cert, err := x509.ParseCertificate(r); err == nil {
					served = append(served, cert)
				}
			}
			return nil
		},
	}}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if conn != nil {
		_ = conn.Close()
	}
	if len(served) > 0 {
		return served, nil // a server that wants a client certificate may refuse the handshake after
	}
	if err == nil {
		err = errors.New("no certificate presented")
	}
	return nil, err
}
