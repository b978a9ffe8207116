// Command kubectl-etcd is the kubectl plugin of etcd-operator: `kubectl etcd status`, `backup`,
// `restore`, `pause`, `resume`, `defrag`, `move-leader`, `replace-member` and `version` read and change
// EtcdClusters and EtcdBackups through the Kubernetes API, with kubectl's kubeconfig flags. It never
// talks to etcd itself: everything it shows comes from the status and events the operator keeps, and
// what needs etcd (defragmenting, moving leadership, replacing a member) it asks of the operator with
// an annotation on the EtcdCluster.
//
// Install it on PATH (`make plugin`, or `go install
// github.com/etcdkit/etcd-operator/cmd/kubectl-etcd@latest`) and kubectl finds it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// version is set at build time with -ldflags "-X main.version=..." (make plugin).
var version = "dev"

// pluginVersion returns version, or for a binary built by `go install ...@<version>` without
// -ldflags, the module version Go recorded in it.
func pluginVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

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
