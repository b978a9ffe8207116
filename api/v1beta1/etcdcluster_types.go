package v1beta1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultVersion is the etcd server version a cluster runs when spec.version is empty.
const DefaultVersion = "3.6.16"

// EtcdClusterSpec is the desired state of an etcd cluster.
//
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.auth) || !oldSelf.auth.enabled || (has(self.auth) && self.auth.enabled)",message="spec.auth.enabled cannot be turned off once on: every client that reaches the client port would read and write every key; to run without authentication, restore a backup into a new EtcdCluster and run `etcdctl auth disable` there as root"
type EtcdClusterSpec struct {
	// Replicas is the number of etcd members (voters). It must be odd, from 1 to 9: a cluster of 2n
	// members tolerates no more failed members than one of 2n-1 (quorum of 4 is 3), so an even size only
	// adds load and risk. 3 tolerates 1 failed member, 5 tolerates 2.
	//
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9
	// +kubebuilder:validation:XValidation:rule="self < 1 || self > 9 || self % 2 == 1",message="replicas must be odd (1, 3, 5, 7 or 9): an even number of members tolerates no more failures than one fewer (a quorum of 2 is 2, of 4 is 3, of 6 is 4, of 8 is 5) and only adds load and risk"
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Version is the etcd server version, "3.5.x" or "3.6.x" (without a leading "v").
	// It selects the image tag "v<version>" unless image is set.
	//
	// Changing it upgrades the running cluster one member at a time, followers first and the leader
	// last. Allowed changes, per etcd's upgrade policy: a newer patch of the same minor, or the next
	// minor (3.5 to 3.6, from 3.5.26 or later). Downgrades and skipped minors are refused, but for
	// a change back to the version every member still runs (a change no member has taken, such as one
	// to a release that has no image).
	//
	// +kubebuilder:default="3.6.16"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^3[.](5|6)[.](0|[1-9][0-9]*)$')",message="spec.version must be an etcd 3.5 or 3.6 release written major.minor.patch, such as 3.6.16 or 3.5.35: the operator runs etcd 3.5 and 3.6"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^3[.](5|6)[.](0|[1-9][0-9]*)$') || !oldSelf.matches('^3[.](5|6)[.](0|[1-9][0-9]*)$') || int(self.split('.')[1]) <= int(oldSelf.split('.')[1]) + 1",message="spec.version cannot skip a minor version: upgrade one minor at a time (for example 3.5 to 3.6)"
	// +optional
	Version string `json:"version,omitempty"`

	// Image overrides the etcd container image (for example a mirror of the official image). It must
	// run etcd Version and provide /usr/local/bin/etcd, as the official images do. Changing it rolls the
	// members one at a time.
	//
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// Storage is where each member keeps its data directory.
	//
	// +kubebuilder:default={}
	// +optional
	Storage StorageSpec `json:"storage,omitempty"`

	// PodTemplate is merged onto the pods the operator builds for the members. Changing it rolls the
	// members one at a time, followers first and the leader last.
	//
	// +optional
	PodTemplate *PodTemplate `json:"podTemplate,omitempty"`

	// Options are etcd server settings. Changing them rolls the members one at a time.
	//
	// +optional
	Options *EtcdOptions `json:"options,omitempty"`

	// Backup schedules verified snapshots of the cluster and bounds how many are kept.
	//
	// +optional
	Backup *BackupSpec `json:"backup,omitempty"`

	// Bootstrap initialises a new cluster's data, for example from a backup. Immutable.
	//
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.bootstrap is immutable: it only applies when the cluster is created"
	// +optional
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`

	// Recovery says what the operator may do on its own to repair the cluster: replace members that stay
	// down, and recreate a cluster whose quorum is lost for good.
	//
	// +optional
	Recovery *RecoverySpec `json:"recovery,omitempty"`

	// TLS secures the client port (2379) and the peer port (2380) with certificates issued by a
	// certificate authority the operator creates for this cluster (Secret "<cluster>-ca"). When a cluster
	// is created without it, admission turns TLS on for both ports; set `enabled: false` on a port to
	// serve it in plain text. A cluster created before this field existed stays in plain text. Clients
	// use the certificate in Secret "<cluster>-client-tls" (keys ca.crt, tls.crt, tls.key). It cannot
	// be changed once the cluster exists.
	//
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// NetworkPolicy, when enabled, limits who reaches the members with a NetworkPolicy the operator
	// keeps ("<cluster>-etcd"): the peer port only from the cluster's members, the client port only
	// from the operator, the cluster's backup Jobs and the sources listed (by default, the pods of the
	// cluster's namespace). It takes effect only where the cluster's network plugin enforces
	// NetworkPolicies.
	//
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// Auth turns on etcd's authentication (etcd's `auth enable`) with a root user whose password is in a
	// Secret. Once on, it cannot be turned off here: see AuthSpec.Enabled.
	//
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// Paused stops the operator from changing the cluster's members while it is true: no member pod or
	// claim is created or deleted, no member is added, promoted or removed, and no rollout, repair,
	// restore, alarm disarm, authentication or TLS switch, CA rotation, PodDisruptionBudget,
	// NetworkPolicy or volume change is made. The operator still observes the members and keeps the
	// status current (phase Paused, the Progressing condition says what it would do next), keeps the
	// cluster's Services, root Secret and certificates (creating what is missing, renewing what is due,
	// which restarts no member), and takes scheduled backups. Spec changes made while paused are
	// admitted and carried out once it is false again. Deleting a paused cluster deletes it.
	//
	// +optional
	Paused bool `json:"paused,omitempty"`

	// Maintenance is routine upkeep of the members' databases: defragmentation.
	//
	// +optional
	Maintenance *MaintenanceSpec `json:"maintenance,omitempty"`
}

// MaintenanceSpec is routine upkeep of the members' databases.
type MaintenanceSpec struct {
	// Defragmentation returns the space that compaction freed inside a member's database file to the
	// file system (etcd's defragment). A member does not serve its clients while it is defragmented
	// (seconds per GiB), so the operator defragments one member at a time, only while every member is a
	// healthy voter and no rollout or membership change is under way, followers first, and the leader
	// last after moving leadership to a follower. Each defragmentation is recorded in an event with the
	// database size before and after, and in status.maintenance.
	//
	// +optional
	Defragmentation *DefragmentationSpec `json:"defragmentation,omitempty"`
}

// DefragmentationSpec says when members are defragmented: on a schedule, when a member's database file
// is mostly free space, or both.
//
// +kubebuilder:validation:XValidation:rule="has(self.schedule) || has(self.thresholdPercent)",message="spec.maintenance.defragmentation needs a schedule (such as \"0 3 * * *\"), a thresholdPercent (such as 50), or both"
type DefragmentationSpec struct {
	// Schedule is a cron expression ("0 3 * * *": daily at 03:00; "@weekly"), in TimeZone: at each
	// time, every member with at least MinReclaimable to free is defragmented, one after another. It
	// fires at most once a minute. The operator notices a schedule time within a minute.
	//
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Schedule string `json:"schedule,omitempty"`

	// TimeZone of Schedule, an IANA name such as "Europe/Berlin"; UTC when unset.
	//
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`

	// ThresholdPercent: a member is defragmented whenever the free part of its database file
	// ((dbSize - dbSizeInUse) / dbSize, as etcd reports them) reaches this percentage and at least
	// MinReclaimable, whatever the schedule.
	//
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	// +optional
	ThresholdPercent *int32 `json:"thresholdPercent,omitempty"`

	// MinReclaimable is the least free space (dbSize - dbSizeInUse) worth a defragmentation: a member
	// with less is skipped, by the schedule and the threshold alike. Default 64Mi.
	//
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).compareTo(quantity('0')) >= 0",message="spec.maintenance.defragmentation.minReclaimable must not be negative"
	// +optional
	MinReclaimable *resource.Quantity `json:"minReclaimable,omitempty"`
}

// DefaultMinReclaimable is DefragmentationSpec.MinReclaimable when unset.
var DefaultMinReclaimable = resource.MustParse("64Mi")

// MinReclaimableBytes returns MinReclaimable in bytes, DefaultMinReclaimable when unset.
func (d *DefragmentationSpec) MinReclaimableBytes() int64 {
	if d.MinReclaimable == nil {
		return DefaultMinReclaimable.Value()
	}
	return d.MinReclaimable.Value()
}

// NetworkPolicySpec says who may reach a cluster's members.
type NetworkPolicySpec struct {
	// Enabled creates the cluster's NetworkPolicy (true) or deletes it (false).
	Enabled bool `json:"enabled"`
	// ClientFrom are the sources allowed to the client port (2379) besides the operator and the
	// cluster's backup Jobs: pods, namespaces or IP blocks, as in a NetworkPolicy's ingress rule. Empty:
	// the pods of the cluster's namespace.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=32
	ClientFrom []networkingv1.NetworkPolicyPeer `json:"clientFrom,omitempty"`
	// MetricsFrom are the sources allowed to the metrics port (2381), which serves etcd's metrics and
	// health (no keys or values). Empty: every source.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=32
	MetricsFrom []networkingv1.NetworkPolicyPeer `json:"metricsFrom,omitempty"`
}

// NetworkPolicyEnabled reports whether the cluster has a NetworkPolicy.
func (s *EtcdClusterSpec) NetworkPolicyEnabled() bool {
	return s.NetworkPolicy != nil && s.NetworkPolicy.Enabled
}

// AuthSpec is etcd authentication: the user "root" (with etcd's built-in role "root") exists with the
// password of a Secret, and etcd serves only authenticated clients.
type AuthSpec struct {
	// Enabled turns etcd authentication on once the cluster is Available and all its members are voters:
	// the operator adds the user root with the Secret's password, grants it the role root, and enables
	// authentication. Turning it off again is refused: a cluster whose keys were protected would serve
	// them to every client of its port. To run without authentication, restore a backup into a new
	// cluster and run `etcdctl auth disable` there.
	Enabled bool `json:"enabled"`

	// RootSecretRef names a Secret in the cluster's namespace whose key "password" holds the root
	// user's password (the user name is always "root"). When omitted, the operator creates Secret
	// "<cluster>-root-credentials" with a random password (owned by the cluster, deleted with it) and
	// names it in status.auth.rootSecret. Changing the password after authentication is on is not
	// done by the operator: change it in etcd first (`etcdctl user passwd root`), then in the Secret.
	//
	// +optional
	RootSecretRef *LocalObjectReference `json:"rootSecretRef,omitempty"`
}

// AuthEnabled reports whether the spec asks for etcd authentication.
func (s *EtcdClusterSpec) AuthEnabled() bool { return s.Auth != nil && s.Auth.Enabled }

// AuthStatus is what the operator knows of etcd authentication in the cluster.
type AuthStatus struct {
	// Enabled is true once etcd reported authentication on.
	Enabled bool `json:"enabled"`
	// RootSecret is the Secret holding the root user's password (key "password").
	// +optional
	RootSecret string `json:"rootSecret,omitempty"`
}

// TLSSpec says which of a cluster's ports serve TLS. Either port can be switched on or off for a
// running cluster: the operator moves the members over one at a time, without losing quorum (see
// docs/security.md, "Switching TLS on or off").
// +kubebuilder:validation:XValidation:rule="!has(self.secrets) || !has(self.issuerRef)",message="spec.tls.secrets and spec.tls.issuerRef cannot both be set: either you keep the certificates' Secrets, or cert-manager does"
type TLSSpec struct {
	// Client is TLS on the client port (2379): members serve a certificate for their DNS names and the
	// client Service's, and accept only clients with a certificate of the cluster's CA.
	//
	// +optional
	Client *TLSListenerSpec `json:"client,omitempty"`

	// Peer is TLS between members (port 2380): each member proves with a certificate of the cluster's
	// CA that it is one, in both directions.
	//
	// +optional
	Peer *TLSListenerSpec `json:"peer,omitempty"`

	// Secrets, when set, name Secrets you keep, by hand or with cert-manager, that hold the members'
	// certificates: the operator then creates no CA and issues, renews and rotates no certificate; it
	// checks the Secrets on every pass, mounts them and reloads them as they change. Each is of type
	// kubernetes.io/tls with tls.crt, tls.key and ca.crt (the CA certificates to trust), in the cluster's
	// namespace. See docs/security.md, "Certificates you keep", for the names and usages each needs.
	//
	// +optional
	Secrets *TLSSecrets `json:"secrets,omitempty"`

	// IssuerRef, when set, names a cert-manager Issuer or ClusterIssuer that issues the members'
	// certificates: the operator then creates no CA and issues no certificate itself; it keeps one
	// cert-manager Certificate per certificate ("<cluster>-cm-server-tls", "<cluster>-cm-peer-tls" and
	// "<cluster>-cm-client-tls"), checks the Secrets cert-manager writes for that issuer as it does those
	// of spec.tls.secrets, and copies them into the Secrets the pods mount ("<cluster>-server-tls" and
	// so on), whose ca.crt is a trust bundle it keeps, so that a change of the issuer's CA reaches the
	// members without an outage. The issuer must write ca.crt (cert-manager's CA and Vault issuers do;
	// ACME issuers do not). It cannot be added, removed or changed while TLS is on or a switch off has
	// not finished, but changed while the issuer has issued no certificate the cluster used (no member,
	// no status.tls.trustedCAsHash: a typo). See docs/security.md, "Certificates from cert-manager".
	//
	// +optional
	IssuerRef *IssuerReference `json:"issuerRef,omitempty"`
}

// IssuerReference names a cert-manager issuer.
// +kubebuilder:validation:XValidation:rule="(has(self.group) && self.group != 'cert-manager.io') || !has(self.kind) || self.kind == 'Issuer' || self.kind == 'ClusterIssuer'",message="spec.tls.issuerRef.kind must be Issuer or ClusterIssuer for group cert-manager.io"
type IssuerReference struct {
	// Name is the issuer's name; an Issuer must be in the cluster's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Kind is Issuer (default) or ClusterIssuer, or with another group the kind of that external issuer.
	// +kubebuilder:default=Issuer
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	// +optional
	Kind string `json:"kind,omitempty"`

	// Group is the issuer's API group: cert-manager.io (default), or that of an external issuer.
	// +kubebuilder:default=cert-manager.io
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Group string `json:"group,omitempty"`
}

// TLSSecrets name the Secrets of a cluster's certificates when you keep them yourself.
type TLSSecrets struct {
	// Server is the members' serving certificate of the client port (required with client TLS): every
	// member's name and the client Service's, usable for server and client authentication (etcd's
	// gateway presents it to its own member); its ca.crt holds the CAs whose client certificates the
	// members accept.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Server string `json:"server,omitempty"`

	// Peer is the members' peer certificate (required with peer TLS): every member's name, usable for
	// server and client authentication; its ca.crt holds the CAs of the peer certificates the members
	// accept.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Peer string `json:"peer,omitempty"`

	// PeerCommonName is the common name of the peer certificate: the members then accept on the peer
	// port only certificates of that name (etcd's --peer-cert-allowed-cn). Without it any certificate
	// of the peer CA is accepted as a member's, so the operator requires the peer Secret's ca.crt to
	// share no CA with the server Secret's (whose client certificates could otherwise join as members).
	//
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PeerCommonName string `json:"peerCommonName,omitempty"`

	// Client is a client certificate the members accept (required with client TLS), which the operator
	// and backup Jobs present; its ca.crt must hold the CA of the server certificate.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Client string `json:"client,omitempty"`
}

// UserTLSSecrets reports whether the cluster's certificates are Secrets the user keeps (spec.tls.secrets).
func (s *EtcdClusterSpec) UserTLSSecrets() bool { return s.TLS != nil && s.TLS.Secrets != nil }

// Defaults of IssuerReference.
const (
	DefaultIssuerKind  = "Issuer"
	DefaultIssuerGroup = "cert-manager.io"
)

// Defaulted returns r with the defaults of its kind and group filled in (the API server fills them on
// admission; an object built in code may lack them).
func (r IssuerReference) Defaulted() IssuerReference {
	if r.Kind == "" {
		r.Kind = DefaultIssuerKind
	}
	if r.Group == "" {
		r.Group = DefaultIssuerGroup
	}
	return r
}

// TLSIssuer reports whether cert-manager issues the cluster's certificates (spec.tls.issuerRef).
func (s *EtcdClusterSpec) TLSIssuer() bool { return s.TLS != nil && s.TLS.IssuerRef != nil }

// TLSStatus is what a cluster's certificates are.
type TLSStatus struct {
	// ClientSecret is the Secret of the client certificate issued for users (keys ca.crt, tls.crt,
	// tls.key); empty without client TLS.
	// +optional
	ClientSecret string `json:"clientSecret,omitempty"`
	// CANotAfter is when the cluster's CA expires.
	// +optional
	CANotAfter *metav1.Time `json:"caNotAfter,omitempty"`
	// NotAfter is when the first of the members' and the users' certificates expires.
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`
	// RenewAt is when the operator renews the first of them (a third of its life before it expires).
	// +optional
	RenewAt *metav1.Time `json:"renewAt,omitempty"`
	// TrustedCAsHash is a short hash of the CA certificates the members trust, set once the CA has been
	// rotated (empty before), or always with spec.tls.secrets (their ca.crt) and spec.tls.issuerRef
	// (the operator's trust bundles): a member pod started trusting other CAs is restarted, one at a
	// time.
	// +optional
	TrustedCAsHash string `json:"trustedCAsHash,omitempty"`
	// CARotation is the rotation of the CA under way; absent when none is.
	// +optional
	CARotation *CARotationStatus `json:"caRotation,omitempty"`
	// ClientScheme is the scheme spec.tls.client asked for when the operator last looked: https or http.
	// +optional
	ClientScheme URLScheme `json:"clientScheme,omitempty"`
	// ClientSchemeChangedAt is when the operator saw spec.tls.client.enabled change to ClientScheme;
	// absent when it has not seen it change. While no member serves only ClientScheme, the grace
	// period of a client port switch (every member serves both schemes) lasts at least until this
	// time plus the grace period, also when the switch was changed back midway.
	// +optional
	ClientSchemeChangedAt *metav1.Time `json:"clientSchemeChangedAt,omitempty"`
}

// CARotationStatus is where a rotation of a cluster's CA is. It goes through three phases, each on a
// settled cluster: the members restart one at a time to trust the old and the new CA (TrustNewCA);
// every certificate is issued again by the new CA and the operator waits until each member serves its
// new ones (IssueFromNewCA, no restart); the members restart one at a time to trust only the new CA
// (DropOldCA). With spec.tls.issuerRef, the same phases follow a certificate cert-manager issued from
// a CA the members do not trust yet: the issuer's CA was replaced.
type CARotationStatus struct {
	// Phase is the rotation's phase.
	Phase CARotationPhase `json:"phase"`
	// StartedAt is when the rotation began.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
}

// CARotationPhase is the phase of a CA rotation: TrustNewCA, IssueFromNewCA or DropOldCA.
//
// +kubebuilder:validation:Enum=TrustNewCA;IssueFromNewCA;DropOldCA
type CARotationPhase string

// Phases of a CA rotation (CARotationStatus.Phase).
const (
	CARotationTrustNewCA     CARotationPhase = "TrustNewCA"
	CARotationIssueFromNewCA CARotationPhase = "IssueFromNewCA"
	CARotationDropOldCA      CARotationPhase = "DropOldCA"
)

// URLScheme is the scheme of a URL the members serve: http or https.
//
// +kubebuilder:validation:Enum=http;https
type URLScheme string

// The schemes of the client port.
const (
	SchemeHTTP  URLScheme = "http"
	SchemeHTTPS URLScheme = "https"
)

// TLSListenerSpec is TLS on one port.
type TLSListenerSpec struct {
	// Enabled turns TLS on (true) or serves the port in plain text (false).
	Enabled bool `json:"enabled"`
}

// ClientTLS reports whether the client port serves TLS.
func (s *EtcdClusterSpec) ClientTLS() bool {
	return s.TLS != nil && s.TLS.Client != nil && s.TLS.Client.Enabled
}

// PeerTLS reports whether the peer port serves TLS.
func (s *EtcdClusterSpec) PeerTLS() bool {
	return s.TLS != nil && s.TLS.Peer != nil && s.TLS.Peer.Enabled
}

// AnyTLS reports whether either port serves TLS, so that the cluster has a CA.
func (s *EtcdClusterSpec) AnyTLS() bool { return s.ClientTLS() || s.PeerTLS() }

// AutoCompactionMode is how etcd's --auto-compaction-retention is read: Periodic or Revision (etcd's
// flag values "periodic" and "revision"; v1alpha1 spelled them so).
//
// +kubebuilder:validation:Enum=Periodic;Revision
type AutoCompactionMode string

// The modes of etcd's auto-compaction.
const (
	// AutoCompactionPeriodic: the retention is a duration, such as "1h"; etcd keeps that much history.
	AutoCompactionPeriodic AutoCompactionMode = "Periodic"
	// AutoCompactionRevision: the retention is a number of revisions, such as "10000".
	AutoCompactionRevision AutoCompactionMode = "Revision"
)

// Flag returns the value of etcd's --auto-compaction-mode for m: "periodic" or "revision".
func (m AutoCompactionMode) Flag() string { return strings.ToLower(string(m)) }

// EtcdOptions are typed etcd server flags plus extraArgs for the rest. Unset fields keep etcd's
// defaults. See https://etcd.io/docs/v3.6/op-guide/configuration/ for each flag.
//
// +kubebuilder:validation:XValidation:rule="!has(self.heartbeatIntervalMillis) || !has(self.electionTimeoutMillis) || self.electionTimeoutMillis >= 5 * self.heartbeatIntervalMillis",message="options.electionTimeoutMillis must be at least 5 times options.heartbeatIntervalMillis, as etcd requires"
// +kubebuilder:validation:XValidation:rule="!has(self.autoCompactionRetention) || has(self.autoCompactionMode)",message="options.autoCompactionRetention needs options.autoCompactionMode (Periodic or Revision)"
type EtcdOptions struct {
	// QuotaBackendBytes is --quota-backend-bytes: the backend database size at which etcd raises the
	// NOSPACE alarm and refuses writes (etcd's default 2GiB; etcd suggests at most 8GiB). It must be
	// below storage.size (1Gi when unset) or storage.emptyDir.sizeLimit: keep them well above it.
	//
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || (quantity(string(self)).compareTo(quantity('16Mi')) >= 0 && quantity(string(self)).compareTo(quantity('100Gi')) <= 0)",message="options.quotaBackendBytes must be between 16Mi and 100Gi, such as 2Gi or 8Gi"
	// +optional
	QuotaBackendBytes *resource.Quantity `json:"quotaBackendBytes,omitempty"`

	// AutoCompactionMode is --auto-compaction-mode: Periodic (retention is a duration) or Revision
	// (retention is a number of revisions).
	// +optional
	AutoCompactionMode AutoCompactionMode `json:"autoCompactionMode,omitempty"`

	// AutoCompactionRetention is --auto-compaction-retention: a duration such as "1h" or "30m" for
	// periodic mode, a number of revisions such as "10000" for revision mode.
	//
	// +kubebuilder:validation:Pattern=`^([0-9]+|([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +optional
	AutoCompactionRetention string `json:"autoCompactionRetention,omitempty"`

	// SnapshotCount is --snapshot-count: committed transactions between raft snapshots (etcd's default
	// 10000).
	//
	// +kubebuilder:validation:Minimum=1
	// +optional
	SnapshotCount *int64 `json:"snapshotCount,omitempty"`

	// HeartbeatIntervalMillis is --heartbeat-interval in milliseconds (etcd's default 100).
	//
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=10000
	// +optional
	HeartbeatIntervalMillis *int32 `json:"heartbeatIntervalMillis,omitempty"`

	// ElectionTimeoutMillis is --election-timeout in milliseconds (etcd's default 1000); at least 5
	// times the heartbeat interval, at most 50000.
	//
	// +kubebuilder:validation:Minimum=50
	// +kubebuilder:validation:Maximum=50000
	// +optional
	ElectionTimeoutMillis *int32 `json:"electionTimeoutMillis,omitempty"`

	// MaxRequestBytes is --max-request-bytes: the largest client request etcd accepts, in bytes
	// (etcd's default 1.5MiB).
	//
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=67108864
	// +optional
	MaxRequestBytes *int32 `json:"maxRequestBytes,omitempty"`

	// ExtraArgs are further etcd flags, by name without the leading "--" (for example
	// "experimental-compact-hash-check-enabled": "true"). Flags the operator sets itself (names, URLs,
	// data directory, initial cluster, TLS), the typed options above, risky flags (such as
	// enable-pprof, log-outputs, discovery*) and the flags of etcd 2 that etcd accepts only to ignore
	// them (such as snapshot, v, vv) are refused.
	//
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[a-z]([a-z0-9-]*[a-z0-9])?$'))",message="options.extraArgs keys are etcd flag names: lower-case letters, digits and '-', without the leading '--' and without '=', such as 'log-level'"
	// +optional
	ExtraArgs map[string]string `json:"extraArgs,omitempty"`
}

// RetainPolicy says what happens to a member's PersistentVolumeClaim when the member is removed or the
// cluster is deleted.
//
// +kubebuilder:validation:Enum=Delete;Retain
type RetainPolicy string

const (
	// RetainPolicyDelete deletes the claim together with the member (and so its data, depending on the
	// volume's reclaim policy).
	RetainPolicyDelete RetainPolicy = "Delete"
	// RetainPolicyRetain keeps the claim; it is no longer owned by the cluster.
	RetainPolicyRetain RetainPolicy = "Retain"
)

// StorageSpec is where each member keeps its data: one PersistentVolumeClaim per member (the default),
// or an emptyDir for members whose data may be lost with the pod (tests, caches).
//
// +kubebuilder:validation:XValidation:rule="!(has(self.emptyDir) && (has(self.size) || has(self.storageClassName)))",message="storage.emptyDir cannot be combined with storage.size or storage.storageClassName"
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName)",message="storage.storageClassName cannot be added or removed after creation"
// +kubebuilder:validation:XValidation:rule="has(self.emptyDir) == has(oldSelf.emptyDir)",message="storage cannot be switched between emptyDir and persistent volumes after creation"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.size) || has(self.size)",message="storage.size cannot be removed once set (it may only grow)"
type StorageSpec struct {
	// Size is the requested size of each member's volume, at least 64Mi (default 1Gi). It may not
	// shrink; growing it expands the existing claims where their StorageClass allows volume expansion
	// (the status says where it does not). Size it above etcd's backend quota (2GiB by default) plus room for the WAL and
	// snapshots for a production cluster; the default suits small clusters and tests. At most 64Ti:
	// that is the largest volume the major clouds' block storage provisions, and etcd never uses more
	// than its backend quota (at most 100Gi) plus the WAL and snapshots; a larger size is a typo that
	// would leave the members' claims, and so the members, pending for ever.
	//
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).compareTo(quantity('64Mi')) >= 0",message="storage.size must be at least 64Mi, such as 1Gi"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).compareTo(quantity('64Ti')) <= 0",message="storage.size must be at most 64Ti, such as 10Gi: no common storage provisions a larger volume, and etcd uses at most its backend quota (options.quotaBackendBytes, at most 100Gi) plus its WAL and snapshots"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || !isQuantity(string(oldSelf)) || quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",message="storage.size may only grow: shrinking a volume is not supported"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// StorageClassName is the StorageClass of the members' claims; empty uses the cluster's default
	// class. Immutable.
	//
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="storage.storageClassName is immutable"
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// AccessModes of the members' claims (default ReadWriteOnce).
	//
	// +kubebuilder:validation:items:Enum=ReadWriteOnce;ReadWriteOncePod;ReadWriteMany
	// +kubebuilder:validation:MaxItems=3
	// +optional
	AccessModes []corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`

	// RetainPolicy says whether a member's claim is deleted with the member and the cluster (Delete,
	// the default) or kept (Retain).
	//
	// +kubebuilder:default=Delete
	// +optional
	RetainPolicy RetainPolicy `json:"retainPolicy,omitempty"`

	// EmptyDir keeps each member's data in an emptyDir volume: a member whose pod is deleted loses its
	// data and is replaced. Not for data you need to keep. A sizeLimit must be at least 64Mi and above
	// the backend quota (options.quotaBackendBytes, etcd's default 2Gi when unset).
	//
	// +optional
	EmptyDir *corev1.EmptyDirVolumeSource `json:"emptyDir,omitempty"`
}

// PodTemplate holds the parts of the member pods a user may set; they are merged onto what the
// operator builds (the operator owns the etcd container's command, ports, probes and volumes).
type PodTemplate struct {
	// Labels added to every member pod. Admission refuses the keys the operator sets itself
	// (app.kubernetes.io/name, instance and managed-by, and etcd.etcdkit.dev/*).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations added to every member pod. Admission refuses etcd.etcdkit.dev/* keys, the operator's
	// own records.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// Resources of the etcd container (default: requests cpu 100m, memory 128Mi; no limits).
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// Affinity replaces the default, which prefers to put members on different nodes.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Tolerations of the member pods.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// NodeSelector of the member pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// TopologySpreadConstraints replace the default, which spreads members over zones where it can.
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// PriorityClassName of the member pods.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// ServiceAccountName of the member pods (default: the namespace's "default"; no token is mounted).
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// ClusterPhase is a one-word summary of the cluster's state; conditions carry the detail.
//
// +kubebuilder:validation:Enum=Creating;Running;Scaling;Upgrading;Degraded;QuorumLost;Unreachable;Restoring;Deleting;Paused
type ClusterPhase string

// The phases of an EtcdCluster.
const (
	PhaseCreating   ClusterPhase = "Creating"
	PhaseRunning    ClusterPhase = "Running"
	PhaseScaling    ClusterPhase = "Scaling"
	PhaseUpgrading  ClusterPhase = "Upgrading"
	PhaseDegraded   ClusterPhase = "Degraded"
	PhaseQuorumLost ClusterPhase = "QuorumLost"
	// PhaseUnreachable: no member answers the operator, while a quorum of the member pods are Ready
	// (kubelet's readiness probes reach etcd): the operator is cut off from the members, which may be
	// serving their clients.
	PhaseUnreachable ClusterPhase = "Unreachable"
	// PhaseRestoring: after a quorum loss without data, the cluster is being recreated from a backup
	// (spec.recovery.restoreOnQuorumLoss; status.recovery says from which).
	PhaseRestoring ClusterPhase = "Restoring"
	PhaseDeleting  ClusterPhase = "Deleting"
	// PhasePaused: spec.paused is true; the conditions still report the members' health.
	PhasePaused ClusterPhase = "Paused"
)

// MemberRole is whether a member votes in the raft quorum.
//
// +kubebuilder:validation:Enum=Voter;Learner
type MemberRole string

// The roles of a member.
const (
	RoleVoter   MemberRole = "Voter"
	RoleLearner MemberRole = "Learner"
)

// MemberStatus is one etcd member as etcd reports it.
type MemberStatus struct {
	// Name of the member (its pod's name).
	Name string `json:"name"`
	// ID is the member ID in hex, as etcdctl prints it; empty while the member is not registered.
	// +optional
	ID string `json:"id,omitempty"`
	// PeerURL the member advertises to its peers.
	// +optional
	PeerURL string `json:"peerURL,omitempty"`
	// ClientURL the member advertises to clients.
	// +optional
	ClientURL string `json:"clientURL,omitempty"`
	// Role is Voter or Learner.
	// +optional
	Role MemberRole `json:"role,omitempty"`
	// Healthy is true when the member answered a linearizable read and reported no alarm.
	Healthy bool `json:"healthy"`
	// Leader is true for the current raft leader.
	// +optional
	Leader bool `json:"leader,omitempty"`
	// Version is the etcd server version the member runs.
	// +optional
	Version string `json:"version,omitempty"`
	// DBSizeBytes is the size of the member's backend database file in bytes.
	// +optional
	DBSizeBytes int64 `json:"dbSizeBytes,omitempty"`
	// DownSince is when the operator first saw the member down (listed by etcd but not answering, or
	// answering with an alarm); unset while it is healthy. It survives the member's pod being recreated:
	// spec.recovery.replaceUnhealthyMemberAfter counts from it.
	// +optional
	DownSince *metav1.Time `json:"downSince,omitempty"`
	// Problem is why the member is down, as far as Kubernetes and etcd tell (a container waiting
	// reason such as CrashLoopBackOff with its last termination message, a pod that cannot be
	// scheduled, etcd's error); empty while it is healthy.
	// +optional
	Problem string `json:"problem,omitempty"`
}

// EtcdClusterStatus is the observed state of an etcd cluster.
type EtcdClusterStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is a one-word summary: Creating, Running, Scaling, Upgrading, Degraded, QuorumLost, Unreachable,
	// Restoring or Deleting.
	// +optional
	Phase ClusterPhase `json:"phase,omitempty"`
	// Conditions: Available (quorum and a leader: the cluster serves reads and writes), Progressing
	// (the operator is changing the cluster; the reason and message say what), Degraded (a member is
	// missing or unhealthy).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Replicas is the number of member pods that exist.
	// +optional
	Replicas int32 `json:"replicas"`
	// ReadyReplicas is the number of healthy voting members.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// Selector is the label selector of the member pods, for the /scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`
	// ClusterID is etcd's cluster ID in hex.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// Leader is the name of the member that leads.
	// +optional
	Leader string `json:"leader,omitempty"`
	// Revision is the highest revision of the key-value store a member reported when the operator
	// last looked (every pass, at least once a minute); it is kept while no member answers.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// CurrentVersion is the lowest etcd server version the members run.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	CurrentVersion string `json:"currentVersion,omitempty"`
	// Members as etcd reports them, sorted by name.
	// +listType=map
	// +listMapKey=name
	// +optional
	Members []MemberStatus `json:"members,omitempty"`
	// ClientService is the name of the Service clients connect to (port 2379).
	// +optional
	ClientService string `json:"clientService,omitempty"`
	// LastBackup is the newest successful backup of the cluster.
	// +optional
	LastBackup *LastBackup `json:"lastBackup,omitempty"`
	// LastScheduleTime is the newest time of spec.backup.schedule for which a scheduled backup was
	// created (or skipped because the previous one had not finished). Missed times before it are not
	// made up for.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// Recovery is the newest restore from a backup the operator made on its own after a quorum loss
	// without data (spec.recovery.restoreOnQuorumLoss): while it runs, and after it succeeded.
	// +optional
	Recovery *RecoveryStatus `json:"recovery,omitempty"`

	// TLS is what the cluster's certificates are: the Secret of the users' client certificate and when
	// the certificates expire. Empty for a cluster without TLS.
	// +optional
	TLS *TLSStatus `json:"tls,omitempty"`

	// Auth is whether etcd authentication is on and which Secret holds the root password; empty for a
	// cluster whose spec does not ask for authentication.
	// +optional
	Auth *AuthStatus `json:"auth,omitempty"`

	// Maintenance is the state of spec.maintenance: the defragmentations under way and the last one.
	// +optional
	Maintenance *MaintenanceStatus `json:"maintenance,omitempty"`
}

// MaintenanceStatus is the state of spec.maintenance.
type MaintenanceStatus struct {
	// LastScheduleTime is the newest schedule time of spec.maintenance.defragmentation.schedule the
	// operator acted on.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// PendingDefragmentation names the members still to be defragmented, in the order they will be.
	// +optional
	PendingDefragmentation []string `json:"pendingDefragmentation,omitempty"`
	// LastDefragmentation is the newest defragmentation of a member.
	// +optional
	LastDefragmentation *DefragmentationRecord `json:"lastDefragmentation,omitempty"`
	// RequestedDefragmentation is the value of the etcd.etcdkit.dev/defragment annotation whose
	// request is under way: pendingDefragmentation names the members still to defragment for it. Empty
	// when none is.
	// +optional
	RequestedDefragmentation string `json:"requestedDefragmentation,omitempty"`
}

// DefragmentationRecord is one member's defragmentation.
type DefragmentationRecord struct {
	// Member is the member's name.
	Member string `json:"member"`
	// Time is when it ended.
	Time metav1.Time `json:"time"`
	// DurationMillis is how long etcd took, in milliseconds.
	DurationMillis int64 `json:"durationMillis"`
	// DBSizeBeforeBytes and DBSizeAfterBytes are the member's database file size before and after, in
	// bytes, as etcd reported them.
	DBSizeBeforeBytes int64 `json:"dbSizeBeforeBytes"`
	DBSizeAfterBytes  int64 `json:"dbSizeAfterBytes"`
}

// EtcdCluster is an etcd cluster run by the operator: one pod and one PersistentVolumeClaim per member,
// a headless peer Service and a client Service.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:validation:XValidation:rule="!has(self.spec.version) || !has(oldSelf.spec.version) || !self.spec.version.matches('^3[.](5|6)[.](0|[1-9][0-9]*)$') || !oldSelf.spec.version.matches('^3[.](5|6)[.](0|[1-9][0-9]*)$') || int(self.spec.version.split('.')[1]) >= int(oldSelf.spec.version.split('.')[1]) || (has(self.status) && has(self.status.currentVersion) && self.status.currentVersion.matches('^v?3[.](5|6)[.]') && self.status.currentVersion.split('.')[1] == self.spec.version.split('.')[1])",message="spec.version cannot be downgraded to an older minor: etcd supports upgrades only (a newer patch, or the next minor); only a change back to the minor every member still runs (status.currentVersion) is allowed"
// +kubebuilder:validation:XValidation:rule="has(self.spec.bootstrap) == has(oldSelf.spec.bootstrap)",message="spec.bootstrap cannot be added or removed after creation"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 50",fieldPath=".metadata",message="metadata.name must be a DNS-1035 label of at most 50 characters (lower case letters, digits and '-', starting with a letter): it names the member pods, their DNS names and the Services"
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=etcd;etcds,categories=all
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.currentVersion`
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.leader`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].reason`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Progressing")].message`
// +kubebuilder:printcolumn:name="Last Backup",type=date,priority=1,JSONPath=`.status.lastBackup.completionTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec EtcdClusterSpec `json:"spec,omitempty"`
	// +optional
	Status EtcdClusterStatus `json:"status,omitempty"`
}

// EtcdClusterList is a list of EtcdClusters.
//
// +kubebuilder:object:root=true
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdCluster{}, &EtcdClusterList{})
}
