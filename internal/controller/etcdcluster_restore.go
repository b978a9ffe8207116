package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// +kubebuilder:rbac:groups=etcd.etcdkit.dev,resources=etcdbackups,verbs=get;list;watch

// restorePlan returns the snapshot the initial members of a cluster restore: the one
// spec.bootstrap.restore names, or, during an automatic restore after a quorum loss, the one
// status.recovery names; nil when the cluster is not restored from one. While it cannot be resolved it
// returns nil and the step that waits (and reports an invalid spec in the Valid condition); once the
// cluster has formed, an unresolvable spec.bootstrap.restore (the EtcdBackup was deleted since) is nil
// without a step: the members' data was restored when they first started.
func (r *EtcdClusterReconciler) restorePlan(ctx context.Context, s *scope) (*resources.RestorePlan, *verdict.Step, error) {
	c := s.cluster
	if s.restore != nil {
		return s.restore, nil, nil
	}
	var plan *resources.RestorePlan
	switch {
	case c.Status.Recovery != nil && c.Status.Recovery.Phase != etcdv1beta1.RecoveryDeleting:
		// the cluster's newest bootstrap: the automatic restore (or a member of it that never started)
		p, wait := verdict.RecoveryPlan(c)
		if wait != nil {
			return nil, wait, nil
		}
		plan = p
	case c.Spec.Bootstrap != nil && c.Spec.Bootstrap.Restore != nil:
		p, wait, err := r.resolveRestore(ctx, c)
		if err != nil {
			return nil, nil, err
		}
		if wait != nil {
			if s.m.Formed() {
				return nil, nil, nil
			}
			if wait.Reason == etcdv1beta1.ReasonInvalidSpec {
				s.report.Invalid = wait
				return nil, verdict.Blocked(wait.Reason, wait.Message), nil
			}
			return nil, verdict.Acting(wait.Reason, wait.Message), nil
		}
		plan = p
	default:
		return nil, nil, nil
	}
	if r.Options.OperatorImage == "" {
		return nil, verdict.Blocked(etcdv1beta1.ReasonInvalidSpec,
			"The operator does not know its own image, which restores run: start it with --operator-image, or with POD_NAME and POD_NAMESPACE set"), nil
	}
	s.restore = plan
	return plan, nil, nil
}

// resolveRestore reads spec.bootstrap.restore: the snapshot's destination, key and sha256. It returns
// why it cannot (yet) as a progress: ReasonInvalidSpec when the user must change something.
func (r *EtcdClusterReconciler) resolveRestore(ctx context.Context, c *etcdv1beta1.EtcdCluster) (*resources.RestorePlan, *verdict.Progress, error) {
	rs := c.Spec.Bootstrap.Restore
	if src := rs.Source; src != nil {
		return &resources.RestorePlan{Destination: src.Destination, Key: src.Key, SHA256: src.SHA256}, nil, nil
	}
	b := &etcdv1beta1.EtcdBackup{}
	err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: rs.BackupRef.Name}, b)
	if apierrors.IsNotFound(err) {
		return nil, &verdict.Progress{Reason: etcdv1beta1.ReasonInvalidSpec, Message: fmt.Sprintf(
			"spec.bootstrap.restore.backupRef: EtcdBackup %s not found in namespace %s; create it, or delete this EtcdCluster and create it again naming an existing backup (spec.bootstrap cannot change)", rs.BackupRef.Name, c.Namespace)}, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("get etcdbackup %s: %w", rs.BackupRef.Name, err)
	}
	switch b.Status.Phase {
	case etcdv1beta1.BackupSucceeded:
	case etcdv1beta1.BackupFailed:
		return nil, &verdict.Progress{Reason: etcdv1beta1.ReasonInvalidSpec, Message: fmt.Sprintf(
			"spec.bootstrap.restore.backupRef: EtcdBackup %s failed (%s); delete this EtcdCluster and create it again naming a backup that succeeded (spec.bootstrap cannot change)", b.Name, b.Status.Message)}, nil
	default:
		return nil, &verdict.Progress{Reason: etcdv1beta1.ReasonWaiting, Message: fmt.Sprintf("Waiting for EtcdBackup %s to succeed before restoring it (phase %q)", b.Name, b.Status.Phase)}, nil
	}
	if msg := verdict.SnapshotVersionProblem(b.Status.EtcdVersion, c.Spec.VersionOrDefault()); msg != "" {
		return nil, &verdict.Progress{Reason: etcdv1beta1.ReasonInvalidSpec, Message: fmt.Sprintf("spec.bootstrap.restore.backupRef: EtcdBackup %s: %s", b.Name, msg)}, nil
	}
	dest := b.Spec.Destination
	if dest == nil {
		src := &etcdv1beta1.EtcdCluster{}
		err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: b.Spec.ClusterRef.Name}, src)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("get etcdcluster %s: %w", b.Spec.ClusterRef.Name, err)
		}
		if err != nil || src.Spec.Backup == nil {
			return nil, &verdict.Progress{Reason: etcdv1beta1.ReasonInvalidSpec, Message: fmt.Sprintf(
				"spec.bootstrap.restore.backupRef: EtcdBackup %s names no destination and its cluster %s no longer says where backups go; delete this EtcdCluster and create it again with bootstrap.restore.source (key %s)",
				b.Name, b.Spec.ClusterRef.Name, b.Status.Key)}, nil
		}
		dest = &src.Spec.Backup.Destination
	}
	return &resources.RestorePlan{Destination: *dest, Key: b.Status.Key, SHA256: b.Status.SHA256}, nil, nil
}
