// Package resources builds the Kubernetes objects of an etcd cluster (member pods, their claims, the
// peer and client Services, the PodDisruptionBudget, backup Jobs) as pure functions of the EtcdCluster
// and the operator's settings. Nothing here talks to the API server or to etcd.
//
// One file per kind of object: pod.go (member pods: the etcd container, its flags, probes, security
// contexts, affinity), pvc.go (member claims and the data volume), service.go, pdb.go, backup.go
// (backup and delete Jobs) and restore.go (the restore init container). names.go holds the names, URLs,
// labels and owner reference every builder shares; member.go what a member is started with (Member,
// SpecHash, the quota).
package resources

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// Ports etcd listens on in every member pod.
const (
	ClientPort  = 2379
	PeerPort    = 2380
	MetricsPort = 2381
)

// DataMountPath is where a member's volume is mounted; etcd's data directory is DataDir inside it, so
// that a filesystem's lost+found never sits in the data directory itself.
const (
	DataMountPath = "/var/lib/etcd"
	DataDir       = DataMountPath + "/data"
)

// DefaultImageRepository is the official etcd image repository; the tag is "v" + spec.version.
const DefaultImageRepository = "gcr.io/etcd-development/etcd"

// Options are the operator-wide settings the builders need.
type Options struct {
	// ClusterDomain is the cluster's DNS domain (default "cluster.local").
	ClusterDomain string
	// ImageRepository is the repository of etcd images (default DefaultImageRepository).
	ImageRepository string
	// OperatorImage is the operator's own image, which backup Jobs and restore init containers run
	// (its entrypoint is the etcd-operator binary).
	OperatorImage string
	// OperatorImagePullPolicy is the pull policy of OperatorImage in those pods (empty: Kubernetes'
	// default for the tag).
	OperatorImagePullPolicy string
	// OperatorNamespace and OperatorPodLabels select the operator's own pods, which a cluster's
	// NetworkPolicy lets reach the client port; empty when the operator does not know its pod.
	OperatorNamespace string
	OperatorPodLabels map[string]string
	// TLSSwitchGrace is how long every member's client port serves both http:// and https:// while
	// spec.tls.client.enabled is switched for a running cluster, for clients to move to the new
	// scheme (zero: model.DefaultTLSSwitchGrace, 2 minutes).
	TLSSwitchGrace time.Duration
	// CARotationDwell is how long each phase of a CA rotation (of the operator's CA, or of a
	// cert-manager issuer's) lasts at least, for clients that mount the client Secret to load it (zero:
	// certs.CARotationDwell, 2 minutes).
	CARotationDwell time.Duration
	// AwaitAdd creates a joining member's claim and pod before the member is added to etcd; the pod
	// holds etcd back until etcd lists the member (Member.AwaitAdd). It needs OperatorImage. Off when
	// false: the member is added first, then its pod is created.
	AwaitAdd bool
}

func (o Options) clusterDomain() string {
	if o.ClusterDomain == "" {
		return "cluster.local"
	}
	return o.ClusterDomain
}

// Image returns the etcd image a cluster's members run: spec.image, or the repository tagged
// "v<version>".
func (o Options) Image(c *etcdv1beta1.EtcdCluster) string {
	if c.Spec.Image != "" {
		return c.Spec.Image
	}
	repo := o.ImageRepository
	if repo == "" {
		repo = DefaultImageRepository
	}
	return repo + ":v" + c.Spec.VersionOrDefault()
}

// PeerServiceName is the name of the headless Service that gives each member a DNS name.
func PeerServiceName(c *etcdv1beta1.EtcdCluster) string { return c.Name + "-peer" }

// ClientServiceName is the name of the ClusterIP Service clients use (port 2379).
func ClientServiceName(c *etcdv1beta1.EtcdCluster) string { return c.Name + "-client" }

// MemberName is the name of member number ordinal: its pod and its etcd member name, "<cluster>-<ordinal>".
func MemberName(c *etcdv1beta1.EtcdCluster, ordinal int) string {
	return c.Name + "-" + strconv.Itoa(ordinal)
}

// Merged returns dst with every entry of src added (a new map when dst is nil and src is not empty).
func Merged(dst, src map[string]string) map[string]string {
	if dst == nil && len(src) > 0 {
		dst = make(map[string]string, len(src))
	}
	maps.Copy(dst, src)
	return dst
}

// InitialMemberNames returns the names of the members a new cluster c bootstraps with: ordinals 0 to
// spec.replicas-1.
func InitialMemberNames(c *etcdv1beta1.EtcdCluster) []string {
	names := make([]string, c.Spec.ReplicasOrDefault())
	for i := range names {
		names[i] = MemberName(c, i)
	}
	return names
}

// MemberOrdinal returns the ordinal of a member name of cluster c, or false when name is not one.
func MemberOrdinal(c *etcdv1beta1.EtcdCluster, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, c.Name+"-")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// PVCName is the name of a member's PersistentVolumeClaim.
func PVCName(member string) string { return "data-" + member }

// PeerURL is the URL a member advertises to its peers:
// https://<member>.<cluster>-peer.<namespace>.svc.<domain>:2380 (http:// without peer TLS). Fully
// qualified, so that it resolves the same way from every pod whatever its search path.
func (o Options) PeerURL(c *etcdv1beta1.EtcdCluster, member string) string {
	return o.PeerURLScheme(c, member, c.Spec.PeerTLS())
}

// PeerURLScheme is PeerURL with https:// when https is true, http:// otherwise, whatever the spec says:
// the URL of a member whose peer port is being switched.
func (o Options) PeerURLScheme(c *etcdv1beta1.EtcdCluster, member string, https bool) string {
	return fmt.Sprintf("%s://%s:%d", scheme(https), o.memberHost(c, member), PeerPort)
}

// ClientURL is the URL a member advertises to clients (port 2379; https:// with client TLS).
func (o Options) ClientURL(c *etcdv1beta1.EtcdCluster, member string) string {
	return fmt.Sprintf("%s://%s:%d", scheme(c.Spec.ClientTLS()), o.memberHost(c, member), ClientPort)
}

func (o Options) memberHost(c *etcdv1beta1.EtcdCluster, member string) string {
	return fmt.Sprintf("%s.%s.%s.svc.%s", member, PeerServiceName(c), c.Namespace, o.clusterDomain())
}

// ClientServiceURL is the in-cluster URL of the client Service.
func (o Options) ClientServiceURL(c *etcdv1beta1.EtcdCluster) string {
	return fmt.Sprintf("%s://%s.%s.svc.%s:%d", scheme(c.Spec.ClientTLS()), ClientServiceName(c), c.Namespace, o.clusterDomain(), ClientPort)
}

// Labels are the labels of every object of cluster c; SelectorLabels select its member pods.
func Labels(c *etcdv1beta1.EtcdCluster) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "etcd",
		"app.kubernetes.io/instance":   c.Name,
		"app.kubernetes.io/managed-by": "etcd-operator",
		etcdv1beta1.LabelCluster:       c.Name,
	}
}

// SelectorLabels select the member pods of cluster c.
func SelectorLabels(c *etcdv1beta1.EtcdCluster) map[string]string {
	return map[string]string{etcdv1beta1.LabelCluster: c.Name, "app.kubernetes.io/name": "etcd"}
}

// MemberLabels are the labels of one member's pod and claim.
func MemberLabels(c *etcdv1beta1.EtcdCluster, member string) map[string]string {
	l := Labels(c)
	l[etcdv1beta1.LabelMember] = member
	return l
}

// OwnerReference makes cluster c the controller of an object.
func OwnerReference(c *etcdv1beta1.EtcdCluster) metav1.OwnerReference {
	return *metav1.NewControllerRef(c, etcdv1beta1.GroupVersion.WithKind("EtcdCluster"))
}

// InitialCluster formats etcd's --initial-cluster for the given member names: "name=peerURL,...".
func (o Options) InitialCluster(c *etcdv1beta1.EtcdCluster, members []string) string {
	parts := make([]string, 0, len(members))
	for _, m := range members {
		parts = append(parts, m+"="+o.PeerURL(c, m))
	}
	return strings.Join(parts, ",")
}

// ownedMeta is the metadata of an object named name that cluster c owns, in c's namespace, with c's
// labels.
func ownedMeta(c *etcdv1beta1.EtcdCluster, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: Labels(c),
		OwnerReferences: []metav1.OwnerReference{OwnerReference(c)}}
}
