package resources

import (
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/pki"
)

// The Secrets of a cluster's TLS, all of type kubernetes.io/tls with keys tls.crt, tls.key and (but the
// CA's) ca.crt, the CA bundle to trust. The CA's key never leaves its Secret, which no pod mounts.
const (
	// CASecretSuffix names the CA: "<cluster>-ca".
	CASecretSuffix = "-ca"
	// ServerTLSSecretSuffix names the members' serving certificate of the client port.
	ServerTLSSecretSuffix = "-server-tls"
	// PeerTLSSecretSuffix names the members' peer certificate (server and client of port 2380).
	PeerTLSSecretSuffix = "-peer-tls"
	// ClientTLSSecretSuffix names the client certificate issued for users and backup Jobs.
	ClientTLSSecretSuffix = "-client-tls"
	// IssuedSecretInfix comes before the suffixes above in the names of the Secrets cert-manager writes
	// with spec.tls.issuerRef ("<cluster>-cm-server-tls", IssuedTLSSecretName), which the operator
	// copies into the Secrets of the suffixes alone once the members trust their CA.
	IssuedSecretInfix = "-cm"
)

// Keys of a TLS Secret.
const (
	TLSCertKey = corev1.TLSCertKey       // tls.crt
	TLSKeyKey  = corev1.TLSPrivateKeyKey // tls.key
	CAKey      = "ca.crt"
)

// Where a member pod mounts its certificates.
const (
	serverTLSDir = "/etc/etcd/tls/server"
	peerTLSDir   = "/etc/etcd/tls/peer"
)

// ClientCommonName is the common name of the client certificate in "<cluster>-client-tls"; with etcd
// authentication on, etcd takes it as the user name.
const ClientCommonName = "etcd-client"

// OperatorCommonName is the common name of the client certificate the operator uses itself.
const OperatorCommonName = "etcd-operator"

// CASecretName and the other three name the TLS Secrets of cluster c that member pods and clients
// mount: the operator's own, or those spec.tls.secrets names (then there is no CA Secret).
func CASecretName(c *etcdv1beta1.EtcdCluster) string { return c.Name + CASecretSuffix }
func ServerTLSSecretName(c *etcdv1beta1.EtcdCluster) string {
	if c.Spec.UserTLSSecrets() {
		return c.Spec.TLS.Secrets.Server
	}
	return ownSecretName(c, ServerTLSSecretSuffix)
}
func PeerTLSSecretName(c *etcdv1beta1.EtcdCluster) string {
	if c.Spec.UserTLSSecrets() {
		return c.Spec.TLS.Secrets.Peer
	}
	return ownSecretName(c, PeerTLSSecretSuffix)
}
func ClientTLSSecretName(c *etcdv1beta1.EtcdCluster) string {
	if c.Spec.UserTLSSecrets() {
		return c.Spec.TLS.Secrets.Client
	}
	return ownSecretName(c, ClientTLSSecretSuffix)
}

// ownSecretName is the name of cluster c's Secret of that suffix, which the operator writes: with
// spec.tls.issuerRef too, where it holds what cert-manager issued into IssuedTLSSecretName once the
// members trust its CA.
func ownSecretName(c *etcdv1beta1.EtcdCluster, suffix string) string {
	return c.Name + suffix
}

// IssuedTLSSecretName is the Secret cert-manager writes for cluster c with spec.tls.issuerRef, of the
// Secret of that suffix (ServerTLSSecretSuffix and so on): "<cluster>-cm-server-tls". No pod mounts it:
// the operator copies its certificate into the Secret of the suffix, which the members mount.
func IssuedTLSSecretName(c *etcdv1beta1.EtcdCluster, suffix string) string {
	return c.Name + IssuedSecretInfix + suffix
}

// scheme is "https" when tls is on, "http" otherwise.
func scheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

// CACommonName is the common name of cluster c's CA: "<namespace>/<cluster> etcd CA".
func CACommonName(c *etcdv1beta1.EtcdCluster) string {
	return c.Namespace + "/" + c.Name + " etcd CA"
}

// memberWildcards are the names that match every member's DNS name, fully qualified and short.
func (o Options) memberWildcards(c *etcdv1beta1.EtcdCluster) []string {
	peer := PeerServiceName(c) + "." + c.Namespace + ".svc"
	return []string{"*." + peer + "." + o.clusterDomain(), "*." + peer}
}

// ClientServiceNames are the names of the client Service a client may dial: short, with the namespace,
// ".svc" and fully qualified. The operator dials members by pod IP and checks their certificate against
// the last.
func (o Options) ClientServiceNames(c *etcdv1beta1.EtcdCluster) []string {
	svc := ClientServiceName(c)
	return []string{svc, svc + "." + c.Namespace, svc + "." + c.Namespace + ".svc",
		svc + "." + c.Namespace + ".svc." + o.clusterDomain()}
}

// ServerCertRequest is the members' serving certificate of the client port: every member's DNS name
// (by wildcard), the client Service's names, and localhost for a client in the pod. It is also a client
// certificate, which etcd's gRPC gateway presents to its own member.
func (o Options) ServerCertRequest(c *etcdv1beta1.EtcdCluster) pki.Request {
	return pki.Request{
		CommonName: c.Name + " etcd server",
		DNSNames:   append(append(o.memberWildcards(c), o.ClientServiceNames(c)...), "localhost"),
		IPs:        []net.IP{net.IPv4(127, 0, 0, 1).To4(), net.IPv6loopback},
		Server:     true, Client: true,
	}
}

// UserCertRequests are what the certificates of spec.tls.secrets must be valid for (pki.CheckUsable,
// which checks a wildcard name with one host it covers): the server certificate for every member's fully
// qualified name and the client Service's, for server and client authentication (etcd's gateway
// presents it to its own member); the peer certificate for every member's fully qualified name, for
// both; the client certificate for client authentication.
func (o Options) UserCertRequests(c *etcdv1beta1.EtcdCluster) (server, peer, client pki.Request) {
	members := o.memberWildcards(c)[0]
	services := o.ClientServiceNames(c)
	return pki.Request{DNSNames: []string{members, services[len(services)-1]}, Server: true, Client: true},
		pki.Request{DNSNames: []string{members}, Server: true, Client: true},
		pki.Request{Client: true}
}

// PeerCommonName is the common name of cluster c's peer certificate, the only one a member accepts on
// its peer port (--peer-cert-allowed-cn): the users' client certificate, of the same CA, is refused there.
// With spec.tls.secrets it is spec.tls.secrets.peerCommonName, empty when unset (then the peer CA alone
// identifies a member).
func PeerCommonName(c *etcdv1beta1.EtcdCluster) string {
	if c.Spec.UserTLSSecrets() {
		return c.Spec.TLS.Secrets.PeerCommonName
	}
	return PeerServiceName(c)
}

// PeerCertRequest is the members' peer certificate: every member's DNS name, server and client.
func (o Options) PeerCertRequest(c *etcdv1beta1.EtcdCluster) pki.Request {
	return pki.Request{CommonName: PeerCommonName(c), DNSNames: o.memberWildcards(c), Server: true, Client: true}
}

// ClientCertRequest is the client certificate of Secret "<cluster>-client-tls".
func ClientCertRequest() pki.Request {
	return pki.Request{CommonName: ClientCommonName, Client: true}
}

// OperatorCertRequest is the operator's own client certificate, kept in memory.
func OperatorCertRequest() pki.Request {
	return pki.Request{CommonName: OperatorCommonName, Client: true}
}

// TLSSecret returns the kubernetes.io/tls Secret name of cluster c with the given material (caPEM may be
// nil, for the CA's own Secret).
func TLSSecret(c *etcdv1beta1.EtcdCluster, name string, certPEM, keyPEM, caPEM []byte) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: ownedMeta(c, name),
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{TLSCertKey: certPEM, TLSKeyKey: keyPEM},
	}
	if caPEM != nil {
		s.Data[CAKey] = caPEM
	}
	return s
}

// tlsArgs are the etcd flags of the ports' TLS a pod serves as t: the certificate files the member's
// Secrets are mounted as, and client certificates required on each TLS port. The peer flags are there
// whenever the pod carries the peer certificate, also while its peer port still serves plain text
// during a switch (etcd ignores them for an http:// listener but dials peers that serve TLS with them).
func tlsArgs(c *etcdv1beta1.EtcdCluster, t PodTLS) []string {
	var args []string
	if t.ClientHTTPS {
		args = append(args,
			"--cert-file="+serverTLSDir+"/"+TLSCertKey,
			"--key-file="+serverTLSDir+"/"+TLSKeyKey,
			"--trusted-ca-file="+serverTLSDir+"/"+CAKey,
			"--client-cert-auth=true")
	}
	if t.PeerCertificates {
		args = append(args,
			"--peer-cert-file="+peerTLSDir+"/"+TLSCertKey,
			"--peer-key-file="+peerTLSDir+"/"+TLSKeyKey,
			"--peer-trusted-ca-file="+peerTLSDir+"/"+CAKey,
			"--peer-client-cert-auth=true",
			// etcd otherwise also requires a peer's address to be one its certificate's DNS names resolve
			// to; the names are wildcards of the headless Service, which a new member's IP joins only once
			// its endpoint is published, after it first dials its peers: it would exit and restart. The
			// common name below (or, with certificates the user keeps, the peer CA) identifies a member.
			skipPeerSANFlag(c)+"=true")
		if cn := PeerCommonName(c); cn != "" {
			args = append(args, "--peer-cert-allowed-cn="+cn)
		}
	}
	return args
}

// skipPeerSANFlag is etcd's flag that skips the check of a peer's address against its certificate's
// names: experimental in 3.5, renamed in 3.6.
func skipPeerSANFlag(c *etcdv1beta1.EtcdCluster) string {
	if strings.HasPrefix(c.Spec.VersionOrDefault(), "3.5.") {
		return "--experimental-peer-skip-client-san-verification"
	}
	return "--peer-skip-client-san-verification"
}

// tlsListener is one port's TLS Secret in a member pod: its volume, the Secret and where the etcd
// container mounts it.
type tlsListener struct{ volume, secret, dir string }

// tlsListeners are the tlsListener of each port of cluster c whose certificate a pod serving as t carries.
func tlsListeners(c *etcdv1beta1.EtcdCluster, t PodTLS) []tlsListener {
	var l []tlsListener
	if t.ClientHTTPS {
		l = append(l, tlsListener{"server-tls", ServerTLSSecretName(c), serverTLSDir})
	}
	if t.PeerCertificates {
		l = append(l, tlsListener{"peer-tls", PeerTLSSecretName(c), peerTLSDir})
	}
	return l
}

// tlsSecretVolumes are the volumes of the ports' TLS Secrets. Whole Secrets are mounted (not subPaths),
// so that the kubelet updates the files when a certificate is renewed; etcd reads its certificate and
// key again for every new connection.
func tlsSecretVolumes(c *etcdv1beta1.EtcdCluster, t PodTLS) []corev1.Volume {
	var vols []corev1.Volume
	for _, l := range tlsListeners(c, t) {
		vols = append(vols, corev1.Volume{Name: l.volume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: l.secret, DefaultMode: ptr.To[int32](0o440),
		}}})
	}
	return vols
}

// tlsMounts are the etcd container's read-only mounts of tlsSecretVolumes.
func tlsMounts(c *etcdv1beta1.EtcdCluster, t PodTLS) []corev1.VolumeMount {
	var mounts []corev1.VolumeMount
	for _, l := range tlsListeners(c, t) {
		mounts = append(mounts, corev1.VolumeMount{Name: l.volume, MountPath: l.dir, ReadOnly: true})
	}
	return mounts
}

// PodTLS is how a member pod serves TLS: the URL schemes of its client port (both while spec.tls.client
// is being switched, so that clients move from one to the other without a failed request), whether it
// carries the peer certificate (then it can dial peers whose peer port serves TLS), and whether its own
// peer port serves TLS (etcd opens one listener per peer URL, so a peer port serves one scheme: it
// follows the member's peer URL in etcd's member list). SpecTLS is the steady state of a spec;
// model.Cluster.DesiredTLS gives the states a switch passes through.
type PodTLS struct {
	ClientHTTP, ClientHTTPS     bool
	PeerCertificates, PeerHTTPS bool
}

// SpecTLS is how the member pods of cluster c serve TLS once no switch of spec.tls is under way.
func SpecTLS(c *etcdv1beta1.EtcdCluster) PodTLS {
	return PodTLS{ClientHTTP: !c.Spec.ClientTLS(), ClientHTTPS: c.Spec.ClientTLS(),
		PeerCertificates: c.Spec.PeerTLS(), PeerHTTPS: c.Spec.PeerTLS()}
}

// PodTLSOf is how member pod p serves TLS, as the etcd command line it runs says: the member's truth,
// whatever the spec says now.
func PodTLSOf(p *corev1.Pod) PodTLS {
	var t PodTLS
	for _, u := range strings.Split(PodFlag(p, "listen-client-urls"), ",") {
		t.ClientHTTP = t.ClientHTTP || strings.HasPrefix(u, "http://")
		t.ClientHTTPS = t.ClientHTTPS || strings.HasPrefix(u, "https://")
	}
	t.PeerCertificates = PodFlag(p, "peer-cert-file") != ""
	t.PeerHTTPS = strings.HasPrefix(PodFlag(p, "listen-peer-urls"), "https://")
	return t
}

// ClientSchemes are the URL schemes a client port serving as t serves, http first.
func (t PodTLS) ClientSchemes() []string {
	var s []string
	if t.ClientHTTP {
		s = append(s, "http")
	}
	if t.ClientHTTPS {
		s = append(s, "https")
	}
	return s
}

// clientURLs joins the URL of host:2379 in each scheme t's client port serves.
func (t PodTLS) clientURLs(host string) string {
	var urls []string
	for _, s := range t.ClientSchemes() {
		urls = append(urls, s+"://"+net.JoinHostPort(host, strconv.Itoa(ClientPort)))
	}
	return strings.Join(urls, ",")
}

// ServesClientTLS reports whether the etcd container of member pod p serves TLS on its client port.
func ServesClientTLS(p *corev1.Pod) bool { return PodTLSOf(p).ClientHTTPS }

// PodFlag returns the value of etcd flag name (without "--") that the etcd container of pod p runs
// with, "" when p is nil or the container does not set the flag.
func PodFlag(p *corev1.Pod, name string) string {
	if p == nil {
		return ""
	}
	for _, ctr := range p.Spec.Containers {
		if ctr.Name != EtcdContainer {
			continue
		}
		for _, a := range ctr.Command {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
	}
	return ""
}

// RootSecretSuffix ends the name of the Secret the operator creates for the root password of a cluster
// with spec.auth and no rootSecretRef.
const RootSecretSuffix = "-root-credentials"

// RootPasswordKey is the key of the root user's password in the root Secret.
const RootPasswordKey = "password"

// RootSecretName is the Secret holding cluster c's root password: spec.auth.rootSecretRef's, else
// "<cluster>-root-credentials", which the operator creates.
func RootSecretName(c *etcdv1beta1.EtcdCluster) string {
	if a := c.Spec.Auth; a != nil && a.RootSecretRef != nil && a.RootSecretRef.Name != "" {
		return a.RootSecretRef.Name
	}
	return c.Name + RootSecretSuffix
}

// RootSecret returns the Opaque Secret "<cluster>-root-credentials" of cluster c holding the root
// user's password under RootPasswordKey, owned by c and labelled like its other Secrets.
func RootSecret(c *etcdv1beta1.EtcdCluster, password []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: ownedMeta(c, c.Name+RootSecretSuffix),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{RootPasswordKey: password},
	}
}
