package testutil

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// ClusterOption changes an EtcdCluster that EtcdCluster builds.
type ClusterOption func(*etcdv1beta1.EtcdCluster)

// EtcdCluster returns an EtcdCluster named name with opts applied in order. Without options its
// spec is empty: the API server defaults it, pure code sees it as written.
func EtcdCluster(name string, opts ...ClusterOption) *etcdv1beta1.EtcdCluster {
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// InNamespace puts the cluster in namespace ns.
func InNamespace(ns string) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) { c.Namespace = ns }
}

// WithUID sets the cluster's UID, as the API server would.
func WithUID(uid types.UID) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) { c.UID = uid }
}

// WithLabels sets the cluster's labels from key, value pairs.
func WithLabels(kv ...string) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) { c.Labels = pairs(kv) }
}

// WithReplicas sets spec.replicas.
func WithReplicas(n int32) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) { c.Spec.Replicas = ptr.To(n) }
}

// WithVersion sets spec.version.
func WithVersion(v string) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = v }
}

// WithImage sets spec.image.
func WithImage(image string) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) { c.Spec.Image = image }
}

// WithStorageSize sets spec.storage.size to the quantity q; "" removes it.
func WithStorageSize(q string) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Storage.Size = nil
		if q != "" {
			c.Spec.Storage.Size = ptr.To(resource.MustParse(q))
		}
	}
}

// WithStorageClass sets spec.storage.storageClassName; "" removes it.
func WithStorageClass(name string) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Storage.StorageClassName = nil
		if name != "" {
			c.Spec.Storage.StorageClassName = ptr.To(name)
		}
	}
}

// WithEmptyDir gives the members emptyDir volumes instead of claims (and removes spec.storage.size).
func WithEmptyDir() ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Storage.Size = nil
		c.Spec.Storage.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
}

// WithRetainPolicy sets spec.storage.retainPolicy.
func WithRetainPolicy(p etcdv1beta1.RetainPolicy) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.RetainPolicy = p }
}

// WithRestoreOnQuorumLoss sets spec.recovery.restoreOnQuorumLoss.
func WithRestoreOnQuorumLoss(on bool) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Recovery = &etcdv1beta1.RecoverySpec{RestoreOnQuorumLoss: on}
	}
}

// WithOptions changes spec.options (created empty when missing) with mut.
func WithOptions(mut func(*etcdv1beta1.EtcdOptions)) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		if c.Spec.Options == nil {
			c.Spec.Options = &etcdv1beta1.EtcdOptions{}
		}
		mut(c.Spec.Options)
	}
}

// WithQuota sets spec.options.quotaBackendBytes to the quantity q.
func WithQuota(q string) ClusterOption {
	return WithOptions(func(o *etcdv1beta1.EtcdOptions) { o.QuotaBackendBytes = ptr.To(resource.MustParse(q)) })
}

// WithRestoreFrom bootstraps the cluster from the EtcdBackup named backup.
func WithRestoreFrom(backup string) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Bootstrap = &etcdv1beta1.BootstrapSpec{
			Restore: &etcdv1beta1.RestoreSpec{BackupRef: &etcdv1beta1.LocalObjectReference{Name: backup}},
		}
	}
}

// WithCurrentVersion sets status.currentVersion, the version the members report.
func WithCurrentVersion(v string) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) { c.Status.CurrentVersion = v }
}

// pairs makes a map of key, value pairs.
func pairs(kv []string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// WithAuth sets spec.auth: enabled, with rootSecretRef naming secret unless it is "" (the operator's
// generated Secret).
func WithAuth(enabled bool, secret string) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Auth = &etcdv1beta1.AuthSpec{Enabled: enabled}
		if secret != "" {
			c.Spec.Auth.RootSecretRef = &etcdv1beta1.LocalObjectReference{Name: secret}
		}
	}
}

// WithTLS sets spec.tls: client and peer ports on or off.
func WithTLS(client, peer bool) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.TLS = &etcdv1beta1.TLSSpec{Client: &etcdv1beta1.TLSListenerSpec{Enabled: client}, Peer: &etcdv1beta1.TLSListenerSpec{Enabled: peer}}
	}
}

// PlainTextMemberSpec returns the spec of a member pod whose etcd container serves both ports in plain
// text (as a member of a cluster without spec.tls does), with args appended to its command.
func PlainTextMemberSpec(args ...string) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Command: append([]string{"/usr/local/bin/etcd",
		"--listen-peer-urls=http://0.0.0.0:2380", "--listen-client-urls=http://0.0.0.0:2379"}, args...)}}}
}

// WithTLSSecrets sets spec.tls.secrets (spec.tls must be set first, WithTLS).
func WithTLSSecrets(server, peer, client string) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.TLS.Secrets = &etcdv1beta1.TLSSecrets{Server: server, Peer: peer, Client: client}
	}
}

// WithIssuer sets spec.tls.issuerRef to the Issuer (kind "" or Issuer) or ClusterIssuer name (spec.tls
// must be set first, WithTLS).
func WithIssuer(name, kind string) ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.TLS.IssuerRef = &etcdv1beta1.IssuerReference{Name: name, Kind: kind}
	}
}
