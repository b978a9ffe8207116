// Package v1beta1 contains the v1beta1 API of the etcd.etcdkit.dev group, its storage version: EtcdCluster and EtcdBackup.
//
// +kubebuilder:object:generate=true
// +groupName=etcd.etcdkit.dev
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "etcd.etcdkit.dev", Version: "v1beta1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// The names of the CRDs of this group's kinds.
const (
	EtcdClusterCRD = "etcdclusters.etcd.etcdkit.dev"
	EtcdBackupCRD  = "etcdbackups.etcd.etcdkit.dev"
)
