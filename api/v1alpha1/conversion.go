package v1alpha1

import (
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// v1alpha1 and v1beta1 encode the same fields the same way, except spec.options.autoCompactionMode,
// which v1alpha1 spells as etcd's flag does ("periodic", "revision") and v1beta1 as an enum of the
// Kubernetes API conventions ("Periodic", "Revision"). So an object converts by copying its metadata,
// re-encoding its spec and status, and mapping that one field. Both directions are lossless for every
// object the schemas admit (TestRoundTrip).

// ConvertTo converts c to the hub version, v1beta1 (controller-runtime's conversion.Convertible).
func (c *EtcdCluster) ConvertTo(hub conversion.Hub) error {
	dst, ok := hub.(*etcdv1beta1.EtcdCluster)
	if !ok {
		return fmt.Errorf("convert EtcdCluster v1alpha1 to %T: want *etcdv1beta1.EtcdCluster", hub)
	}
	c.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Spec, dst.Status = etcdv1beta1.EtcdClusterSpec{}, etcdv1beta1.EtcdClusterStatus{}
	if err := recode(c.Spec, &dst.Spec); err != nil {
		return fmt.Errorf("convert the spec of EtcdCluster %s/%s to v1beta1: %w", c.Namespace, c.Name, err)
	}
	if err := recode(c.Status, &dst.Status); err != nil {
		return fmt.Errorf("convert the status of EtcdCluster %s/%s to v1beta1: %w", c.Namespace, c.Name, err)
	}
	if o := dst.Spec.Options; o != nil {
		o.AutoCompactionMode = betaCompactionMode(o.AutoCompactionMode)
	}
	return nil
}

// ConvertFrom sets c from the hub version, v1beta1 (controller-runtime's conversion.Convertible).
func (c *EtcdCluster) ConvertFrom(hub conversion.Hub) error {
	src, ok := hub.(*etcdv1beta1.EtcdCluster)
	if !ok {
		return fmt.Errorf("convert %T to EtcdCluster v1alpha1: want *etcdv1beta1.EtcdCluster", hub)
	}
	src.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Spec, c.Status = EtcdClusterSpec{}, EtcdClusterStatus{}
	if err := recode(src.Spec, &c.Spec); err != nil {
		return fmt.Errorf("convert the spec of EtcdCluster %s/%s to v1alpha1: %w", src.Namespace, src.Name, err)
	}
	if err := recode(src.Status, &c.Status); err != nil {
		return fmt.Errorf("convert the status of EtcdCluster %s/%s to v1alpha1: %w", src.Namespace, src.Name, err)
	}
	if o := c.Spec.Options; o != nil {
		o.AutoCompactionMode = alphaCompactionMode(o.AutoCompactionMode)
	}
	return nil
}

// ConvertTo converts b to the hub version, v1beta1: the two versions of EtcdBackup are the same.
func (b *EtcdBackup) ConvertTo(hub conversion.Hub) error {
	dst, ok := hub.(*etcdv1beta1.EtcdBackup)
	if !ok {
		return fmt.Errorf("convert EtcdBackup v1alpha1 to %T: want *etcdv1beta1.EtcdBackup", hub)
	}
	b.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Spec, dst.Status = etcdv1beta1.EtcdBackupSpec{}, etcdv1beta1.EtcdBackupStatus{}
	if err := recode(b.Spec, &dst.Spec); err != nil {
		return fmt.Errorf("convert the spec of EtcdBackup %s/%s to v1beta1: %w", b.Namespace, b.Name, err)
	}
	if err := recode(b.Status, &dst.Status); err != nil {
		return fmt.Errorf("convert the status of EtcdBackup %s/%s to v1beta1: %w", b.Namespace, b.Name, err)
	}
	return nil
}

// ConvertFrom sets b from the hub version, etcdv1beta1.
func (b *EtcdBackup) ConvertFrom(hub conversion.Hub) error {
	src, ok := hub.(*etcdv1beta1.EtcdBackup)
	if !ok {
		return fmt.Errorf("convert %T to EtcdBackup v1alpha1: want *etcdv1beta1.EtcdBackup", hub)
	}
	src.ObjectMeta.DeepCopyInto(&b.ObjectMeta)
	b.Spec, b.Status = EtcdBackupSpec{}, EtcdBackupStatus{}
	if err := recode(src.Spec, &b.Spec); err != nil {
		return fmt.Errorf("convert the spec of EtcdBackup %s/%s to v1alpha1: %w", src.Namespace, src.Name, err)
	}
	if err := recode(src.Status, &b.Status); err != nil {
		return fmt.Errorf("convert the status of EtcdBackup %s/%s to v1alpha1: %w", src.Namespace, src.Name, err)
	}
	return nil
}

// recode sets *dst from the JSON encoding of src: the fields of one version into the same fields of
// the other.
func recode(src, dst any) error {
	b, err := json.Marshal(src)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}

// betaCompactionMode maps v1alpha1's "periodic" and "revision" to v1beta1's enum; any other value
// (the schema admits none) is kept as it is.
func betaCompactionMode(m etcdv1beta1.AutoCompactionMode) etcdv1beta1.AutoCompactionMode {
	switch AutoCompactionMode(m) {
	case "periodic":
		return etcdv1beta1.AutoCompactionPeriodic
	case "revision":
		return etcdv1beta1.AutoCompactionRevision
	}
	return m
}

// alphaCompactionMode maps v1beta1's "Periodic" and "Revision" to v1alpha1's "periodic" and
// "revision"; any other value (the schema admits none) is kept as it is.
func alphaCompactionMode(m AutoCompactionMode) AutoCompactionMode {
	switch etcdv1beta1.AutoCompactionMode(m) {
	case etcdv1beta1.AutoCompactionPeriodic, etcdv1beta1.AutoCompactionRevision:
		return AutoCompactionMode(strings.ToLower(string(m)))
	}
	return m
}
