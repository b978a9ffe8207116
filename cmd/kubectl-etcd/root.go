package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// scheme has the built-in kinds and the operator's.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(etcdv1beta1.AddToScheme(s))
	return s
}()

// pollInterval is how often a command that follows an object reads it again.
var pollInterval = time.Second

// globals are what every command shares: the kubeconfig flags and the streams.
type globals struct {
	config  *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
}

// client returns a client of the API server the kubeconfig flags name, and the namespace to work in
// (-n, else the current context's, else "default").
func (g *globals) client() (client.Client, string, error) {
	cfg, err := g.config.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("read the kubeconfig (--kubeconfig, KUBECONFIG or ~/.kube/config): %w", err)
	}
	ns, _, err := g.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("find the namespace of the current context: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", fmt.Errorf("connect to the API server %s: %w", cfg.Host, err)
	}
	return c, ns, nil
}

// newRootCommand returns `kubectl etcd` with its subcommands.
func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	g := &globals{config: genericclioptions.NewConfigFlags(true), streams: streams}
	root := &cobra.Command{
		Use:   "kubectl-etcd",
		Short: "Inspect and operate the etcd clusters of etcd-operator",
		Long: `kubectl etcd reads and changes the EtcdClusters and EtcdBackups of etcd-operator through the
Kubernetes API: the status of a cluster and its members, on-demand backups, the manifest of a
cluster restored from a backup, pausing the operator's changes to a cluster, and asking the operator
to defragment the members, move etcd's leadership or replace a member.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// kubectl runs a plugin named kubectl-etcd as "kubectl etcd".
	root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl etcd"}
	// The generated completion command is left out: kubectl completes plugins through a script of
	// their own, which this plugin does not ship.
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	g.config.AddFlags(root.PersistentFlags())
	root.AddCommand(
		newStatusCommand(g),
		newBackupCommand(g),
		newRestoreCommand(g),
		newPauseCommand(g, true),
		newPauseCommand(g, false),
		newDefragCommand(g),
		newMoveLeaderCommand(g),
		newReplaceCommand(g),
		&cobra.Command{
			Use:   "version",
			Short: "Print the plugin's version",
			Args:  cobra.NoArgs,
			Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "kubectl-etcd", pluginVersion()) },
		},
	)
	return root
}

// checkOutput returns an error unless format is "", "json" or "yaml".
func checkOutput(format string) error {
	switch format {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("unknown output format %q: use -o json or -o yaml, or no -o for a table", format)
}

// printObject writes v as indented JSON or as YAML.
func printObject(w io.Writer, format string, v any) error {
	var out []byte
	var err error
	if format == "json" {
		out, err = json.MarshalIndent(v, "", "  ")
		out = append(out, '\n')
	} else {
		out, err = yaml.Marshal(v)
	}
	if err != nil {
		return fmt.Errorf("encode as %s: %w", format, err)
	}
	_, err = w.Write(out)
	return err
}
