// Package certs keeps the TLS material of each etcd cluster current in Kubernetes Secrets: the cluster's
// certificate authority ("<cluster>-ca"), the members' serving and peer certificates and the client
// certificate issued for users, each issued by package pki and renewed before it expires. It also holds,
// in memory only, the client certificate the operator presents to the members of each cluster.
//
// Keys are written to Secrets and nowhere else: no error, log line, event or status field here ever
// holds one.
package certs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/ownedcache"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// ErrForeignSecret is wrapped by Ensure's error when a Secret of a name the cluster needs exists and is
// not the cluster's.
var ErrForeignSecret = errors.New("not this cluster's")

// ErrCALost is wrapped by Ensure's error when the CA Secret is gone while certificates it issued are
// still in use, or holds a CA the members do not trust (a stale copy put back after a rotation):
// certificates of a new or stale CA would lock the members out of each other.
var ErrCALost = errors.New("the cluster's CA is gone")

// Blocked reports whether err (from Ensure) needs a person: a foreign Secret, or a lost CA. It returns
// the condition reason that says which.
func Blocked(err error) (reason string, blocked bool) {
	switch {
	case errors.Is(err, ErrForeignSecret):
		return etcdv1beta1.ReasonForeignObject, true
	case errors.Is(err, ErrCALost):
		return etcdv1beta1.ReasonCALost, true
	case errors.Is(err, ErrCertificateNotReady):
		return etcdv1beta1.ReasonCertificateNotReady, true
	case errors.Is(err, ErrUnusableSecret):
		return etcdv1beta1.ReasonTLSSecretUnusable, true
	}
	return "", false
}

// Keeper keeps the TLS Secrets of clusters current (Ensure) and the operator's own client certificate
// of each cluster (ClientTLS). It is safe for concurrent use.
type Keeper struct {
	// Client reads and writes the Secrets: the operator's own through the cache (ownedcache.OwnedOnly
	// reads; ownedcache.Client tells a Secret the cache does not hold yet from one that is missing).
	Client client.Client
	// APIReader, when set, reads a Secret the user names (spec.tls.secrets) that Client's cache does not
	// hold because it lacks the operator's labels.
	APIReader client.Reader
	// Options name the members and the client Service the certificates are for.
	Options resources.Options
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu sync.Mutex
	// operator is the operator's client configuration of each cluster, by namespace/name.
	operator map[types.NamespacedName]operatorIdentity
	// issued holds the certificates pki.CA.CheckIssued accepted, by the hash of what it was asked
	// (checkIssued): every pass checks each leaf Secret of its cluster, and the signature check was
	// most of the CPU a pass spent on certificates.
	issued map[[sha256.Size]byte]*x509.Certificate
}

// issuedChecks bounds Keeper.issued: three leaf Secrets per cluster, a few hundred clusters.
const issuedChecks = 1024

// checkIssued is ca.CheckIssued(certPEM, keyPEM, req), remembered when it accepts.
func (k *Keeper) checkIssued(ca *pki.CA, certPEM, keyPEM []byte, req pki.Request) (*x509.Certificate, error) {
	key := pki.Digest(ca.Cert.Raw, certPEM, keyPEM, []byte(fmt.Sprintf("%#v", req)))
	k.mu.Lock()
	cert, ok := k.issued[key]
	k.mu.Unlock()
	if ok {
		return cert, nil
	}
	cert, err := ca.CheckIssued(certPEM, keyPEM, req)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.issued == nil || len(k.issued) >= issuedChecks {
		k.issued = map[[sha256.Size]byte]*x509.Certificate{}
	}
	k.issued[key] = cert
	return cert, nil
}

// operatorIdentity is the operator's client certificate for one cluster and what it was issued from.
type operatorIdentity struct {
	uid     types.UID
	caPEM   []byte
	trust   []byte
	renewAt time.Time
	config  *tls.Config
}

// Changed is one Secret Ensure created or issued again, and why, for the cluster's events.
type Changed struct {
	Secret string
	Reason string
}

// Result is what Ensure changed and what the cluster's certificates now are (the zero Result for a
// cluster without TLS).
type Result struct {
	Changed []Changed
	// ClientSecret names the users' client certificate Secret; empty without client TLS.
	ClientSecret string
	// CANotAfter is when the CA expires; NotAfter when the first leaf expires, RenewAt when the first
	// leaf is renewed.
	CANotAfter, NotAfter, RenewAt time.Time
	// TrustedCAsHash is a short hash of the CA certificates the members trust, once the CA has been
	// rotated (empty before); Rotation is the phase of the CA rotation under way (empty when none is)
	// and RotationStarted when it began.
	TrustedCAsHash  string
	Rotation        etcdv1beta1.CARotationPhase
	RotationStarted time.Time
	// UserSecrets is true when the certificates are the Secrets of spec.tls.secrets, which the user
	// renews (then TrustedCAsHash hashes their ca.crt, and RenewAt is zero).
	UserSecrets bool
	// Issuer names the cert-manager issuer of spec.tls.issuerRef ("Issuer ca"), which renews the
	// certificates; empty without it (UserSecrets is true with it too).
	Issuer string

	// ca is the CA Secret as Ensure read it, which AdvanceRotation updates (only if unchanged since).
	ca *caState
	// issued are the ports' Secrets with spec.tls.issuerRef, as Ensure left them.
	issued []*issuedPort
}

// Observation is what the status says of the certificates of res, observed at: nil when there are none
// (a cluster without TLS, or a pass that could not read the CA).
func (res Result) Observation(at time.Time) *verdict.TLSObservation {
	if res.CANotAfter.IsZero() {
		return nil
	}
	return &verdict.TLSObservation{At: at, ClientSecret: res.ClientSecret, CANotAfter: res.CANotAfter, NotAfter: res.NotAfter,
		RenewAt: res.RenewAt, TrustedCAsHash: res.TrustedCAsHash, Rotation: res.Rotation, RotationStarted: res.RotationStarted,
		UserSecrets: res.UserSecrets, Issuer: res.Issuer}
}

func (k *Keeper) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// Ensure makes cluster c's TLS Secrets what its spec needs (EnsureFor the ports its spec.tls enables).
func (k *Keeper) Ensure(ctx context.Context, c *etcdv1beta1.EtcdCluster) (Result, error) {
	return k.EnsureFor(ctx, c, Ports{Client: c.Spec.ClientTLS(), Peer: c.Spec.PeerTLS()})
}

// Ports says which ports of a cluster's members serve or are to serve TLS: the spec's, and while TLS is
// being switched off for a running cluster, also those its member pods still serve TLS on.
type Ports struct {
	Client, Peer bool
	// Unnamed is a Secret of certificates that a member pod mounts but spec.tls no longer names (its
	// spec.tls.secrets were removed before a switch off finished); empty when there is none.
	Unnamed string
	// MountedClient and MountedPeer say whether a member pod carries the certificate of the client or
	// the peer port.
	MountedClient, MountedPeer bool
}

// PortsOf returns the ports cluster c's spec enables TLS on, and those any of pods (its member pods)
// serves TLS on or carries the certificate of.
func PortsOf(c *etcdv1beta1.EtcdCluster, pods []corev1.Pod) Ports {
	p := Ports{Client: c.Spec.ClientTLS(), Peer: c.Spec.PeerTLS()}
	named := map[string]bool{resources.ServerTLSSecretName(c): true, resources.PeerTLSSecretName(c): true}
	for i := range pods {
		t := resources.PodTLSOf(&pods[i])
		p.MountedClient, p.MountedPeer = p.MountedClient || t.ClientHTTPS, p.MountedPeer || t.PeerCertificates
		p.Client, p.Peer = p.Client || t.ClientHTTPS, p.Peer || t.PeerCertificates
		for _, v := range pods[i].Spec.Volumes {
			if v.Secret != nil && (v.Name == "server-tls" || v.Name == "peer-tls") && !named[v.Secret.SecretName] && !c.Spec.UserTLSSecrets() {
				p.Unnamed = v.Secret.SecretName
			}
		}
	}
	return p
}

// EnsureFor makes cluster c's TLS Secrets what ports need: the CA, then, with client TLS, the serving
// certificate of the client port and the client certificate for users, and with peer TLS, the peer
// certificate. A missing Secret is created; a certificate that is not the current CA's, no longer has
// the names or usages the cluster needs, does not match its key or has less than a third of its life
// left is issued again. It returns what it changed. It fails without writing anything when a Secret of
// that name exists but is not c's, or when the CA Secret cannot be read as a CA: then the error says
// which Secret to fix. A cluster without TLS on any port gets nothing (and Secrets it had are left
// alone). It sets the certificate expiry metric of each Secret.
func (k *Keeper) EnsureFor(ctx context.Context, c *etcdv1beta1.EtcdCluster, ports Ports) (Result, error) {
	if !ports.Client && !ports.Peer {
		k.Forget(c.Namespace, c.Name)
		return Result{}, nil
	}
	if c.Spec.UserTLSSecrets() {
		return k.ensureUser(ctx, c, ports)
	}
	if ports.Unnamed != "" {
		return Result{}, fmt.Errorf("member pods mount Secret %s, which spec.tls no longer names, and the operator's CA would not be trusted by them: %w; "+
			"set spec.tls.secrets or spec.tls.issuerRef back as they were until the switch off has finished (status.tls goes when it has)", ports.Unnamed, ErrUnusableSecret)
	}
	if c.Spec.TLSIssuer() {
		return k.ensureIssued(ctx, c, ports)
	}
	st, changed, err := k.ensureCA(ctx, c)
	if err != nil {
		return Result{}, err
	}
	ca := st.ca
	res := Result{Changed: changed, CANotAfter: ca.Cert.NotAfter, TrustedCAsHash: st.trustedHash(),
		Rotation: st.phase, RotationStarted: st.started, ca: st}
	metrics.CertificateNotAfter.WithLabelValues(c.Namespace, c.Name, "ca").Set(float64(ca.Cert.NotAfter.Unix()))
	type leaf struct {
		kind, name string
		req        pki.Request
	}
	var leaves []leaf
	if ports.Client {
		res.ClientSecret = resources.ClientTLSSecretName(c)
		leaves = append(leaves,
			leaf{"server", resources.ServerTLSSecretName(c), k.Options.ServerCertRequest(c)},
			leaf{"client", resources.ClientTLSSecretName(c), resources.ClientCertRequest()})
	}
	if ports.Peer {
		leaves = append(leaves, leaf{"peer", resources.PeerTLSSecretName(c), k.Options.PeerCertRequest(c)})
	}
	for _, l := range leaves {
		ch, cert, err := k.ensureLeaf(ctx, c, st, l.name, l.req)
		if err != nil {
			return res, err
		}
		if ch != nil {
			res.Changed = append(res.Changed, *ch)
		}
		metrics.CertificateNotAfter.WithLabelValues(c.Namespace, c.Name, l.kind).Set(float64(cert.NotAfter.Unix()))
		if res.NotAfter.IsZero() || cert.NotAfter.Before(res.NotAfter) {
			res.NotAfter = cert.NotAfter
		}
		if renew := pki.RenewAt(cert); res.RenewAt.IsZero() || renew.Before(res.RenewAt) {
			res.RenewAt = renew
		}
	}
	if ports.Client {
		if err := k.refreshOperator(c, st); err != nil {
			return res, err
		}
	}
	return res, nil
}

// ensureCA reads cluster c's CA from its Secret, or creates both.
func (k *Keeper) ensureCA(ctx context.Context, c *etcdv1beta1.EtcdCluster) (*caState, []Changed, error) {
	name := resources.CASecretName(c)
	s, err := k.get(ctx, c, name)
	if err != nil {
		return nil, nil, err
	}
	if s != nil {
		st, err := readCAState(s)
		if err != nil {
			return nil, nil, fmt.Errorf("secret %s does not hold this cluster's CA (%w): restore it from a backup of the Secret; "+
				"the members trust only that CA, so the operator does not issue another while their certificates exist", name, err)
		}
		return st, nil, nil
	}
	// A CA issued now is trusted by no running member (etcd reads its trusted CA files once, at start):
	// with certificates of the old one still around, it would be an outage.
	for _, leaf := range []string{resources.ServerTLSSecretName(c), resources.PeerTLSSecretName(c), resources.ClientTLSSecretName(c)} {
		if s, err := k.get(ctx, c, leaf); err != nil {
			return nil, nil, err
		} else if s != nil {
			return nil, nil, fmt.Errorf("secret %s is gone but %s, which it issued, is not: %w; restore the CA Secret from "+
				"a copy (the members trust only that CA until they restart); without one, restore a backup into a new cluster",
				name, leaf, ErrCALost)
		}
	}
	ca, err := pki.NewCA(resources.CACommonName(c), pki.CAValidity, k.now())
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		return nil, nil, err
	}
	s = resources.TLSSecret(c, name, ca.CertPEM, keyPEM, nil)
	if err := k.create(ctx, s); err != nil {
		return nil, nil, err
	}
	return &caState{secret: s, ca: ca, trust: ca.CertPEM}, []Changed{{Secret: name, Reason: "created the cluster's certificate authority"}}, nil
}

// ensureLeaf keeps Secret name a certificate of the issuing CA of st for req, with the CA certificates
// the members trust as its ca.crt, and returns what it changed and the certificate the Secret holds then.
func (k *Keeper) ensureLeaf(ctx context.Context, c *etcdv1beta1.EtcdCluster, st *caState, name string, req pki.Request) (*Changed, *x509.Certificate, error) {
	ca := st.ca
	s, err := k.get(ctx, c, name)
	if err != nil {
		return nil, nil, err
	}
	why := "created"
	if s != nil && !pki.ContainsCert(s.Data[resources.CAKey], ca.Cert) {
		// members trust what this Secret's ca.crt says: certificates of a CA outside it (a stale copy of
		// the CA Secret put back after a rotation) would split the members, who reload certificates per
		// connection
		return nil, nil, fmt.Errorf("secret %s holds a CA that the members do not trust (it is not in the ca.crt of %s): %w; "+
			"put back the CA Secret's latest copy (after a CA rotation, the copy taken before it is stale)",
			resources.CASecretName(c), name, ErrCALost)
	}
	if s != nil {
		switch {
		case !bytes.Equal(s.Data[resources.CAKey], st.trust):
			why = "issued again: its CA bundle is not the CA certificates the members trust"
		default:
			cert, problem := k.checkIssued(ca, s.Data[resources.TLSCertKey], s.Data[resources.TLSKeyKey], req)
			if problem == nil {
				problem = pki.CheckRenewal(cert, k.now())
			}
			if problem == nil {
				problem = renewalRequested(c, s.Data[resources.TLSCertKey], k.now())
			}
			if problem == nil {
				return nil, cert, nil
			}
			why = "issued again: " + problem.Error()
		}
	}
	certPEM, keyPEM, err := ca.Issue(req, k.now())
	if err != nil {
		return nil, nil, err
	}
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		return nil, nil, err
	}
	want := resources.TLSSecret(c, name, certPEM, keyPEM, st.trust)
	if s == nil {
		err = k.create(ctx, want)
	} else {
		s.Data = want.Data
		if err = k.Client.Update(ctx, s); err != nil {
			err = fmt.Errorf("update secret %s: %w", name, err)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	return &Changed{Secret: name, Reason: why}, cert, nil
}

// create creates Secret s; one of that name that get did not find (no APIReader) is not the cluster's.
func (k *Keeper) create(ctx context.Context, s *corev1.Secret) error {
	err := k.Client.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("secret %s exists and is %w: "+
			"rename or delete it, or give the cluster another name; the operator creates its own", s.Name, ErrForeignSecret)
	}
	if err != nil {
		return fmt.Errorf("create secret %s: %w", s.Name, err)
	}
	return nil
}

// renewalRequested returns why certificate certPEM must be issued again when cluster c's
// etcd.etcdkit.dev/renew-certificates annotation asks for certificates issued before a later time. A
// time after now asks nothing yet: every certificate issued now would be before it again.
func renewalRequested(c *etcdv1beta1.EtcdCluster, certPEM []byte, now time.Time) error {
	v, ok := c.Annotations[etcdv1beta1.AnnotationRenewCertificates]
	if !ok {
		return nil
	}
	before, err := time.Parse(time.RFC3339, v)
	if err != nil || before.After(now) {
		return nil // not a time (the annotation's format is documented), or not yet
	}
	cert, err := pki.ParseCert(certPEM)
	if err != nil || pki.IssuedAt(cert).Before(before) {
		return fmt.Errorf("renewal requested by annotation %s=%s", etcdv1beta1.AnnotationRenewCertificates, v)
	}
	return nil
}

// get reads Secret name of cluster c: nil when there is none, an error when it exists but is not c's.
func (k *Keeper) get(ctx context.Context, c *etcdv1beta1.EtcdCluster, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	key := types.NamespacedName{Namespace: c.Namespace, Name: name}
	// the operator's own Secret, or one about to be created: a Secret of that name that is not
	// labelled as the operator's is found out by create (AlreadyExists) and read uncached next pass
	err := k.Client.Get(ctx, key, s, ownedcache.OwnedOnly)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read secret %s: %w", name, err)
	}
	if ref := metav1.GetControllerOf(s); ref == nil || ref.UID != c.UID {
		return nil, fmt.Errorf("secret %s exists and is %w (no owner reference to it): "+
			"rename or delete it, or give the cluster another name; the operator creates its own", name, ErrForeignSecret)
	}
	return s, nil
}

// refreshOperator issues the operator's client certificate for cluster c when it has none from the
// issuing CA of st or it is due for renewal, and keeps the configuration it dials c's members with: it
// trusts the CA certificates the members trust.
func (k *Keeper) refreshOperator(c *etcdv1beta1.EtcdCluster, st *caState) error {
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	ca := st.ca
	k.mu.Lock()
	defer k.mu.Unlock()
	if id, ok := k.operator[key]; ok && id.uid == c.UID && bytes.Equal(id.caPEM, ca.CertPEM) && bytes.Equal(id.trust, st.trust) &&
		k.now().Before(id.renewAt) {
		return nil
	}
	certPEM, keyPEM, err := ca.Issue(resources.OperatorCertRequest(), k.now())
	if err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("the operator's client certificate: %w", err)
	}
	roots, err := pki.Pool(st.trust)
	if err != nil {
		return err
	}
	names := k.Options.ClientServiceNames(c)
	cfg := pki.ClientConfig(pair, roots, names[len(names)-1])
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		return err
	}
	if k.operator == nil {
		k.operator = map[types.NamespacedName]operatorIdentity{}
	}
	k.operator[key] = operatorIdentity{uid: c.UID, caPEM: ca.CertPEM, trust: st.trust, renewAt: pki.RenewAt(cert), config: cfg}
	return nil
}

// ClientTLS returns the configuration the operator dials the client port of cluster namespace/name with,
// once Ensure has run for it: nil when it has not (or the cluster has no client TLS).
func (k *Keeper) ClientTLS(namespace, name string) *tls.Config {
	k.mu.Lock()
	defer k.mu.Unlock()
	if id, ok := k.operator[types.NamespacedName{Namespace: namespace, Name: name}]; ok {
		return id.config
	}
	return nil
}

// Forget drops what the keeper holds for cluster namespace/name (its client certificate, its
// certificates' metrics), once it is deleted or has no TLS.
func (k *Keeper) Forget(namespace, name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.operator, types.NamespacedName{Namespace: namespace, Name: name})
	for _, kind := range []string{"ca", "server", "peer", "client"} {
		metrics.CertificateNotAfter.DeleteLabelValues(namespace, name, kind)
	}
}
