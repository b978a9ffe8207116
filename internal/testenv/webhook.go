package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// InstallFile is the generated install manifest, dist/install.yaml.
func InstallFile() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "dist", "install.yaml")
}

// StartWithWebhooks is Start, plus the admission webhook configurations found in webhookPaths (files
// or directories of manifests; other kinds are ignored) installed with their clientConfig pointing at
// a local webhook server. env.WebhookInstallOptions says where that server must listen
// (LocalServingHost, LocalServingPort) and holds its certificate (LocalServingCertDir); the API server
// trusts it.
func StartWithWebhooks(webhookPaths ...string) (*envtest.Environment, *rest.Config, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, or export KUBEBUILDER_ASSETS=$(bash hack/envtest.sh --print) after `make envtest`")
	}
	_, file, _, _ := goruntime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme,
	}
	if len(webhookPaths) > 0 {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: webhookPaths, LocalServingHost: "127.0.0.1"}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("start kube-apiserver and etcd: %w", err)
	}
	return env, cfg, nil
}
