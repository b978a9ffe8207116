// Command kubectl-etcd is the kubectl plugin of etcd-operator: `kubectl etcd status`, `backup`,
// `restore`, `pause`, `resume` and `version` read and change EtcdClusters and EtcdBackups through the
// Kubernetes API, with kubectl's kubeconfig flags. It never talks to etcd itself: everything it shows
// comes from the status the operator keeps.
//
// Install it on PATH (`make plugin`, or `go install
// github.com/etcdkit/etcd-operator/cmd/kubectl-etcd@latest`) and kubectl finds it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := newRootCommand(streams).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		stop()
		os.Exit(1)
	}
}
