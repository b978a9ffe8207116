// Package ownedcache keeps the operator's cache to the objects it manages: the kinds it creates are
// cached only with the label app.kubernetes.io/managed-by=etcd-operator, so that the operator does
// not hold every pod, claim, Service and Secret of the namespaces it watches in memory. Reads of
// those kinds by name that miss the cache go to the API server, so that an object of a name the
// operator needs that is not labelled as its own (someone else's, or one whose labels were changed)
// is still seen; reads of the operator's own objects (OwnedOnly) go there only for names it has just
// created or was refused.
package ownedcache

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
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
// certificate Secrets, backup Jobs and the ControllerRevisions of cluster specs.
func Filtered() []client.Object {
	return []client.Object{
		&corev1.Pod{}, &corev1.PersistentVolumeClaim{}, &corev1.Service{}, &corev1.Secret{},
		&policyv1.PodDisruptionBudget{}, &networkingv1.NetworkPolicy{}, &batchv1.Job{}, &appsv1.ControllerRevision{},
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

// Options are the cache options the operator runs with, but for the sync period and the namespaces:
// the Filtered kinds held with Selector only (ByObject), and every object without its managedFields,
// which the operator never reads and which are a large part of each pod and claim (an update without
// them keeps the server's: the API server keeps the managedFields of a write that sends none).
func Options() cache.Options {
	return cache.Options{ByObject: ByObject(), DefaultTransform: cache.TransformStripManagedFields()}
}

// Uncached are the kinds never read through the cache: StorageClasses are read only when a claim is
// to grow, so a watch on every StorageClass of the cluster would cost more than it saves, and asks
// for cluster-wide list and watch permissions where get is enough.
func Uncached() []client.Object { return []client.Object{&storagev1.StorageClass{}} }

// OwnedOnly is a GetOption for reads of the operator's own objects: an object it is about to create
// when missing, or to delete when present and its own. Such a read that misses the cache is answered
// NotFound without asking the API server, unless this client created that name, or was refused it as
// already existing, within the last RecentFor: the cache may not hold it yet, or it is not labelled as
// the operator's. An object of that name that is not labelled as the operator's is then found out by
// the Create that fails with AlreadyExists, and the next OwnedOnly read of it asks the API server.
// It saves a new cluster's first passes about twenty requests that would each be answered 404.
var OwnedOnly client.GetOption = ownedOnly{}

// ownedOnly is OwnedOnly's type; it changes no GetOptions field.
type ownedOnly struct{}

// ApplyToGet implements client.GetOption.
func (ownedOnly) ApplyToGet(*client.GetOptions) {}

// RecentFor is how long after this client created a name (or was refused it) an OwnedOnly read of it
// that misses the cache still asks the API server: longer than the cache takes to see a new object.
// A name refused as already existing is asked for until the API server answers NotFound.
const RecentFor = 2 * time.Minute

// Client returns c, whose Get of a Filtered kind that the cache does not hold asks api (the
// manager's uncached reader), except for OwnedOnly reads (see there). Lists are answered from the
// cache only: the operator lists by its own labels. A miss costs one request to the API server.
func Client(c client.Client, api client.Reader) client.Client {
	return &fallback{Client: c, api: api, recent: map[recentKey]recent{}}
}

// fallback is Client's client.
type fallback struct {
	client.Client
	api client.Reader

	mu     sync.Mutex
	recent map[recentKey]recent // names created or refused as existing; see OwnedOnly
	writes int                  // Creates since recent was last swept of expired entries
}

// recentKey names an object: its Go type, namespace and name.
type recentKey struct {
	kind reflect.Type
	key  client.ObjectKey
}

// recent is what fallback remembers of a name.
type recent struct {
	at      time.Time // when it was created or refused
	refused bool      // AlreadyExists: someone else's, or not labelled as the operator's
}

// Get reads obj from the cache and, for a Filtered kind the cache does not hold, from the API server
// (for an OwnedOnly read, only when the name is recent; see OwnedOnly).
func (f *fallback) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	owned := false
	var rest []client.GetOption
	for _, o := range opts {
		if _, ok := o.(ownedOnly); ok {
			owned = true
			continue
		}
		rest = append(rest, o)
	}
	err := f.Client.Get(ctx, key, obj, rest...)
	rk := recentKey{reflect.TypeOf(obj), key}
	if err == nil && owned {
		f.forget(rk, false) // the cache holds it now
	}
	if !apierrors.IsNotFound(err) || !isFiltered(obj) {
		return err
	}
	if owned && !f.isRecent(rk) {
		return err
	}
	if err := f.api.Get(ctx, key, obj, rest...); err != nil {
		if apierrors.IsNotFound(err) {
			f.forget(rk, true)
			return err
		}
		return fmt.Errorf("read %s uncached: %w", key, err)
	}
	return nil
}

// Create creates obj and, for a Filtered kind, remembers its name as recent when it was created or
// refused as already existing (not for a dry run).
func (f *fallback) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	err := f.Client.Create(ctx, obj, opts...)
	co := &client.CreateOptions{}
	co.ApplyOptions(opts)
	if !isFiltered(obj) || len(co.DryRun) > 0 || (err != nil && !apierrors.IsAlreadyExists(err)) {
		return err
	}
	f.remember(recentKey{reflect.TypeOf(obj), client.ObjectKeyFromObject(obj)}, err != nil)
	return err
}

// remember records k as created (refused false) or refused as already existing, and now and then
// drops expired names.
func (f *fallback) remember(k recentKey, refused bool) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recent[k] = recent{at: now, refused: refused}
	if f.writes++; f.writes < 256 {
		return
	}
	f.writes = 0
	for rk, r := range f.recent {
		if !r.refused && now.Sub(r.at) > RecentFor {
			delete(f.recent, rk)
		}
	}
}

// isRecent says whether an OwnedOnly read of k that missed the cache must ask the API server.
func (f *fallback) isRecent(k recentKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recent[k]
	return ok && (r.refused || time.Since(r.at) <= RecentFor)
}

// forget drops k once the cache holds it, or (gone true) once the API server says it does not exist.
func (f *fallback) forget(k recentKey, gone bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.recent[k]; ok && (gone || !r.refused) {
		delete(f.recent, k)
	}
}

// filteredTypes are the Go types of the Filtered kinds.
var filteredTypes = func() map[reflect.Type]bool {
	out := map[reflect.Type]bool{}
	for _, o := range Filtered() {
		out[reflect.TypeOf(o)] = true
	}
	return out
}()

// isFiltered says whether obj is of a Filtered kind.
func isFiltered(obj client.Object) bool { return filteredTypes[reflect.TypeOf(obj)] }
