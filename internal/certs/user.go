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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// ErrUnusableSecret is wrapped by EnsureFor's error when a Secret of spec.tls.secrets is missing, or
// its certificate cannot serve the cluster (wrong names or usages, not of the CA it must chain to,
// expired, not matching its key).
var ErrUnusableSecret = errors.New("not usable")

// userLeaf is one Secret of spec.tls.secrets that the ports in use need, and what it must be valid for.
type userLeaf struct {
	// kind is the certificate's ("server", "peer" or "client"); field its field of spec.tls.secrets;
	// issued is true when cert-manager writes the Secret (spec.tls.issuerRef).
	kind, field, name string
	issued            bool
	req               pki.Request
	secret            *corev1.Secret
	cert              *x509.Certificate
}

// ensureUser checks the Secrets of cluster c's spec.tls.secrets that ports need, and writes nothing:
// the server and client certificates with client TLS (the client's chains to the CAs the members trust
// on the client port, the server's to the CAs of the client's ca.crt, which the operator dials with),
// the peer certificate with peer TLS. It returns what the certificates are, and keeps the operator's
// client configuration (the client Secret's certificate and ca.crt).
func (k *Keeper) ensureUser(ctx context.Context, c *etcdv1beta1.EtcdCluster, ports Ports) (Result, error) {
	res, leaves, err := k.checkUser(ctx, c, ports)
	if err != nil || !ports.Client {
		return res, err
	}
	return res, k.userOperator(c, leaves[0], leaves[1])
}

// checkUser checks the Secrets of ensureUser, or with spec.tls.issuerRef those cert-manager writes
// (resources.IssuedTLSSecretName), and returns them: server and client first with client TLS, then
// peer with peer TLS.
func (k *Keeper) checkUser(ctx context.Context, c *etcdv1beta1.EtcdCluster, ports Ports) (Result, []*userLeaf, error) {
	serverReq, peerReq, clientReq := k.Options.UserCertRequests(c)
	issued := c.Spec.TLSIssuer()
	name := func(user func(*etcdv1beta1.EtcdCluster) string, suffix string) string {
		if issued {
			return resources.IssuedTLSSecretName(c, suffix)
		}
		return user(c)
	}
	var leaves []*userLeaf
	if ports.Client {
		leaves = append(leaves,
			&userLeaf{kind: "server", field: "server", name: name(resources.ServerTLSSecretName, resources.ServerTLSSecretSuffix), req: serverReq, issued: issued},
			&userLeaf{kind: "client", field: "client", name: name(resources.ClientTLSSecretName, resources.ClientTLSSecretSuffix), req: clientReq, issued: issued})
	}
	if ports.Peer {
		leaves = append(leaves, &userLeaf{kind: "peer", field: "peer", name: name(resources.PeerTLSSecretName, resources.PeerTLSSecretSuffix), req: peerReq, issued: issued})
	}
	res := Result{UserSecrets: true}
	var trusted []byte
	for _, l := range leaves {
		if err := k.readUser(ctx, c, l); err != nil {
			return Result{}, nil, err
		}
		if err := issuedFor(c, l); err != nil {
			return Result{}, nil, err
		}
		roots := l.secret.Data[resources.CAKey]
		if l.kind == "client" && !l.issued {
			roots = leaves[0].secret.Data[resources.CAKey] // the members accept clients of the server Secret's CAs
		} else {
			trusted = append(trusted, roots...)
			if ca := pki.EarliestNotAfter(roots); res.CANotAfter.IsZero() || (!ca.IsZero() && ca.Before(res.CANotAfter)) {
				res.CANotAfter = ca
			}
		}
		cert, err := pki.CheckUsable(l.secret.Data[resources.TLSCertKey], l.secret.Data[resources.TLSKeyKey], roots, l.req, k.now())
		if err != nil {
			return Result{}, nil, unusable(l, err)
		}
		l.cert = cert
		metrics.CertificateNotAfter.WithLabelValues(c.Namespace, c.Name, l.kind).Set(float64(cert.NotAfter.Unix()))
		if res.NotAfter.IsZero() || cert.NotAfter.Before(res.NotAfter) {
			res.NotAfter = cert.NotAfter
		}
	}
	if err := peerIdentity(c, leaves); err != nil {
		return Result{}, nil, err
	}
	sum := sha256.Sum256(trusted)
	res.TrustedCAsHash = hex.EncodeToString(sum[:5])
	if ports.Client {
		res.ClientSecret = resources.ClientTLSSecretName(c)
	}
	return res, leaves, nil
}

// readUser reads the Secret of l into it: any Secret of that name, whoever made it.
func (k *Keeper) readUser(ctx context.Context, c *etcdv1beta1.EtcdCluster, l *userLeaf) error {
	if l.name == "" {
		return fmt.Errorf("spec.tls.secrets.%s is %w: it is empty, but the member pods still use the %s certificate; "+
			"set it back until the switch off of its port has finished (status.tls goes once no port uses TLS)", l.field, ErrUnusableSecret, l.kind)
	}
	s := &corev1.Secret{}
	key := types.NamespacedName{Namespace: c.Namespace, Name: l.name}
	err := k.Client.Get(ctx, key, s)
	if apierrors.IsNotFound(err) && k.APIReader != nil {
		err = k.APIReader.Get(ctx, key, s)
	}
	switch {
	case apierrors.IsNotFound(err) && l.issued:
		return unusable(l, errors.New("it does not exist yet: cert-manager writes it once it has issued the certificate"))
	case apierrors.IsNotFound(err):
		return unusable(l, errors.New("it does not exist: create it (kubernetes.io/tls with tls.crt, tls.key and ca.crt), or have cert-manager write it"))
	case err != nil:
		return fmt.Errorf("read secret %s: %w", l.name, err)
	}
	l.secret = s
	return nil
}

// peerIdentity checks what identifies a member on the peer port: the peer certificate's common name is
// resources.PeerCommonName (spec.tls.secrets.peerCommonName, or the name the Certificate of
// spec.tls.issuerRef asks for) when that is set; otherwise the peer CA must be no CA of the server
// Secret's ca.crt, whose client certificates would otherwise be accepted as members'.
func peerIdentity(c *etcdv1beta1.EtcdCluster, leaves []*userLeaf) error {
	var server, peer *userLeaf
	for _, l := range leaves {
		switch l.kind {
		case "server":
			server = l
		case "peer":
			peer = l
		}
	}
	if peer == nil {
		return nil
	}
	if cn := resources.PeerCommonName(c); cn != "" {
		if peer.cert.Subject.CommonName != cn {
			want := "spec.tls.secrets.peerCommonName"
			if peer.issued {
				want = "the common name its Certificate asks for"
			}
			return unusable(peer, fmt.Errorf("its certificate's common name is %q, not %s %q", peer.cert.Subject.CommonName, want, cn))
		}
		return nil
	}
	if server == nil {
		return nil
	}
	for _, ca := range pki.Certs(peer.secret.Data[resources.CAKey]) {
		if pki.ContainsCert(server.secret.Data[resources.CAKey], ca) {
			return unusable(peer, fmt.Errorf("its ca.crt shares the CA %q with the server Secret %s, so any client certificate of that CA would be "+
				"accepted as a member: set spec.tls.secrets.peerCommonName to the peer certificate's common name, or give the peer port a CA of its own",
				ca.Subject.CommonName, server.name))
		}
	}
	return nil
}

func unusable(l *userLeaf, err error) error {
	if l.issued {
		return &unusableSecret{l.name, fmt.Errorf("secret %s (of Certificate %s, spec.tls.issuerRef) is %w: %w", l.name, l.name, ErrUnusableSecret, err)}
	}
	return &unusableSecret{l.name, fmt.Errorf("secret %s (spec.tls.secrets.%s) is %w: %w", l.name, l.field, ErrUnusableSecret, err)}
}

// unusableSecret is the error of a Secret that is missing or cannot serve the cluster.
type unusableSecret struct {
	name string
	err  error
}

func (e *unusableSecret) Error() string { return e.err.Error() }
func (e *unusableSecret) Unwrap() error { return e.err }

// userOperator keeps the operator's client configuration of cluster c from the client Secret of
// spec.tls.secrets: it presents that certificate, and accepts a member whose certificate chains to the
// Secret's ca.crt and names the client Service, which the server certificate must then do.
func (k *Keeper) userOperator(c *etcdv1beta1.EtcdCluster, server, client *userLeaf) error {
	caPEM, certPEM := client.secret.Data[resources.CAKey], client.secret.Data[resources.TLSCertKey]
	names := k.Options.ClientServiceNames(c)
	svc := names[len(names)-1]
	if _, err := pki.CheckUsable(server.secret.Data[resources.TLSCertKey], server.secret.Data[resources.TLSKeyKey], caPEM,
		pki.Request{DNSNames: []string{svc}, Server: true}, k.now()); err != nil {
		return unusable(client, fmt.Errorf("its ca.crt does not verify the server certificate of Secret %s: %w", server.name, err))
	}
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	k.mu.Lock()
	defer k.mu.Unlock()
	if id, ok := k.operator[key]; ok && id.uid == c.UID && bytes.Equal(id.caPEM, caPEM) && bytes.Equal(id.trust, certPEM) {
		return nil
	}
	pair, err := tls.X509KeyPair(certPEM, client.secret.Data[resources.TLSKeyKey])
	if err != nil {
		return unusable(client, err)
	}
	roots, err := pki.Pool(caPEM)
	if err != nil {
		return unusable(client, err)
	}
	if k.operator == nil {
		k.operator = map[types.NamespacedName]operatorIdentity{}
	}
	k.operator[key] = operatorIdentity{uid: c.UID, caPEM: caPEM, trust: certPEM, config: pki.ClientConfig(pair, roots, svc)}
	return nil
}
