// Package ownedcache keeps the operator's cache to the objects it manages: the kinds it creates are
// cached only with the label app.kubernetes.io/managed-by=etcd-operator, so that the operator does
// not hold every pod, claim, Service and Secret of the namespaces it watches in memory. Reads of
// those kinds by name that miss the cache go to the API server, so that an object of a name the
// operator needs that is not labelled as its own (someone else's, or one whose labels were changed)
// is still seen before the operator creates one.
package ownedcache

import (
	"context"
	"fmt"
	"reflect"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ManagedByLabel and ManagedBy are the label, and its value, that internal/resources puts on every
// object the operator creates (and has since its first version).
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "etcd-operator"
)

// Selector selects the objects the operator created.
var Selector = labels.SelectorFromSet(labels.Set{ManagedByLabel: ManagedBy})

// Filtered returns one object of each kind that the cache holds only with Selector: member pods and
// backup Job pods, member claims, the cluster's Services, its PodDisruptionBudget and NetworkPolicy,
// certificate Secrets and backup Jobs.
func Filtered() []client.Object {
	return []client.Object{
		&corev1.Pod{}, &corev1.PersistentVolumeClaim{}, &corev1.Service{}, &corev1.Secret{},
		&policyv1.PodDisruptionBudget{}, &networkingv1.NetworkPolicy{}, &batchv1.Job{},
	}
}

// ByObject is the cache's per-kind configuration for the Filtered kinds.
func ByObject() map[client.Object]cache.ByObject {
	out := map[client.Object]cache.ByObject{}
	for _, o := range Filtered() {
		out[o] = cache.ByObject{Label: Selector}
	}
	return out
}

// Uncached are the kinds never read through the cache: StorageClasses are read only when a claim is
// to grow, so a watch on every StorageClass of the cluster would cost more than it saves, and asks
// for cluster-wide list and watch permissions where get is enough.
func Uncached() []client.Object { return []client.Object{&storagev1.StorageClass{}} }

// Client returns c, whose Get of a Filtered kind that the cache does not hold asks api (the
// manager's uncached reader). Lists are answered from the cache only: the operator lists by its own
// labels. A miss costs one request to the API server; the operator reads a missing object by name
// only before it creates one.
func Client(c client.Client, api client.Reader) client.Client {
	return &fallback{Client: c, api: api}
}

// fallback is Client's client.
type fallback struct {
	client.Client
	api client.Reader
}

// Get reads obj from the cache and, for a Filtered kind the cache does not hold, from the API server.
func (f *fallback) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := f.Client.Get(ctx, key, obj, opts...)
	if !apierrors.IsNotFound(err) || !isFiltered(obj) {
		return err
	}
	if err := f.api.Get(ctx, key, obj, opts...); err != nil {
		if apierrors.IsNotFound(err) {
			return err
		}
		return fmt.Errorf("read %s uncached: %w", key, err)
	}
	return nil
}

// isFiltered says whether obj is of a Filtered kind.
func isFiltered(obj client.Object) bool {
	t := reflect.TypeOf(obj)
	for _, o := range Filtered() {
		if reflect.TypeOf(o) == t {
			return true
		}
	}
	return false
}
