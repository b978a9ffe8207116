// Package v1alpha1 is the first API version of the etcd.etcdkit.dev group, EtcdCluster and EtcdBackup.
// It is still served, deprecated, and converted to and from v1beta1, the storage version and the one
// the operator works with, by the operator's conversion webhook. Its schema does not change any more.
//
// +kubebuilder:object:generate=true
// +groupName=etcd.etcdkit.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "etcd.etcdkit.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
