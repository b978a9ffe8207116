package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// Initial cluster states of a member, as etcd's --initial-cluster-state takes them.
const (
	StateNew      = "new"
	StateExisting = "existing"
)

// Member is how one member is to be started: its name and the --initial-cluster flags its data
// directory is created with. etcd reads the initial-cluster flags only when the data directory is
// empty; a member restarted on its own data ignores them.
type Member struct {
	// Name is the member's name and its pod's name.
	Name string
	// InitialClusterState is StateNew for members of the initial bootstrap and StateExisting for a
	// member added to a running cluster.
	InitialClusterState string
	// InitialCluster is the --initial-cluster value: "name=peerURL,..." of every member the new member
	// must know, itself included.
	InitialCluster string
	// Restore, for a member of the initial bootstrap of a cluster created from a backup, is the
	// snapshot its data directory is restored from by an init container before etcd first starts.
	Restore *RestorePlan
	// ExpectMemberID and ExpectClusterID, in hex, are the identity recorded on the member's claim when
	// it first started on it: when both are set (and the operator's image is known), an init container
	// checks that the data directory still belongs to them before etcd starts.
	ExpectMemberID, ExpectClusterID string
	// TLS is how the member's pod serves TLS; nil: as cluster's spec says once no switch is under way
	// (SpecTLS).
	TLS *PodTLS
	// AwaitAdd, for a member joining a running cluster (StateExisting), makes an init container wait
	// until etcd lists the member (`etcd-operator await-add`) before etcd starts: the pod is created
	// before the member is added to etcd (needs the operator's image; see AwaitAddContainerName).
	AwaitAdd bool
	// AwaitPeers are the peer URLs the AwaitAdd init container asks for the member list: those of the
	// members etcd lists when the pod is created, never of members still to be added (their names do
	// not resolve yet, and asking would make the DNS server cache "no such host" for them). Empty: every
	// other member of InitialCluster.
	AwaitPeers []string
	// AwaitPeerAddresses, for an initial member of a new cluster of more than one member, makes an init
	// container wait until the operator marks the pod with AnnotationPeersAddressed, which it does once
	// every initial member's pod has its address (needs the operator's image; see
	// AwaitPeersContainerName).
	AwaitPeerAddresses bool
}

// PodTLS is how member m's pod serves TLS in cluster c: m.TLS, or SpecTLS.
func (m Member) PodTLS(c *etcdv1beta1.EtcdCluster) PodTLS {
	if m.TLS != nil {
		return *m.TLS
	}
	return SpecTLS(c)
}

// SpecHash returns a short hash of the spec fields a member pod is built from (the etcd image, which
// the version selects, and spec.podTemplate and spec.options as PodTemplateKey and OptionsKey encode
// them) and, once the cluster's CA has been rotated, of the CA certificates the members trust
// (status.tls.trustedCAsHash, while the spec asks for TLS: etcd reads its trusted CA files only when
// it starts), and the names of the Secrets of spec.tls.secrets.
// A member pod whose etcd.etcdkit.dev/spec-hash annotation differs runs an old spec and is rolled.
// Fields that only matter when a member is created (storage) and the operator's own defaults are not
// part of it, so that an operator upgrade does not restart etcd.
func (o Options) SpecHash(c *etcdv1beta1.EtcdCluster) string {
	return o.specHash(c, PodTemplateKey(c.Spec.PodTemplate), OptionsKey(c.Spec.Options))
}

// specHash is SpecHash with spec.podTemplate encoded as template and spec.options as options.
func (o Options) specHash(c *etcdv1beta1.EtcdCluster, template, options json.RawMessage) string {
	var trusted string
	if c.Status.TLS != nil && c.Spec.AnyTLS() {
		trusted = c.Status.TLS.TrustedCAsHash
	}
	var secrets *etcdv1beta1.TLSSecrets
	if c.Spec.UserTLSSecrets() {
		secrets = c.Spec.TLS.Secrets
	}
	b, _ := json.Marshal(struct {
		Image       string                  `json:"image"`
		PodTemplate json.RawMessage         `json:"podTemplate,omitempty"`
		Options     json.RawMessage         `json:"options,omitempty"`
		TrustedCAs  string                  `json:"trustedCAs,omitempty"`
		TLSSecrets  *etcdv1beta1.TLSSecrets `json:"tlsSecrets,omitempty"`
	}{o.Image(c), template, options, trusted, secrets})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:5])
}

// EmptySpecHash returns the hash that the operator gave the pods of c before it hashed
// spec.podTemplate and spec.options through PodTemplateKey and OptionsKey, when that hash differs from
// SpecHash(c) only because one of them is present but empty ({}, or only empty maps and lists), and
// "" otherwise: it hashed an empty one apart from an absent one, although the pods are built alike. A
// pod that carries it was built from c's current spec, and only its annotation is out of date. There
// is none for a template with topologySpreadConstraints: [], which it hashed as if the list were
// absent: such a pod may have been built with the default spread.
func (o Options) EmptySpecHash(c *etcdv1beta1.EtcdCluster) string {
	t, opts := c.Spec.PodTemplate, c.Spec.Options
	if t != nil && t.TopologySpreadConstraints != nil && len(t.TopologySpreadConstraints) == 0 {
		return ""
	}
	template, options := PodTemplateKey(t), OptionsKey(opts)
	if t != nil && template == nil {
		template = json.RawMessage("{}")
	}
	if opts != nil && options == nil {
		options = json.RawMessage("{}")
	}
	if old := o.specHash(c, template, options); old != o.SpecHash(c) {
		return old
	}
	return ""
}

// OptionsKey returns what the member pods take from options, as compact JSON: their own encoding,
// with autoCompactionMode as etcd's flag value (as v1alpha1 encoded it, so that members started by an
// operator of v1alpha1 are not rolled when it is upgraded); nil when they build the same pods as no
// options at all (nil, {}, or only empty maps).
func OptionsKey(options *etcdv1beta1.EtcdOptions) json.RawMessage {
	if options == nil {
		return nil
	}
	if options.AutoCompactionMode != "" {
		options = options.DeepCopy()
		options.AutoCompactionMode = etcdv1beta1.AutoCompactionMode(options.AutoCompactionMode.Flag())
	}
	b, _ := json.Marshal(options)
	if string(b) == "{}" {
		return nil
	}
	return b
}

// PodTemplateKey returns what the member pods take from template t, as compact JSON: t's own encoding
// (so that a template that builds other pods than no template keeps the hash it had), with
// "noTopologySpread": true added for topologySpreadConstraints: [] (no constraint, where
// an absent list gives the default spread over zones); nil when t builds the same pods as no template
// at all (nil, {}, or only empty maps and lists, such as a template whose every field the API server
// pruned as unknown). SpecHash and admission's list of the changes that roll the members both compare
// templates through it.
func PodTemplateKey(t *etcdv1beta1.PodTemplate) json.RawMessage {
	if t == nil {
		return nil
	}
	b, _ := json.Marshal(struct {
		*etcdv1beta1.PodTemplate
		NoTopologySpread bool `json:"noTopologySpread,omitempty"`
	}{t, t.TopologySpreadConstraints != nil && len(t.TopologySpreadConstraints) == 0})
	if string(b) == "{}" {
		return nil
	}
	return b
}

// DefaultQuotaBackendBytes is etcd's own --quota-backend-bytes default, 2 GiB.
const DefaultQuotaBackendBytes int64 = 2 << 30

// QuotaBackendBytes returns the database size quota, in bytes, the members of cluster c run with:
// spec.options.quotaBackendBytes, or etcd's default.
func QuotaBackendBytes(c *etcdv1beta1.EtcdCluster) int64 {
	if o := c.Spec.Options; o != nil && o.QuotaBackendBytes != nil {
		return o.QuotaBackendBytes.Value()
	}
	return DefaultQuotaBackendBytes
}
