package certs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// With spec.tls.issuerRef, the members and the users' clients do not mount the Secrets cert-manager
// writes: an issuer whose CA is replaced would have cert-manager renew each certificate with the new
// CA, and ca.crt with it, while the members still trust only the old one (etcd reads its trusted CA
// files only when it starts): members would refuse each other and the operator until they restart.
// The operator instead keeps a Secret of its own for each certificate (resources.ServerTLSSecretName
// and so on), whose ca.crt is the port's trust bundle:
//   - a certificate renewed by a CA the served one chains to as well is copied at once (no restart);
//   - a certificate of a CA the bundle lacks adds that CA to the bundle, whose change restarts the
//     members one at a time (phase TrustNewCA); once they all trust it and CARotationDwell has passed,
//     the certificate is copied (phase IssueFromNewCA);
//   - once every member serves certificates of the new CA and CARotationDwell has passed again, CAs
//     no certificate chains to leave the bundle, and the members restart once more (phase DropOldCA).

// issuedPort is one port's Secrets of a cluster with spec.tls.issuerRef: cert-manager's (sources) and
// the operator's (mirrors, nil when missing), in the same order; the first mirror holds the port's
// trust bundle and the annotations of a CA change under way.
type issuedPort struct {
	port    int
	sources []*userLeaf
	mirrors []*corev1.Secret
	// trust is the port's trust bundle (PEM).
	trust []byte
	// pending are the indexes of sources whose CA the members may not trust yet; unused are CAs of
	// trust that no certificate of the port chains to any more.
	pending []int
	unused  []*x509.Certificate
	// started is when the CA change under way began (zero when none is), since when its last step was
	// taken.
	started, since time.Time
}

// syncIssued keeps the operator's Secrets of each port of cluster c from the Secrets cert-manager
// wrote (leaves, from checkUser: server and client with client TLS, then peer), as the comment above
// says. ports.MountedClient and MountedPeer tell the ports whose Secrets member pods mount: a port no
// pod uses (yet, and with no CA change under way) takes cert-manager's certificates and CAs as they are.
// It fails with ErrCALost when a Secret the pods mount is gone during a CA change.
func (k *Keeper) syncIssued(ctx context.Context, c *etcdv1beta1.EtcdCluster, leaves []*userLeaf, ports Ports) ([]*issuedPort, []Changed, error) {
	var out []*issuedPort
	var changed []Changed
	if ports.Client {
		out = append(out, &issuedPort{port: resources.ClientPort, sources: leaves[:2]})
		leaves = leaves[2:]
	}
	if ports.Peer {
		out = append(out, &issuedPort{port: resources.PeerPort, sources: leaves[:1]})
	}
	for _, p := range out {
		mounted := ports.MountedClient
		if p.port == resources.PeerPort {
			mounted = ports.MountedPeer
		}
		ch, err := k.syncPort(ctx, c, p, mounted)
		if err != nil {
			return nil, nil, err
		}
		changed = append(changed, ch...)
	}
	return out, changed, nil
}

// mirrorName is the operator's Secret of cert-manager's Secret l.
func mirrorName(c *etcdv1beta1.EtcdCluster, l *userLeaf) string {
	switch l.kind {
	case "server":
		return resources.ServerTLSSecretName(c)
	case "client":
		return resources.ClientTLSSecretName(c)
	}
	return resources.PeerTLSSecretName(c)
}

// syncPort is syncIssued for one port.
func (k *Keeper) syncPort(ctx context.Context, c *etcdv1beta1.EtcdCluster, p *issuedPort, mounted bool) ([]Changed, error) {
	p.mirrors = make([]*corev1.Secret, len(p.sources))
	var issuerCAs []*x509.Certificate
	for i, l := range p.sources {
		s, err := k.get(ctx, c, mirrorName(c, l))
		if err != nil {
			return nil, err
		}
		p.mirrors[i] = s
		issuerCAs = append(issuerCAs, pki.Certs(l.secret.Data[resources.CAKey])...)
	}
	now := k.now()
	holder := p.mirrors[0]
	changing := holder != nil && holder.Annotations[etcdv1beta1.AnnotationCARotationStarted] != ""
	missing := p.missing() >= 0
	// a port no member pod uses takes cert-manager's certificates as they are, unless a CA change is
	// under way (the only member's pod being recreated for it, say) and its Secrets are all there
	reset := !mounted && (!changing || missing)
	if !reset {
		if err := missingMidChange(c, p); err != nil {
			return nil, err
		}
	}
	why := p.loadTrust(c, holder, issuerCAs, reset, now)
	certs, keys, reasons := p.desired(reset)
	p.unused = unusedCAs(p.trust, issuerCAs, certs)
	if (len(p.pending) > 0 || len(p.unused) > 0) && p.started.IsZero() {
		p.started, p.since = now, now
	}
	var changed []Changed
	for i := range p.sources {
		m := p.mirrors[i]
		s, err := k.writeMirror(ctx, c, p, i, certs[i], keys[i])
		if err != nil {
			return nil, err
		}
		p.mirrors[i] = s
		reason := reasons[i]
		if i == 0 && len(why) > 0 {
			reason = strings.Join(append(why, reason), "; ")
		}
		if reason != "" && s != m {
			changed = append(changed, Changed{Secret: s.Name, Reason: strings.TrimSuffix(reason, "; ")})
		}
	}
	return changed, nil
}

// desired returns what each mirror of p is to hold (certificate, key) and why it changes ("" when it
// does not), and notes in p.pending the certificates of a CA the members may not trust yet, which keep
// the mirror's: a certificate renewed by a CA the mirror's chains to as well is copied at once, as is
// every one with reset.
func (p *issuedPort) desired(reset bool) (certs, keys [][]byte, reasons []string) {
	certs, keys, reasons = make([][]byte, len(p.sources)), make([][]byte, len(p.sources)), make([]string, len(p.sources))
	for i, l := range p.sources {
		m := p.mirrors[i]
		certs[i], keys[i] = l.secret.Data[resources.TLSCertKey], l.secret.Data[resources.TLSKeyKey]
		switch {
		case m == nil || reset:
			reasons[i] = "copied from Secret " + l.name + ", which cert-manager wrote"
		case bytes.Equal(m.Data[resources.TLSCertKey], certs[i]):
		case sameRoot(m.Data[resources.TLSCertKey], certs[i], p.trust):
			reasons[i] = "renewed by cert-manager (Secret " + l.name + ")"
		default:
			p.pending = append(p.pending, i) // copied by advanceIssued once the members trust its CA
			certs[i], keys[i] = m.Data[resources.TLSCertKey], m.Data[resources.TLSKeyKey]
		}
	}
	return certs, keys, reasons
}

// missingMidChange returns an ErrCALost error when a Secret of port p that member pods mount is gone
// while cluster c's issuer's CA changes: the members that have not restarted trust only the CAs they
// started with, which the certificate cert-manager holds may not chain to, and what the Secret held is
// lost. Outside a change, a gone Secret is written again from cert-manager's (the members trust the
// issuer's CA).
func missingMidChange(c *etcdv1beta1.EtcdCluster, p *issuedPort) error {
	if c.Status.TLS == nil || c.Status.TLS.CARotation == nil {
		return nil
	}
	if i := p.missing(); i >= 0 {
		return fmt.Errorf("secret %s, which the member pods mount, was deleted during a change of the %s's CA (phase %s) and cannot be written "+
			"again safely: members that have not restarted trust only the CAs they started with: %w. The members keep serving with the files "+
			"they loaded. Put the Secret back if you have a copy; otherwise delete the member pods together (a short loss of quorum): once "+
			"none is left, the Secrets are written from cert-manager's and the members start again on their data trusting the issuer's "+
			"current CA (a cluster on emptyDir would lose its data: restore a backup instead)",
			mirrorName(c, p.sources[i]), issuerOf(c), c.Status.TLS.CARotation.Phase, ErrCALost)
	}
	return nil
}

// missing returns the index of the first of p's mirrors that is gone (or, for the first, holds no
// trust bundle); -1 when none is.
func (p *issuedPort) missing() int {
	for i, m := range p.mirrors {
		if m == nil || (i == 0 && len(pki.Certs(m.Data[resources.CAKey])) == 0) {
			return i
		}
	}
	return -1
}

// loadTrust sets p's trust bundle and the times of the CA change under way from holder, its first
// mirror, and adds to it the CAs of issuerCAs it lacks; with reset (no bundle yet, or no pod uses it)
// the bundle is issuerCAs. It returns why the bundle changed (nil when it did not, or with reset).
func (p *issuedPort) loadTrust(c *etcdv1beta1.EtcdCluster, holder *corev1.Secret, issuerCAs []*x509.Certificate, reset bool, now time.Time) []string {
	if reset || p.missing() == 0 {
		p.trust = pki.Bundle(issuerCAs...)
		return nil
	}
	p.trust = holder.Data[resources.CAKey]
	p.started, _ = time.Parse(time.RFC3339, holder.Annotations[etcdv1beta1.AnnotationCARotationStarted])
	p.since, _ = time.Parse(time.RFC3339, holder.Annotations[etcdv1beta1.AnnotationCARotationPhaseSince])
	var added []*x509.Certificate
	for _, ca := range issuerCAs {
		if !pki.ContainsCert(p.trust, ca) && !slices.ContainsFunc(added, ca.Equal) {
			added = append(added, ca)
		}
	}
	if len(added) == 0 || verdict.RestartLosesData(c) {
		return nil // the certificates of a CA not added wait (pending), until scaling makes the restart safe
	}
	p.trust = pki.Bundle(append(pki.Certs(p.trust), added...)...)
	if p.started.IsZero() {
		p.started = now
	}
	p.since = now
	return []string{fmt.Sprintf("the %s issued certificates of a CA the members do not trust yet (%s): it joins the trust bundle, "+
		"and the members restart one at a time to trust it", issuerOf(c), commonNames(added))}
}

// chainsToAny reports whether certificate cert (PEM) chains to a CA of trust.
func chainsToAny(cert, trust []byte) bool {
	return slices.ContainsFunc(pki.Certs(trust), func(ca *x509.Certificate) bool { return pki.ChainsTo(cert, ca) })
}

// sameRoot reports whether certificates a and b chain to one CA of trust.
func sameRoot(a, b, trust []byte) bool {
	for _, ca := range pki.Certs(trust) {
		if pki.ChainsTo(a, ca) && pki.ChainsTo(b, ca) {
			return true
		}
	}
	return false
}

// unusedCAs are the CAs of trust that no certificate of certs (PEM) chains to and that are not the
// issuer's (issuerCAs): those a CA change drops.
func unusedCAs(trust []byte, issuerCAs []*x509.Certificate, certs [][]byte) []*x509.Certificate {
	var unused []*x509.Certificate
	for _, ca := range pki.Certs(trust) {
		if slices.ContainsFunc(issuerCAs, ca.Equal) {
			continue
		}
		if !slices.ContainsFunc(certs, func(cert []byte) bool { return pki.ChainsTo(cert, ca) }) {
			unused = append(unused, ca)
		}
	}
	return unused
}

// writeMirror makes the i-th mirror of p hold certPEM, keyPEM and p's trust bundle (the first also the
// annotations of the CA change under way) and returns it: the same object when it already did.
func (k *Keeper) writeMirror(ctx context.Context, c *etcdv1beta1.EtcdCluster, p *issuedPort, i int, certPEM, keyPEM []byte) (*corev1.Secret, error) {
	m := p.mirrors[i]
	want := resources.TLSSecret(c, mirrorName(c, p.sources[i]), certPEM, keyPEM, p.trust)
	annotations := map[string]string{}
	if m != nil {
		maps.Copy(annotations, m.Annotations)
	}
	delete(annotations, etcdv1beta1.AnnotationCARotationStarted)
	delete(annotations, etcdv1beta1.AnnotationCARotationPhaseSince)
	if i == 0 && !p.started.IsZero() {
		annotations[etcdv1beta1.AnnotationCARotationStarted] = p.started.UTC().Format(time.RFC3339)
		annotations[etcdv1beta1.AnnotationCARotationPhaseSince] = p.since.UTC().Format(time.RFC3339)
	}
	if m == nil {
		want.Annotations = annotations
		return want, k.create(ctx, want)
	}
	if maps.EqualFunc(m.Data, want.Data, bytes.Equal) && maps.Equal(m.Annotations, annotations) {
		return m, nil
	}
	s := m.DeepCopy()
	s.Data, s.Annotations = want.Data, annotations
	if err := k.Client.Update(ctx, s); err != nil {
		return nil, fmt.Errorf("update secret %s: %w", s.Name, err)
	}
	return s, nil
}

// commonNames lists the CAs' common names, for messages.
func commonNames(cas []*x509.Certificate) string {
	names := make([]string, 0, len(cas))
	for _, ca := range cas {
		names = append(names, strconv.Quote(ca.Subject.CommonName))
	}
	return strings.Join(names, ", ")
}

// issuedTrust returns the short hash of the trust bundles of ports (what status.tls.trustedCAsHash
// says), the CA change under way (a CARotation* phase, "" when none is) and when it began.
func issuedTrust(ports []*issuedPort) (hash string, phase etcdv1beta1.CARotationPhase, started time.Time) {
	var all []byte
	rank := map[etcdv1beta1.CARotationPhase]int{"": 0, etcdv1beta1.CARotationDropOldCA: 1, etcdv1beta1.CARotationIssueFromNewCA: 2, etcdv1beta1.CARotationTrustNewCA: 3}
	for _, p := range ports {
		all = append(all, p.trust...)
		var ph etcdv1beta1.CARotationPhase
		switch {
		case len(p.pending) > 0:
			ph = etcdv1beta1.CARotationTrustNewCA
		case len(p.unused) > 0:
			ph = etcdv1beta1.CARotationIssueFromNewCA
		case !p.started.IsZero():
			ph = etcdv1beta1.CARotationDropOldCA
		}
		if rank[ph] > rank[phase] {
			phase = ph
		}
		if !p.started.IsZero() && (started.IsZero() || p.started.Before(started)) {
			started = p.started
		}
	}
	sum := sha256.Sum256(all)
	return hex.EncodeToString(sum[:5]), phase, started
}

// advanceIssued takes the next step of a change of the issuer's CA on a settled cluster c (every
// member restarted onto the trust bundles of the ports), on every port at once so that the members
// restart once per step: it copies the certificates that waited for the members to trust their CA,
// then drops CAs no certificate needs once every member serves one of the CAs that stay, then ends the
// change; each step CARotationDwell after the one before. members are the IPs of the member pods by
// member name. It returns the change made or what it waits for.
func (k *Keeper) advanceIssued(ctx context.Context, c *etcdv1beta1.EtcdCluster, ports []*issuedPort, members map[string]string) (*Changed, string, error) {
	now := k.now()
	var since time.Time
	var pending, unused, started bool
	for _, p := range ports {
		pending, unused, started = pending || len(p.pending) > 0, unused || len(p.unused) > 0, started || !p.started.IsZero()
		if p.since.After(since) {
			since = p.since
		}
	}
	if !started {
		return nil, "", nil
	}
	for _, p := range ports {
		for _, i := range p.pending {
			if !chainsToAny(p.sources[i].secret.Data[resources.TLSCertKey], p.trust) {
				return nil, fmt.Sprintf("the %s issued certificates of a new CA, which the members would trust only after a restart, and restarting "+
					"the only member of an emptyDir cluster deletes its data: scale to 3 members first (the new members copy the data); "+
					"the members serve their current certificates meanwhile", issuerOf(c)), nil
			}
		}
	}
	if until := since.Add(k.dwell()); (pending || unused) && now.Before(until) {
		who := "clients that mount Secret " + resources.ClientTLSSecretName(c)
		if !c.Spec.ClientTLS() {
			who = "the members"
		}
		return nil, fmt.Sprintf("the change of the %s's CA waits until %s for %s to load it",
			issuerOf(c), until.UTC().Format(time.RFC3339), who), nil
	}
	var why string
	switch {
	case pending:
		why = "every member trusts the new CA of the " + issuerOf(c) + ": its certificates are served now"
	case unused:
		var dropped []*x509.Certificate
		for _, p := range ports {
			keep := p.trust
			for _, ca := range p.unused {
				keep = dropCert(keep, ca)
			}
			if wait := k.servedBy(ctx, p.port, keep, members); wait != "" {
				return nil, wait, nil
			}
			dropped = append(dropped, p.unused...)
			p.trust, p.unused = keep, nil
		}
		why = fmt.Sprintf("every member serves certificates of the %s's current CA: %s leave the trust bundles, and the members "+
			"restart one at a time to trust only it", issuerOf(c), commonNames(dropUnique(dropped)))
	default:
		why = fmt.Sprintf("the change of the %s's CA is over: the members trust %s", issuerOf(c), commonNames(pki.Certs(ports[0].trust)))
	}
	first, err := k.writePorts(ctx, c, ports, pending || unused, now)
	if err != nil {
		return nil, "", err
	}
	return &Changed{Secret: first.Name, Reason: why}, "", nil
}

// writePorts writes the mirrors of the ports with a CA change under way after a step of
// advanceIssued: the certificates that were pending copied in, and the step's time (ongoing) or the
// change ended. It returns the first mirror written.
func (k *Keeper) writePorts(ctx context.Context, c *etcdv1beta1.EtcdCluster, ports []*issuedPort, ongoing bool, now time.Time) (*corev1.Secret, error) {
	var first *corev1.Secret
	for _, p := range ports {
		if p.started.IsZero() {
			continue
		}
		if ongoing {
			p.since = now
		} else {
			p.started = time.Time{}
		}
		for i := range p.mirrors {
			from := p.mirrors[i]
			if slices.Contains(p.pending, i) {
				from = p.sources[i].secret
			}
			s, err := k.writeMirror(ctx, c, p, i, from.Data[resources.TLSCertKey], from.Data[resources.TLSKeyKey])
			if err != nil {
				return nil, err
			}
			p.mirrors[i] = s
		}
		p.pending = nil
		if first == nil {
			first = p.mirrors[0]
		}
	}
	return first, nil
}

// dropUnique returns cas with each CA once.
func dropUnique(cas []*x509.Certificate) []*x509.Certificate {
	var out []*x509.Certificate
	for _, ca := range cas {
		if !slices.ContainsFunc(out, ca.Equal) {
			out = append(out, ca)
		}
	}
	return out
}

// dropCert returns bundle without ca.
func dropCert(bundle []byte, ca *x509.Certificate) []byte {
	return pki.Bundle(slices.DeleteFunc(pki.Certs(bundle), ca.Equal)...)
}

// servedBy returns which member does not yet serve, on port, a certificate that chains to a CA of
// trust, and why a CA change waits for it ("" when every member does).
func (k *Keeper) servedBy(ctx context.Context, port int, trust []byte, members map[string]string) string {
	name, _, err := notServing(ctx, []int{port}, trust, members)
	switch {
	case err != nil:
		return fmt.Sprintf("the CA change waits to read the certificate member %s serves on port %d: %v", name, port, err)
	case name != "":
		return fmt.Sprintf("the CA change waits for member %s to serve its certificate of the issuer's current CA on port %d "+
			"(the kubelet updates mounted Secrets within about a minute)", name, port)
	}
	return ""
}
