package v1beta1

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/version"
)

// ValidateRestore checks a new cluster's spec.bootstrap.restore.backupRef against the EtcdBackup it
// names (nil when it does not exist): a failed backup, or a snapshot from a newer etcd minor than
// spec.version, cannot be restored. A backup that does not exist yet or has not finished is allowed
// with a warning: the cluster waits for it.
func ValidateRestore(c *etcdv1beta1.EtcdCluster, b *etcdv1beta1.EtcdBackup) (field.ErrorList, admission.Warnings) {
	if c.Spec.Bootstrap == nil || c.Spec.Bootstrap.Restore == nil || c.Spec.Bootstrap.Restore.BackupRef == nil {
		return nil, nil
	}
	p := field.NewPath("spec", "bootstrap", "restore", "backupRef", "name")
	name := c.Spec.Bootstrap.Restore.BackupRef.Name
	switch {
	case b == nil:
		return nil, admission.Warnings{fmt.Sprintf("EtcdBackup %s does not exist yet: the cluster waits for it to succeed before creating members", name)}
	case b.Status.Phase == etcdv1beta1.BackupFailed:
		return field.ErrorList{field.Invalid(p, name, fmt.Sprintf("EtcdBackup %s failed (%s); restore a backup that succeeded", name, b.Status.Message))}, nil
	case b.Status.Phase != etcdv1beta1.BackupSucceeded:
		return nil, admission.Warnings{fmt.Sprintf("EtcdBackup %s has not succeeded yet (phase %q): the cluster waits for it before creating members", name, b.Status.Phase)}
	}
	if err := version.CheckRestore(b.Status.EtcdVersion, specVersion(&c.Spec)); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "version"), c.Spec.Version,
			fmt.Sprintf("EtcdBackup %s: %v; set spec.version to %s or later", name, err, b.Status.EtcdVersion))}, nil
	}
	return nil, nil
}

// validateRestoreSource checks the key of spec.bootstrap.restore.source, as the CRD's schema does: the
// snapshot is looked up by this key inside the destination, so it is a relative path without empty,
// "." or ".." segments (which would name something else, or nothing, and leave the new cluster waiting
// for a snapshot it cannot read), and without control characters.
func validateRestoreSource(b *etcdv1beta1.BootstrapSpec) field.ErrorList {
	if b == nil || b.Restore == nil || b.Restore.Source == nil {
		return nil
	}
	p := specPath.Child("bootstrap", "restore", "source", "key")
	key := b.Restore.Source.Key
	var errs field.ErrorList
	if slices.ContainsFunc(strings.Split(key, "/"), func(e string) bool { return e == "" || e == "." || e == ".." }) {
		errs = append(errs, field.Invalid(p, key, `must be a relative path such as "apps/demo/nightly-1.db", as an EtcdBackup's status.key reports it: no leading or trailing '/', no empty, '.' or '..' segment (the snapshot is looked up inside the destination, never outside it)`))
	}
	if strings.IndexFunc(key, unicode.IsControl) >= 0 {
		errs = append(errs, field.Invalid(p, key, "must not contain control characters such as a newline or tab"))
	}
	return errs
}

// lookupBackup returns the EtcdBackup a new cluster restores, nil when it names none or it does not
// exist.
func lookupBackup(ctx context.Context, r client.Reader, c *etcdv1beta1.EtcdCluster) (*etcdv1beta1.EtcdBackup, error) {
	// An empty name (admitted by v1alpha1's schema, not v1beta1's) names no backup: the schema of the
	// request's version reports it, or the cluster waits for it.
	if r == nil || c.Spec.Bootstrap == nil || c.Spec.Bootstrap.Restore == nil || c.Spec.Bootstrap.Restore.BackupRef == nil ||
		c.Spec.Bootstrap.Restore.BackupRef.Name == "" {
		return nil, nil
	}
	b := &etcdv1beta1.EtcdBackup{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.Bootstrap.Restore.BackupRef.Name}, b)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read EtcdBackup %s: %w", c.Spec.Bootstrap.Restore.BackupRef.Name, err)
	}
	return b, nil
}
