// Command cert-manager-controller runs cert-manager's certificate controllers (v1.21) as a host process
// for the tests of spec.tls.issuerRef: the Certificate controllers, the CertificateRequest approver and
// the CA and SelfSigned issuers; no leader election, metrics, webhook, ACME, Vault or Venafi. cert-manager's
// own controller binary cannot be built from the Go module proxy (its module is not published, and it
// links Venafi's vcert v5.13, which the proxy refuses), so this wires cert-manager's public controller
// packages the way its binary does.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// the controllers, each registering itself in controller.Known()
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// controllers are the controllers run: without the approver, no CertificateRequest is ever signed.
var controllers = []string{
	"issuers", "clusterissuers",
	"certificates-trigger", "certificates-issuing", "certificates-key-manager",
	"certificates-request-manager", "certificates-readiness", "certificates-revision-manager",
	"certificaterequests-approver",
	"certificaterequests-issuer-ca", "certificaterequests-issuer-selfsigned",
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server (empty: in-cluster)")
	clusterNS := flag.String("cluster-resource-namespace", "kube-system", "namespace of the Secrets ClusterIssuers name")
	workers := flag.Int("concurrent-workers", 5, "workers per controller")
	klog.InitFlags(flag.CommandLine)
	flag.Parse()
	logf.InitLogs()
	defer logf.FlushLogs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(logf.NewContext(ctx, logf.Log, "controller"), *kubeconfig, *clusterNS, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-controller:", err)
		os.Exit(1)
	}
}

// run builds the controllers' shared context, runs each controller with workers workers and starts
// the informers, until ctx ends or a controller fails.
func run(ctx context.Context, kubeconfig, clusterNS string, workers int) error {
	g, ctx := errgroup.WithContext(ctx)
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: clusterNS},
		CertificateOptions: controller.CertificateOptions{
			// a test that creates a Certificate before its Issuer is ready must not wait an hour
			CertificateRequestMinimumBackoffDuration: 2 * time.Second,
			CertificateRequestMaximumBackoffDuration: time.Minute,
		},
	})
	if err != nil {
		return err
	}
	cctx, err := factory.Build()
	if err != nil {
		return err
	}
	known := controller.Known()
	for _, name := range controllers {
		build, ok := known[name]
		if !ok {
			linked := make([]string, 0, len(known))
			for k := range known {
				linked = append(linked, k)
			}
			slices.Sort(linked)
			return fmt.Errorf("controller %q is not linked (linked: %s)", name, strings.Join(linked, ","))
		}
		c, err := build(factory)
		if err != nil {
			return fmt.Errorf("build controller %s: %w", name, err)
		}
		g.Go(func() error { return c.Run(workers, ctx) })
	}
	logf.FromContext(ctx).Info("started cert-manager controllers", "controllers", controllers)
	cctx.SharedInformerFactory.Start(ctx.Done())
	cctx.KubeSharedInformerFactory.Start(ctx.Done())
	cctx.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	err = g.Wait()
	cctx.HTTP01ResourceMetadataInformersFactory.Shutdown()
	cctx.KubeSharedInformerFactory.Shutdown()
	cctx.SharedInformerFactory.Shutdown()
	return err
}
