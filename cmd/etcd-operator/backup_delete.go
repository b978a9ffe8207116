package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/etcdkit/etcd-operator/internal/backup"
	"github.com/etcdkit/etcd-operator/internal/backup/policy"
)

// DeleteOutput is what `etcd-operator backup delete` prints and writes to --result-file on success.
type DeleteOutput struct {
	// Key is the deleted snapshot's key; Location where it was.
	Key      string `json:"key"`
	Location string `json:"location"`
}

type backupDeleteOptions struct {
	jobOptions
	namespace, cluster, name string
}

// newBackupDeleteCommand is `etcd-operator backup delete`: the operator runs it in a Job to remove
// the stored snapshot of an EtcdBackup that is deleted with the etcd.etcdkit.dev/delete-snapshot
// annotation (retention does so), because it cannot mount a claim itself and does not read S3
// credentials.
func newBackupDeleteCommand() *cobra.Command {
	o := &backupDeleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete a stored backup: its manifest, then its snapshot (runs in a Job)",
		Long: `Deletes <namespace>/<cluster>/<name>.db.json and then <namespace>/<cluster>/<name>.db under the S3
prefix or the directory, so that a manifest never names a missing snapshot. Objects already gone are
not an error: running it again succeeds. On failure it writes a one-line message saying what to do to
--result-file and exits with status 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBackupDelete(cmd, o) },
	}
	f := cmd.Flags()
	o.addFlags(f, "deletion")
	f.StringVar(&o.namespace, "namespace", "", "namespace of the cluster (first element of the key)")
	f.StringVar(&o.cluster, "cluster", "", "name of the cluster (second element of the key)")
	f.StringVar(&o.name, "name", "", "name of the backup; the key is <namespace>/<cluster>/<name>.db")
	return cmd
}

func runBackupDelete(cmd *cobra.Command, o *backupDeleteOptions) error {
	ctx, cancel := context.WithTimeout(commandContext(cmd), o.timeout)
	defer cancel()
	log := newJobLogger(cmd.ErrOrStderr())
	defer func() { _ = log.Sync() }()

	out, err := func() (DeleteOutput, error) {
		key, err := policy.Key(o.namespace, o.cluster, o.name)
		if err != nil {
			return DeleteOutput{}, fmt.Errorf("--namespace, --cluster and --name: %w", err)
		}
		store, err := o.dest.store()
		if err != nil {
			return DeleteOutput{}, err
		}
		if err := backup.Delete(ctx, store, key); err != nil {
			return DeleteOutput{}, err
		}
		log.Info("backup deleted", zap.String("location", store.Location(key)))
		return DeleteOutput{Key: key, Location: store.Location(key)}, nil
	}()
	if err != nil {
		return fail(cmd, log, o.resultFile, "backup delete", o.timeout, err)
	}
	return printResult(cmd, log, o.resultFile, out)
}
