// Package pki issues the X.509 material of an etcd cluster's TLS: a certificate authority per cluster and
// the leaf certificates it signs (members' serving and peer certificates, client certificates), with
// crypto/x509 and ECDSA P-256 keys. Everything is a pure function of its inputs and the time given;
// nothing here reads or writes Kubernetes objects, and no key is ever logged or put in an error.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// Lifetimes of what the operator issues. A leaf is renewed once less than a third of its lifetime is
// left (RenewBefore), as cert-manager does by default; the CA outlives every leaf it signs by years.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 365 * 24 * time.Hour
)

// clockSkew backdates NotBefore so that a certificate is valid at once on a peer whose clock is a little
// behind.
const clockSkew = 5 * time.Minute

// CA is a certificate authority: its certificate (also in PEM) and its private key.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     crypto.Signer
}

// NewCA creates a self-signed CA named commonName, valid from now (minus 5 minutes of clock skew) for
// validity.
func NewCA(commonName string, validity time.Duration, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &CA{Cert: cert, CertPEM: encodeCert(der), key: key}, nil
}

// ParseCA reads a CA from its PEM certificate and PEM private key (PKCS #8, SEC 1 or PKCS #1). It fails
// when the key does not match the certificate or the certificate is not a CA.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("CA certificate: not a CA (basic constraints)")
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, errors.New("CA key does not match the CA certificate")
	}
	return &CA{Cert: cert, CertPEM: encodeCert(cert.Raw), key: key}, nil
}

// KeyPEM returns the CA's private key in PEM (PKCS #8).
func (ca *CA) KeyPEM() ([]byte, error) { return encodeKey(ca.key) }

// Fingerprint is the hex SHA-256 of the CA certificate, which names a CA in labels and caches.
func (ca *CA) Fingerprint() string {
	sum := sha256.Sum256(ca.Cert.Raw)
	return hex.EncodeToString(sum[:])
}

// Request is what a leaf certificate says and may be used for.
type Request struct {
	// CommonName is the subject's common name; with etcd authentication on, etcd takes it as the user
	// name of a client certificate.
	CommonName string
	// DNSNames and IPs are the subject alternative names ("*.peer.ns.svc" wildcards allowed).
	DNSNames []string
	IPs      []net.IP
	// Server and Client allow TLS server and client authentication (extended key usages).
	Server, Client bool
	// Validity is how long the certificate is valid from its issue (LeafValidity when zero).
	Validity time.Duration
}

// Issue signs a new leaf certificate for req with a new key, valid from now (minus 5 minutes of clock
// skew), and returns both in PEM.
func (ca *CA) Issue(req Request, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key for %q: %w", req.CommonName, err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	validity := req.Validity
	if validity <= 0 {
		validity = LeafValidity
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter // a leaf never outlives its CA
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.CommonName},
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPs,
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           req.extKeyUsage(),
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate for %q: %w", req.CommonName, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

func (req Request) extKeyUsage() []x509.ExtKeyUsage {
	var u []x509.ExtKeyUsage
	if req.Server {
		u = append(u, x509.ExtKeyUsageServerAuth)
	}
	if req.Client {
		u = append(u, x509.ExtKeyUsageClientAuth)
	}
	return u
}

// CheckIssued returns the certificate of certPEM when it and keyPEM are a pair that ca issued for
// exactly req's names and usages, whatever the time; otherwise why it must be issued again. Its answer
// depends on its arguments only.
func (ca *CA) CheckIssued(certPEM, keyPEM []byte, req Request) (*x509.Certificate, error) {
	cert, err := ParseCert(certPEM)
	if err != nil {
		return nil, err
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, errors.New("the key does not match the certificate")
	}
	if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
		return nil, errors.New("not issued by the current CA")
	}
	if cert.Subject.CommonName != req.CommonName || !slices.Equal(cert.DNSNames, req.DNSNames) ||
		!slices.EqualFunc(cert.IPAddresses, req.IPs, net.IP.Equal) || !slices.Equal(cert.ExtKeyUsage, req.extKeyUsage()) {
		return nil, errors.New("its names or usages differ from what the cluster needs")
	}
	return cert, nil
}

// CheckRenewal returns nil while cert has more than a third of its lifetime left at now (RenewAt),
// otherwise "due for renewal since …". A certificate CheckIssued accepts and CheckRenewal passes need
// not be issued again.
func CheckRenewal(cert *x509.Certificate, now time.Time) error {
	if renew := RenewAt(cert); !now.Before(renew) {
		return fmt.Errorf("due for renewal since %s (expires %s)", renew.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// IssuedAt is when a certificate was issued: its NotBefore plus the clock skew it was backdated by.
func IssuedAt(cert *x509.Certificate) time.Time { return cert.NotBefore.Add(clockSkew) }

// RenewAt is when a certificate is renewed: once two thirds of its lifetime have passed.
func RenewAt(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotAfter.Add(-life / 3)
}

// ParseCert reads the first certificate of a PEM block list.
func ParseCert(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	return cert, nil
}

// parseKey reads a PEM private key. Its errors never quote the key.
func parseKey(keyPEM []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM private key")
	}
	var (
		k   any
		err error
	)
	switch block.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("unsupported PEM private key type %q", block.Type)
	}
	if err != nil {
		return nil, errors.New("the private key cannot be parsed")
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("the private key cannot sign")
	}
	return signer, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ae, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ae.Equal(b)
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, errors.New("marshal private key")
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

// Pool returns a certificate pool of every certificate in the PEM bundle; it fails when there is none.
func Pool(bundlePEM []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundlePEM) {
		return nil, errors.New("no PEM certificate in the CA bundle")
	}
	return pool, nil
}

// ContainsCert reports whether bundlePEM holds cert.
func ContainsCert(bundlePEM []byte, cert *x509.Certificate) bool {
	rest := bundlePEM
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return false
		}
		if block.Type == "CERTIFICATE" && bytes.Equal(block.Bytes, cert.Raw) {
			return true
		}
	}
}

// ClientConfig returns the TLS configuration the operator dials a cluster's members with: it presents
// cert and accepts a member only when VerifyServer(roots, name) does. It resumes TLS sessions (RFC
// 8446 section 2.2) from a cache of its own, which holds up to SessionCacheSize, one per server name
// (gRPC sets the host dialled, a member pod's IP): a pass opens several connections to each member,
// and a resumed handshake skips both sides' certificate signatures and chain checks, most of the CPU
// a full one costs the operator and the member. A session is resumed only by the configuration that
// made it, so only with the roots it was checked against, and VerifyConnection checks the member's
// chain on resumed sessions too.
func ClientConfig(cert tls.Certificate, roots *x509.CertPool, name string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		// The operator dials members by pod IP, and gRPC checks the name dialled, which no certificate
		// carries. VerifyConnection checks instead that the member's certificate chains to roots and
		// names the client Service, as every member's does.
		InsecureSkipVerify: true, //nolint:gosec // verified by VerifyConnection
		VerifyConnection:   VerifyServer(roots, name),
		ClientSessionCache: tls.NewLRUClientSessionCache(SessionCacheSize),
	}
}

// SessionCacheSize is how many TLS sessions a ClientConfig keeps: more than a cluster has members.
const SessionCacheSize = 16

// VerifyServer returns a tls.Config.VerifyConnection function that accepts a server only when its
// certificate chains to roots and is valid for name, whatever address was dialled: with it, a client
// that dials members by IP (which no certificate names) still checks that it reached a member of the
// right cluster. It remembers the chains it accepted until the first of their certificates expires
// (up to verifiedChains of them), so that a member's chain, presented again on every connection, is
// checked once.
func VerifyServer(roots *x509.CertPool, name string) func(tls.ConnectionState) error {
	var mu sync.Mutex
	accepted := map[[sha256.Size]byte]time.Time{} // hash of the presented chain → when it expires
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the server presented no certificate")
		}
		raws := make([][]byte, len(cs.PeerCertificates))
		for i, c := range cs.PeerCertificates {
			raws[i] = c.Raw
		}
		key := Digest(raws...)
		now := time.Now()
		mu.Lock()
		expires, ok := accepted[key]
		mu.Unlock()
		if ok && now.Before(expires) {
			return nil
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		chains, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: name,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, CurrentTime: now})
		if err != nil {
			return err
		}
		expires = chains[0][0].NotAfter
		for _, c := range chains[0][1:] {
			if c.NotAfter.Before(expires) {
				expires = c.NotAfter
			}
		}
		mu.Lock()
		if len(accepted) >= verifiedChains {
			clear(accepted)
		}
		accepted[key] = expires
		mu.Unlock()
		return nil
	}
}

// Digest returns the SHA-256 of parts, each preceded by its length, so that no two lists of parts
// share a digest by splitting the same bytes differently: a key for remembering a check of them.
func Digest(parts ...[]byte) [sha256.Size]byte {
	h := sha256.New()
	for _, b := range parts {
		_, _ = fmt.Fprintf(h, "%d:", len(b))
		_, _ = h.Write(b)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// verifiedChains bounds what a VerifyServer function remembers: a cluster's members present one chain
// each, a few more while certificates are renewed.
const verifiedChains = 32

// CheckUsable returns nil when certPEM (a leaf, then any intermediates) and keyPEM are a pair that
// chains to a CA of rootsPEM, valid at now for every name of names (a wildcard name is checked with
// one host it covers) and for the usages of req (Server, Client); otherwise what is wrong with it,
// saying what to fix. It checks a certificate someone else issued (spec.tls.secrets), which the
// operator does not renew: a certificate valid now is usable, however little life it has left.
func CheckUsable(certPEM, keyPEM, rootsPEM []byte, req Request, now time.Time) (*x509.Certificate, error) {
	chain, err := parseChain(certPEM)
	if err != nil {
		return nil, fmt.Errorf("tls.crt: %w", err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls.key: %w", err)
	}
	leaf := chain[0]
	if !publicKeysEqual(leaf.PublicKey, key.Public()) {
		return nil, errors.New("tls.key is not the key of tls.crt")
	}
	roots, err := Pool(rootsPEM)
	if err != nil {
		return nil, fmt.Errorf("ca.crt: %w", err)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	for _, usage := range req.extKeyUsage() {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			return nil, fmt.Errorf("tls.crt is not valid for %s with the CAs of ca.crt at %s: %w", usageName(usage), now.UTC().Format(time.RFC3339), err)
		}
	}
	for _, name := range req.DNSNames {
		host := strings.Replace(name, "*", "member", 1)
		if !strings.HasPrefix(name, "*") {
			host = name
		}
		if err := leaf.VerifyHostname(host); err != nil {
			return nil, fmt.Errorf("tls.crt does not name %s (its DNS names: %s)", name, strings.Join(leaf.DNSNames, ", "))
		}
	}
	return leaf, nil
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "server authentication"
	}
	return "client authentication"
}

// parseChain reads every certificate of a PEM block list; the first is the leaf.
func parseChain(certPEM []byte) ([]*x509.Certificate, error) {
	var chain []*x509.Certificate
	for rest := certPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		chain = append(chain, cert)
	}
	if len(chain) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return chain, nil
}

// Certs returns the certificates of a PEM bundle (none when it holds none).
func Certs(bundlePEM []byte) []*x509.Certificate {
	chain, _ := parseChain(bundlePEM)
	return chain
}

// EarliestNotAfter returns when the first certificate of the PEM bundle expires (the zero time when it
// holds none).
func EarliestNotAfter(bundlePEM []byte) time.Time {
	chain, err := parseChain(bundlePEM)
	if err != nil {
		return time.Time{}
	}
	first := chain[0].NotAfter
	for _, c := range chain[1:] {
		if c.NotAfter.Before(first) {
			first = c.NotAfter
		}
	}
	return first
}

// ChainsTo reports whether the certificate of certPEM (a leaf, then any intermediates) is signed by
// root, directly or through those intermediates, whatever its validity period or usages: what tells
// which CA of a trust bundle a certificate needs.
func ChainsTo(certPEM []byte, root *x509.Certificate) bool {
	chain, err := parseChain(certPEM)
	if err != nil {
		return false
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(root)
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	leaf := chain[0]
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: leaf.NotBefore.Add(time.Second),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

// Bundle returns the PEM certificates one after the other, each once.
func Bundle(certs ...*x509.Certificate) []byte {
	var b bytes.Buffer
	seen := map[string]bool{}
	for _, c := range certs {
		if !seen[string(c.Raw)] {
			seen[string(c.Raw)] = true
			b.Write(encodeCert(c.Raw))
		}
	}
	return b.Bytes()
}
