// Package testenv starts a real kube-apiserver and etcd (controller-runtime's envtest) with the
// project's CRDs installed, for integration tests. The binaries come from KUBEBUILDER_ASSETS, which
// `make test` sets after building them from Go modules (hack/envtest.sh).
package testenv

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// Scheme has the built-in kinds and the project's.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(etcdv1beta1.AddToScheme(s))
	utilruntime.Must(etcdv1alpha1.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}()

// Start starts kube-apiserver and etcd with the CRDs of config/crd/bases installed. It returns an
// error that says how to get the binaries when KUBEBUILDER_ASSETS is not set.
func Start() (*envtest.Environment, *rest.Config, error) {
	return StartWithWebhooks()
}
