// Command etcd-operator runs etcd clusters on Kubernetes. `etcd-operator manager` (the default) runs
// the controllers; `etcd-operator backup` and `etcd-operator restore` take and restore snapshots
// (in Jobs and init containers); `etcd-operator verify-data` checks a member's data directory before
// etcd starts (an init container); `etcd-operator version` prints the version.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	root := &cobra.Command{
		Use:           "etcd-operator",
		Short:         "Runs etcd clusters on Kubernetes: membership, healing, upgrades and backups",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	mgr := newManagerCommand()
	root.AddCommand(mgr, &cobra.Command{
		Use:   "version",
		Short: "Print the operator's version",
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), version) },
	})
	backupCmd := newBackupCommand()
	backupCmd.AddCommand(newBackupDeleteCommand())
	root.AddCommand(backupCmd)
	root.AddCommand(newRestoreCommand(), newVerifyDataCommand(), newAwaitAddCommand(), newAwaitPeersCommand())
	// `etcd-operator` without a subcommand runs the manager.
	root.Flags().AddFlagSet(mgr.Flags())
	root.RunE = mgr.RunE
	// SIGTERM or SIGINT stops the manager; a second one exits at once.
	if err := root.ExecuteContext(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
