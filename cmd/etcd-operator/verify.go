package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/etcdkit/etcd-operator/internal/datadir"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// verifyOptions are verify-data's flags.
type verifyOptions struct {
	dataDir, memberID, clusterID, terminationLog string
}

func newVerifyDataCommand() *cobra.Command {
	o := &verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify-data",
		Short: "Check that a member's data directory is its own before etcd starts (runs as an init container)",
		Long: `Reads the member ID and cluster ID that --data-dir belongs to from etcd's WAL and compares them with
--member-id and --cluster-id (hex, as etcdctl prints them), recorded when the member first started on
this volume. Exits 0 when they match; exits 3, with the reason in --termination-log, when the directory
is empty or holds another member's or another cluster's data: etcd must not start on it (an emptied
directory makes it panic, "tocommit(N) is out of range"; another member's makes it rejoin under the
wrong identity). Exits 1 when it cannot tell (the directory cannot be read).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runVerifyData(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.dataDir, "data-dir", "", "the member's etcd --data-dir")
	f.StringVar(&o.memberID, "member-id", "", "the member ID the directory must belong to, in hex")
	f.StringVar(&o.clusterID, "cluster-id", "", "the cluster ID the directory must belong to, in hex")
	f.StringVar(&o.terminationLog, "termination-log", "/dev/termination-log", "file the reason for exit code 3 is written to (Kubernetes shows it in the pod's status)")
	return cmd
}

func runVerifyData(cmd *cobra.Command, o *verifyOptions) error {
	if o.dataDir == "" || o.memberID == "" || o.clusterID == "" {
		return errors.New("--data-dir, --member-id and --cluster-id are required")
	}
	member, err := etcd.ParseID(o.memberID)
	if err != nil {
		return fmt.Errorf("--member-id: %w", err)
	}
	cluster, err := etcd.ParseID(o.clusterID)
	if err != nil {
		return fmt.Errorf("--cluster-id: %w", err)
	}
	err = datadir.Verify(o.dataDir, member, cluster)
	switch {
	case errors.Is(err, datadir.ErrNotOwn):
		fmt.Fprintln(cmd.ErrOrStderr(), err)
		_ = os.WriteFile(o.terminationLog, []byte(err.Error()), 0o600)
		os.Exit(resources.ExitNotOwn) // the operator replaces such a member at once
	case err != nil:
		return fmt.Errorf("cannot tell whether %s is member %s's: %w", o.dataDir, o.memberID, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s holds the data of member %s of cluster %s\n", o.dataDir, o.memberID, o.clusterID)
	return nil
}
