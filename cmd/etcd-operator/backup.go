package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/etcdkit/etcd-operator/internal/backup"
	"github.com/etcdkit/etcd-operator/internal/backup/policy"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// Files of --s3-credentials-dir (the keys of the credentials Secret mounted there).
const (
	accessKeyIDFile     = "accessKeyID"
	secretAccessKeyFile = "secretAccessKey"
	// maxTerminationMessage is what Kubernetes keeps of a container's termination message.
	maxTerminationMessage = 4096
)

// destinationOptions are the flags that say where backups are stored: an S3 bucket or a directory.
type destinationOptions struct {
	s3 backup.S3Config
	// s3CredentialsDir holds the files accessKeyID and secretAccessKey.
	s3CredentialsDir string
	s3CAFile         string
	dir              string
}

func (d *destinationOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&d.s3.Endpoint, "s3-endpoint", "", "S3 server URL, https://host[:port] or http://host[:port] (default AWS S3)")
	f.StringVar(&d.s3.Bucket, "s3-bucket", "", "S3 bucket; selects S3 as the destination")
	f.StringVar(&d.s3.Prefix, "s3-prefix", "", "prefix of every object key in the bucket")
	f.StringVar(&d.s3.Region, "s3-region", "", "S3 region (default: asked from the server)")
	f.BoolVar(&d.s3.ForcePathStyle, "s3-force-path-style", false, "address the bucket as <endpoint>/<bucket> (MinIO, Ceph, most self-hosted servers)")
	f.StringVar(&d.s3CredentialsDir, "s3-credentials-dir", "", "directory with the files "+accessKeyIDFile+" and "+secretAccessKeyFile+
		" (a mounted Secret); default: $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY")
	f.StringVar(&d.s3CAFile, "s3-ca-file", "", "PEM file of CA certificates to trust for the S3 endpoint, besides the system's")
	f.StringVar(&d.dir, "dir", "", "directory to store backups in (e.g. a mounted PersistentVolumeClaim); selects a directory as the destination")
}

// store opens the destination the flags name.
func (d *destinationOptions) store() (backup.Store, error) {
	switch {
	case d.dir != "" && d.s3.Bucket != "":
		return nil, errors.New("--dir and --s3-bucket are exclusive")
	case d.dir != "":
		return backup.NewDirStore(d.dir)
	case d.s3.Bucket == "":
		return nil, errors.New("no destination: set --s3-bucket or --dir")
	}
	cfg := d.s3
	if d.s3CredentialsDir != "" {
		var err error
		if cfg.AccessKeyID, err = readSecretFile(d.s3CredentialsDir, accessKeyIDFile); err != nil {
			return nil, err
		}
		if cfg.SecretAccessKey, err = readSecretFile(d.s3CredentialsDir, secretAccessKeyFile); err != nil {
			return nil, err
		}
	} else {
		cfg.AccessKeyID, cfg.SecretAccessKey = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
		if cfg.AccessKeyID == "" || cfg.SecretAccessKey == "" {
			return nil, errors.New("no S3 credentials: set --s3-credentials-dir, or $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY")
		}
	}
	if d.s3CAFile != "" {
		pem, err := os.ReadFile(d.s3CAFile)
		if err != nil {
			return nil, fmt.Errorf("--s3-ca-file (the key ca.crt of the Secret s3.caSecretRef names): %w", err)
		}
		cfg.CACertPEM = pem
	}
	return backup.NewS3Store(cfg)
}

// readSecretFile reads one credential file, without its trailing newline; its content is never
// part of an error.
func readSecretFile(dir, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return "", fmt.Errorf("S3 credentials: %w", err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("S3 credentials: %s is empty", filepath.Join(dir, name))
	}
	return v, nil
}

// jobOptions are the flags both subcommands share.
type jobOptions struct {
	dest       destinationOptions
	timeout    time.Duration
	resultFile string
}

func (j *jobOptions) addFlags(f *pflag.FlagSet, what string) {
	j.dest.addFlags(f)
	f.DurationVar(&j.timeout, "timeout", 30*time.Minute, "give up on the "+what+" after this long")
	f.StringVar(&j.resultFile, "result-file", "/dev/termination-log", "file to write the result to (JSON) or, on failure, a one-line message; "+
		"Kubernetes shows it in the pod's status as the container's termination message; empty for none")
}

type backupOptions struct {
	jobOptions
	endpoints                []string
	member                   string
	namespace, cluster, name string
	tempDir                  string
	dialTimeout              time.Duration
	tls                      transport.TLSInfo
	user                     string
}

func newBackupCommand() *cobra.Command {
	o := &backupOptions{}
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Take a verified snapshot of an etcd cluster and store it in S3 or a directory (runs in a Job)",
		Long: `Takes a snapshot from a healthy member of the cluster (a follower when there is one), verifies it
(embedded sha256, etcd's snapshot status) and stores it as <namespace>/<cluster>/<name>.db under the
S3 prefix or the directory, with a manifest <key>.json holding the result. On success it prints the
result as JSON and writes it to --result-file; on failure it writes a one-line message saying what to
do there and exits with status 1. Running it again for a backup that is complete does nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBackup(cmd, o) },
	}
	f := cmd.Flags()
	o.addFlags(f, "backup")
	f.StringSliceVar(&o.endpoints, "endpoints", nil, "client URLs of the cluster's members, comma separated")
	f.StringVar(&o.member, "member", "", "client URL of the one member to snapshot, even if it has no leader (a survivor of a quorum loss); default: the most up-to-date healthy follower of --endpoints")
	f.StringVar(&o.namespace, "namespace", "", "namespace of the cluster (first element of the key)")
	f.StringVar(&o.cluster, "cluster", "", "name of the cluster (second element of the key)")
	f.StringVar(&o.name, "name", "", "name of the backup; the key is <namespace>/<cluster>/<name>.db")
	f.StringVar(&o.tempDir, "temp-dir", os.TempDir(), "directory to stage the snapshot in before uploading; needs room for the whole database")
	f.DurationVar(&o.dialTimeout, "dial-timeout", etcd.DefaultDialTimeout, "timeout of connecting to an etcd member")
	f.StringVar(&o.tls.TrustedCAFile, "cacert", "", "CA bundle (PEM) to verify https:// members with, as etcdctl's --cacert")
	f.StringVar(&o.tls.CertFile, "cert", "", "client certificate (PEM) to present to the members, as etcdctl's --cert")
	f.StringVar(&o.tls.KeyFile, "key", "", "private key (PEM) of --cert, as etcdctl's --key")
	f.StringVar(&o.user, "user", "", "etcd user to authenticate as (with etcd authentication on); its password is read from $"+resources.BackupPasswordEnv+", never from a flag")
	return cmd
}

func runBackup(cmd *cobra.Command, o *backupOptions) error {
	ctx, cancel := context.WithTimeout(commandContext(cmd), o.timeout)
	defer cancel()
	log := newJobLogger(cmd.ErrOrStderr())
	defer func() { _ = log.Sync() }()

	res, err := func() (backup.Result, error) {
		if o.member != "" && !slices.Contains(o.endpoints, o.member) {
			o.endpoints = append(o.endpoints, o.member)
		}
		if len(o.endpoints) == 0 {
			return backup.Result{}, errors.New("--endpoints or --member is required")
		}
		key, err := policy.Key(o.namespace, o.cluster, o.name)
		if err != nil {
			return backup.Result{}, fmt.Errorf("--namespace, --cluster and --name: %w", err)
		}
		store, err := o.dest.store()
		if err != nil {
			return backup.Result{}, err
		}
		cfg := etcd.Config{Endpoints: o.endpoints, DialTimeout: o.dialTimeout}
		if o.user != "" {
			if cfg.Username, cfg.Password = o.user, os.Getenv(resources.BackupPasswordEnv); cfg.Password == "" {
				return backup.Result{}, fmt.Errorf("--user %s needs the password in $%s", o.user, resources.BackupPasswordEnv)
			}
		}
		if !o.tls.Empty() || o.tls.TrustedCAFile != "" {
			if cfg.TLS, err = o.tls.ClientConfig(); err != nil {
				return backup.Result{}, fmt.Errorf("--cacert, --cert and --key: %w", err)
			}
		}
		return backup.Take(ctx, backup.TakeOptions{
			Etcd:    cfg,
			Store:   store,
			Key:     key,
			TempDir: o.tempDir,
			Member:  o.member,
			Logger:  log,
		})
	}()
	if err != nil {
		return fail(cmd, log, o.resultFile, "backup", o.timeout, err)
	}
	return printResult(cmd, log, o.resultFile, res)
}

type restoreOptions struct {
	jobOptions
	key, sha256 string
	cfg         backup.RestoreConfig
}

// RestoreOutput is what `etcd-operator restore` prints and writes to --result-file on success.
type RestoreOutput struct {
	// Restored is false when the data directory had already been restored from the snapshot.
	Restored bool   `json:"restored"`
	Key      string `json:"key"`
	SHA256   string `json:"sha256"`
	DataDir  string `json:"dataDir"`
}

func newRestoreCommand() *cobra.Command {
	o := &restoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Create a member's data directory from a backup before etcd starts (runs as an init container)",
		Long: `Downloads the snapshot at --key, verifies its sha256 (--sha256, or the one in the backup's manifest)
and creates --data-dir from it as member --name of a new cluster (etcdutl's restore: a new cluster ID
when the token differs from the source cluster's). Every member of the new cluster restores the same
snapshot with the same --initial-cluster and --initial-cluster-token. Running it again on a data
directory already restored from that snapshot does nothing; any other non-empty data directory is
refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRestore(cmd, o) },
	}
	f := cmd.Flags()
	o.addFlags(f, "restore")
	f.StringVar(&o.key, "key", "", "key of the snapshot, e.g. <namespace>/<cluster>/<backup>.db")
	f.StringVar(&o.sha256, "sha256", "", "expected hex sha256 of the snapshot (default: the one in the backup's manifest)")
	f.StringVar(&o.cfg.DataDir, "data-dir", "", "the member's etcd --data-dir")
	f.StringVar(&o.cfg.Name, "name", "", "the member's etcd --name")
	f.StringVar(&o.cfg.InitialCluster, "initial-cluster", "", "the new cluster's --initial-cluster, name=peerURL,...")
	f.StringVar(&o.cfg.InitialClusterToken, "initial-cluster-token", "", "the new cluster's --initial-cluster-token")
	f.StringSliceVar(&o.cfg.PeerURLs, "initial-advertise-peer-urls", nil, "the member's --initial-advertise-peer-urls")
	f.Uint64Var(&o.cfg.RevisionBump, "bump-revision", 0, "raise the newest revision by this much and mark older ones compacted (for clients that watch, e.g. kube-apiserver)")
	return cmd
}

func runRestore(cmd *cobra.Command, o *restoreOptions) error {
	ctx, cancel := context.WithTimeout(commandContext(cmd), o.timeout)
	defer cancel()
	log := newJobLogger(cmd.ErrOrStderr())
	defer func() { _ = log.Sync() }()

	out, err := func() (RestoreOutput, error) {
		switch {
		case o.key == "":
			return RestoreOutput{}, errors.New("--key is required")
		case o.cfg.DataDir == "" || o.cfg.Name == "" || o.cfg.InitialCluster == "" || o.cfg.InitialClusterToken == "" || len(o.cfg.PeerURLs) == 0:
			return RestoreOutput{}, errors.New("--data-dir, --name, --initial-cluster, --initial-cluster-token and --initial-advertise-peer-urls are required")
		}
		store, err := o.dest.store()
		if err != nil {
			return RestoreOutput{}, err
		}
		sha := o.sha256
		if sha == "" {
			m, err := backup.ReadManifest(ctx, store, o.key)
			if err != nil {
				return RestoreOutput{}, fmt.Errorf("no --sha256 given and %w", err)
			}
			sha = m.SHA256
		}
		cfg := o.cfg
		cfg.Logger = log
		log.Info("restoring", zap.String("location", store.Location(o.key)), zap.String("sha256", sha),
			zap.String("dataDir", cfg.DataDir), zap.String("name", cfg.Name))
		restored, err := backup.Restore(ctx, store, o.key, sha, cfg)
		if err != nil {
			return RestoreOutput{}, err
		}
		if !restored {
			log.Info("the data directory was already restored from this snapshot: nothing to do", zap.String("dataDir", cfg.DataDir))
		}
		return RestoreOutput{Restored: restored, Key: o.key, SHA256: strings.ToLower(sha), DataDir: cfg.DataDir}, nil
	}()
	if err != nil {
		return fail(cmd, log, o.resultFile, "restore", o.timeout, err)
	}
	return printResult(cmd, log, o.resultFile, out)
}

// printResult prints a command's result as one JSON line and writes it to resultFile.
func printResult(cmd *cobra.Command, log *zap.Logger, resultFile string, result any) error {
	b, err := json.Marshal(result)
	if err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), string(b))
	writeResultFile(log, resultFile, b)
	return nil
}

// fail writes the one-line failure message to the result file and returns it as the error.
func fail(cmd *cobra.Command, log *zap.Logger, resultFile, what string, timeout time.Duration, err error) error {
	msg := failureMessage(what, timeout, err)
	log.Error(what+" failed", zap.Error(err))
	writeResultFile(log, resultFile, []byte(msg))
	return errors.New(msg)
}

// failureMessage is one line: what failed, what to do about it, and the error.
func failureMessage(what string, timeout time.Duration, err error) string {
	var hint string
	switch {
	case errors.Is(err, backup.ErrAccessDenied):
		hint = "access denied by the storage: check the credentials Secret (" + accessKeyIDFile + ", " + secretAccessKeyFile +
			") and that they may read and write the bucket, or the directory's permissions"
	case errors.Is(err, backup.ErrBucketNotFound):
		hint = "the S3 bucket does not exist: create it or correct the bucket name"
	case errors.Is(err, backup.ErrUntrustedCertificate):
		hint = "the S3 server's certificate is not trusted: if a private CA issued it, put that CA (PEM) into the key ca.crt of a Secret and name it in s3.caSecretRef; check that the endpoint's host name is one the certificate names"
	case errors.Is(err, backup.ErrUnreachable):
		hint = "the storage cannot be reached: check the endpoint URL, DNS, network policies and the CA"
	case errors.Is(err, backup.ErrNoHealthyMember):
		hint = "no healthy etcd member to take a snapshot from: check the cluster's members and try again once it is healthy"
	case errors.Is(err, backup.ErrCorruptSnapshot):
		hint = "the snapshot failed verification: check the member's logs and disk; to restore, pick another backup"
	case errors.Is(err, backup.ErrChecksumMismatch):
		hint = "the stored snapshot is not the one recorded (damaged or replaced): restore from another backup"
	case errors.Is(err, backup.ErrDataDirNotEmpty):
		hint = "the member's data directory already holds other data: delete the member's volume to restore into it"
	case errors.Is(err, backup.ErrNotFound):
		hint = "not found: check the key, the bucket or directory, and that the backup completed (it has a manifest)"
	case errors.Is(err, context.DeadlineExceeded):
		hint = fmt.Sprintf("timed out after %s: raise --timeout, or check that etcd and the storage are reachable", timeout)
	}
	msg := what + " failed: "
	if hint != "" {
		msg += hint + ": "
	}
	msg += strings.TrimPrefix(strings.Join(strings.Fields(err.Error()), " "), what+": ")
	if len(msg) > maxTerminationMessage {
		msg = msg[:maxTerminationMessage-3] + "..."
	}
	return msg
}

// writeResultFile writes b to path; failing to is only logged (outside Kubernetes the default path
// may not be writable).
func writeResultFile(log *zap.Logger, path string, b []byte) {
	if path == "" {
		return
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		log.Warn("could not write the result file", zap.String("path", path), zap.Error(err))
	}
}

// newJobLogger logs JSON lines to w.
func newJobLogger(w io.Writer) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	return zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(w), zapcore.InfoLevel))
}

// commandContext is the command's context, or the background context when it has none.
func commandContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
