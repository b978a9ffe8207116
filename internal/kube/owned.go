// Package kube keeps the Kubernetes objects a custom resource owns in the shape it wants them, for the
// reconcilers: create what is missing, update what drifted, leave alone (and report) an object of the
// same name that is not the owner's, delete what is no longer wanted.
package kube

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdkit/etcd-operator/internal/ownedcache"
)

// Outcome is what EnsureOwned did.
type Outcome int

const (
	// Unchanged: the object was already as wanted.
	Unchanged Outcome = iota
	// Created: the object was missing and was created.
	Created
	// Updated: the object had drifted and was patched.
	Updated
	// Foreign: an object of that name exists and is not controlled by the owner; it was left alone.
	Foreign
)

// EnsureOwned makes want (whose name, namespace and owner reference are set) exist: it creates it when
// got (an empty object of the same type) cannot be read, leaves an object that owner does not control
// alone (Foreign), and otherwise, when same(got, want) is false, sets want's content on got with
// update and patches it. Errors name the object's kind and name.
func EnsureOwned[T client.Object](ctx context.Context, c client.Client, owner metav1.Object, want, got T,
	same func(got, want T) bool, update func(got, want T)) (Outcome, error) {
	kind := kindOf(want)
	err := c.Get(ctx, client.ObjectKeyFromObject(want), got, ownedcache.OwnedOnly)
	if apierrors.IsNotFound(err) {
		err = c.Create(ctx, want)
		if err == nil {
			return Created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return Unchanged, fmt.Errorf("create %s %s: %w", kind, want.GetName(), err)
		}
		// one the cache does not hold: read it (a refused name is read from the API server)
		err = c.Get(ctx, client.ObjectKeyFromObject(want), got, ownedcache.OwnedOnly)
	}
	switch {
	case err != nil:
		return Unchanged, fmt.Errorf("get %s %s: %w", kind, want.GetName(), err)
	case !metav1.IsControlledBy(got, owner):
		return Foreign, nil
	case same(got, want):
		return Unchanged, nil
	}
	patch := client.MergeFrom(got.DeepCopyObject().(T))
	update(got, want)
	if err := c.Patch(ctx, got, patch); err != nil {
		return Unchanged, fmt.Errorf("update %s %s: %w", kind, want.GetName(), err)
	}
	return Updated, nil
}

// DeleteOwned deletes obj (whose name and namespace are set) when it exists and owner controls it,
// and reports whether it did.
func DeleteOwned(ctx context.Context, c client.Client, owner metav1.Object, obj client.Object) (bool, error) {
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj, ownedcache.OwnedOnly); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(obj, owner) {
		return false, nil
	}
	if err := c.Delete(ctx, obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return true, nil
}

// kindOf returns the lower-case Go type name of obj ("poddisruptionbudget"), for errors.
func kindOf(obj client.Object) string {
	t := fmt.Sprintf("%T", obj)
	return strings.ToLower(t[strings.LastIndex(t, ".")+1:])
}
