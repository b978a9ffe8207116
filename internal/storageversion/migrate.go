// Package storageversion moves the operator's stored objects to the storage version of their CRDs,
// v1beta1: after an upgrade from an operator of v1alpha1, every EtcdCluster and EtcdBackup is still
// stored in etcd as v1alpha1 until something writes it. The Migrator writes each once, unchanged (the
// API server then stores it in the storage version), and, when it could see every namespace, records
// in the CRDs' status.storedVersions that v1beta1 is the only version left in storage, so that a
// later release may stop serving v1alpha1.
package storageversion

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// The operator rewrites its objects and records the storage version in its two CRDs.
//
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,verbs=update,resourceNames=etcdclusters.etcd.etcdkit.dev;etcdbackups.etcd.etcdkit.dev

// StorageVersion is the version the CRDs store objects in.
var StorageVersion = etcdv1beta1.GroupVersion.Version

// kind is one kind the Migrator moves: its CRD and a list of its objects.
type kind struct {
	crd  string
	list func() client.ObjectList
}

var kinds = []kind{
	{etcdv1beta1.EtcdClusterCRD, func() client.ObjectList { return &etcdv1beta1.EtcdClusterList{} }},
	{etcdv1beta1.EtcdBackupCRD, func() client.ObjectList { return &etcdv1beta1.EtcdBackupList{} }},
}

// Migrator is a manager.Runnable that rewrites the operator's objects once, on the leader, after
// it starts. A failed attempt is retried every Retry until it succeeds or the manager stops.
type Migrator struct {
	// Reader reads the CRDs and the objects without a cache.
	Reader client.Reader
	// Writer writes the objects and the CRDs' status.
	Writer client.Client
	// Namespaces the operator watches; empty for every namespace. Only an operator that watches every
	// namespace records the storage version in the CRDs: objects in other namespaces are not its to
	// rewrite.
	Namespaces []string
	// Retry is the wait after a failed attempt (10 s when 0).
	Retry time.Duration
	Log   logr.Logger
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one replica migrates.
func (*Migrator) NeedLeaderElection() bool { return true }

// Start migrates until it succeeded once or ctx ends.
func (m *Migrator) Start(ctx context.Context) error {
	retry := m.Retry
	if retry == 0 {
		retry = 10 * time.Second
	}
	for {
		err := m.Migrate(ctx)
		if err == nil {
			return nil
		}
		m.Log.Info("Cannot move the stored objects to the storage version yet; retrying", "version", StorageVersion,
			"reason", err.Error(), "retryIn", retry)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
	}
}

// Migrate rewrites every object of a CRD whose status.storedVersions names another version than
// StorageVersion, then (watching every namespace) sets status.storedVersions to StorageVersion
// alone. A CRD whose storedVersions is already StorageVersion alone is left as it is, its objects
// unread.
func (m *Migrator) Migrate(ctx context.Context) error {
	for _, k := range kinds {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := m.Reader.Get(ctx, client.ObjectKey{Name: k.crd}, crd); err != nil {
			return fmt.Errorf("read CustomResourceDefinition %s: %w", k.crd, err)
		}
		if slices.Equal(crd.Status.StoredVersions, []string{StorageVersion}) {
			continue
		}
		start := time.Now()
		n, err := m.rewrite(ctx, k)
		if err != nil {
			return err
		}
		if len(m.Namespaces) > 0 {
			m.Log.Info("Rewrote the objects of the watched namespaces in the storage version; the CRD's storedVersions "+
				"stays as it is (objects of other namespaces are not this operator's)", "crd", k.crd, "objects", n,
				"namespaces", m.Namespaces, "version", StorageVersion, "took", time.Since(start).Round(time.Millisecond))
			continue
		}
		before := crd.Status.StoredVersions
		crd.Status.StoredVersions = []string{StorageVersion}
		if err := m.Writer.Status().Update(ctx, crd); err != nil {
			return fmt.Errorf("set status.storedVersions of CustomResourceDefinition %s: %w", k.crd, err)
		}
		m.Log.Info("Moved the stored objects to the storage version", "crd", k.crd, "objects", n, "version", StorageVersion,
			"storedVersionsBefore", before, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// rewrite writes every object of kind k in the watched namespaces unchanged, and returns how many it
// wrote and the errors of those it could not write (it goes on past them). An object changed or
// deleted meanwhile needs no write: whoever changed it wrote it in the storage version.
func (m *Migrator) rewrite(ctx context.Context, k kind) (int, error) {
	namespaces := m.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	n := 0
	var failed []error
	for _, ns := range namespaces {
		list := k.list()
		if err := m.Reader.List(ctx, list, client.InNamespace(ns)); err != nil {
			return n, fmt.Errorf("list the objects of %s: %w", k.crd, err)
		}
		var objs []client.Object
		switch l := list.(type) {
		case *etcdv1beta1.EtcdClusterList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		case *etcdv1beta1.EtcdBackupList:
			for i := range l.Items {
				objs = append(objs, &l.Items[i])
			}
		}
		for _, o := range objs {
			if err := m.Writer.Update(ctx, o); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				// The others are still rewritten; storedVersions stays until every one is.
				failed = append(failed, fmt.Errorf("rewrite %s %s/%s: %w", k.crd, o.GetNamespace(), o.GetName(), err))
				continue
			}
			n++
		}
	}
	return n, errors.Join(failed...)
}
