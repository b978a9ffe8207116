package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// CertManagerPath returns cert-manager's controller binary the tests run: $CERT_MANAGER when set (make
// test sets it), else what hack/build-cert-manager.sh --print names. Its CRDs are in ../crds beside
// the binary's directory.
func CertManagerPath() (string, error) { return toolPath("CERT_MANAGER", "build-cert-manager.sh") }

// StartCertManager installs cert-manager's CRDs into the API server of cfg and runs cert-manager's
// certificate controllers (CA and SelfSigned issuers, hack/tools/cert-manager) against it until the
// test ends; the Secrets of ClusterIssuers are read from namespace clusterNS. The test fails when the
// binary is missing: `make test` builds it (hack/build-cert-manager.sh). On failure of the test, the
// controller's log is in the test's output.
func StartCertManager(t testing.TB, cfg *rest.Config, clusterNS string) {
	t.Helper()
	bin, err := CertManagerPath()
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		t.Fatalf("cert-manager for the tests is missing (%v): run the tests with `make test`, which builds it (hack/build-cert-manager.sh)", err)
	}
	crds := filepath.Join(filepath.Dir(filepath.Dir(bin)), "crds")
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("install cert-manager's CRDs from %s: %v", crds, err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--kubeconfig="+kubeconfig, "--cluster-resource-namespace="+clusterNS, "--concurrent-workers=2", "-v=2")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("cert-manager's log:\n%s", tail(logs.String(), 60))
		}
	})
}

// writeKubeconfig writes a kubeconfig of cfg's server and credentials to path.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificate: cfg.CertFile, ClientCertificateData: cfg.CertData,
		ClientKey: cfg.KeyFile, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken, TokenFile: cfg.BearerTokenFile}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig for cert-manager: %w", err)
	}
	return nil
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
