package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// backupOptions are the flags of `kubectl etcd backup`.
type backupOptions struct {
	name    string
	member  string
	wait    bool
	timeout time.Duration

	pvc, pvcSubPath                          string
	s3Endpoint, s3Bucket, s3Prefix, s3Region string
	s3CredentialsSecret, s3CASecret          string
	s3ForcePathStyle                         bool
}

// newBackupCommand returns `kubectl etcd backup CLUSTER`.
func newBackupCommand(g *globals) *cobra.Command {
	o := &backupOptions{}
	cmd := &cobra.Command{
		Use:   "backup CLUSTER",
		Short: "Back up a cluster now and follow the backup until it succeeds or fails",
		Long: `Create an EtcdBackup of the cluster and follow it, printing each change of its phase with the
time since it was created, until it succeeds or fails. A failed backup exits with a non-zero status
and the reason the operator gives.

The snapshot goes to the cluster's spec.backup.destination, unless --pvc or the --s3-* flags name
another destination.`,
		Example: `  kubectl etcd backup demo -n apps
  kubectl etcd backup demo --pvc backups --pvc-sub-path etcd
  kubectl etcd backup demo --s3-endpoint https://s3.eu-west-1.amazonaws.com --s3-bucket etcd-backups \
      --s3-credentials-secret s3-credentials --wait=false`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBackup(cmd, g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.name, "name", "", "Name of the EtcdBackup (default: <cluster>-<UTC time as YYYYMMDD-hhmmss>)")
	f.StringVar(&o.member, "member", "", "Member (pod name) to snapshot (default: the operator picks the most up-to-date healthy follower)")
	f.BoolVar(&o.wait, "wait", true, "Follow the backup until it succeeds or fails; --wait=false returns once it is created")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "How long to follow the backup before giving up (the backup itself goes on)")
	f.StringVar(&o.pvc, "pvc", "", "Store the snapshot on this PersistentVolumeClaim of the cluster's namespace")
	f.StringVar(&o.pvcSubPath, "pvc-sub-path", "", "Directory inside the claim of --pvc (default: its root)")
	f.StringVar(&o.s3Endpoint, "s3-endpoint", "", "Store the snapshot in an S3-compatible object store at this URL (https://… or http://…)")
	f.StringVar(&o.s3Bucket, "s3-bucket", "", "Bucket of --s3-endpoint")
	f.StringVar(&o.s3Prefix, "s3-prefix", "", "Key prefix inside the bucket, such as etcd/prod")
	f.StringVar(&o.s3Region, "s3-region", "", "Region of the bucket (default us-east-1)")
	f.BoolVar(&o.s3ForcePathStyle, "s3-force-path-style", false, "Address the bucket as <endpoint>/<bucket>, as most self-hosted object stores need")
	f.StringVar(&o.s3CredentialsSecret, "s3-credentials-secret", "", "Secret with the keys accessKeyID and secretAccessKey")
	f.StringVar(&o.s3CASecret, "s3-ca-secret", "", "Secret whose key ca.crt holds CA certificates to trust for an https:// endpoint")
	return cmd
}

// destination returns the destination the flags name, nil when they name none.
func (o *backupOptions) destination() (*etcdv1beta1.BackupDestination, error) {
	s3 := o.s3Endpoint != "" || o.s3Bucket != "" || o.s3Prefix != "" || o.s3Region != "" ||
		o.s3CredentialsSecret != "" || o.s3CASecret != "" || o.s3ForcePathStyle
	switch {
	case o.pvc != "" && s3:
		return nil, errors.New("--pvc and the --s3-* flags name two destinations: give one of them")
	case o.pvcSubPath != "" && o.pvc == "":
		return nil, errors.New("--pvc-sub-path needs --pvc, the claim it is a directory of")
	case o.pvc != "":
		return &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: o.pvc, SubPath: o.pvcSubPath}}, nil
	case !s3:
		return nil, nil
	case o.s3Endpoint == "" || o.s3Bucket == "" || o.s3CredentialsSecret == "":
		return nil, errors.New("an S3 destination needs --s3-endpoint, --s3-bucket and --s3-credentials-secret")
	}
	d := &etcdv1beta1.S3Destination{
		Endpoint: o.s3Endpoint, Bucket: o.s3Bucket, Prefix: o.s3Prefix, Region: o.s3Region,
		ForcePathStyle:       o.s3ForcePathStyle,
		CredentialsSecretRef: etcdv1beta1.LocalObjectReference{Name: o.s3CredentialsSecret},
	}
	if o.s3CASecret != "" {
		d.CASecretRef = &etcdv1beta1.LocalObjectReference{Name: o.s3CASecret}
	}
	return &etcdv1beta1.BackupDestination{S3: d}, nil
}

// runBackup creates the EtcdBackup of cluster and, with --wait, follows it.
func runBackup(cmd *cobra.Command, g *globals, o *backupOptions, cluster string) error {
	dest, err := o.destination()
	if err != nil {
		return err
	}
	c, ns, err := g.client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	ec := &etcdv1beta1.EtcdCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, ec); err != nil {
		return clusterGetError(err, ns, cluster)
	}
	where := "the cluster's spec.backup.destination"
	if dest == nil && ec.Spec.Backup == nil {
		return fmt.Errorf("EtcdCluster %s/%s has no spec.backup.destination: name one with --pvc CLAIM or --s3-endpoint, --s3-bucket and --s3-credentials-secret", ns, cluster)
	}
	if dest != nil {
		where = describeDestination(dest)
	}
	name := o.name
	if name == "" {
		name = cluster + "-" + time.Now().UTC().Format("20060102-150405")
	}
	b := &etcdv1beta1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1beta1.EtcdBackupSpec{
			ClusterRef: etcdv1beta1.LocalObjectReference{Name: cluster}, Destination: dest, Member: o.member,
		},
	}
	start := time.Now()
	if err := c.Create(ctx, b); err != nil {
		return fmt.Errorf("create EtcdBackup %s/%s: %w", ns, name, err)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "%s  EtcdBackup %s/%s created, to %s\n", elapsed(start), ns, name, where)
	if !o.wait {
		fmt.Fprintf(out, "Follow it with `kubectl -n %s get etcdbackup %s -w`.\n", ns, name)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	return followBackup(ctx, c, b, start, out, o.timeout)
}

// describeDestination writes a destination for a progress line.
func describeDestination(d *etcdv1beta1.BackupDestination) string {
	if d.PVC != nil {
		return "pvc://" + d.PVC.ClaimName + "/" + d.PVC.SubPath
	}
	return d.S3.Endpoint + " bucket " + d.S3.Bucket
}

// elapsed writes the time since start for a progress line, right-aligned.
func elapsed(start time.Time) string {
	return fmt.Sprintf("%6s", time.Since(start).Round(time.Second))
}

// followBackup reads EtcdBackup b every pollInterval and prints each change of its phase or message,
// until it succeeded (nil), failed (an error with the operator's message) or ctx ends.
func followBackup(ctx context.Context, c client.Client, b *etcdv1beta1.EtcdBackup, start time.Time, out io.Writer, timeout time.Duration) error {
	key := client.ObjectKeyFromObject(b)
	var phase etcdv1beta1.BackupPhase
	var message string
	for seen := false; ; {
		err := c.Get(ctx, key, b)
		switch {
		case err == nil && (!seen || b.Status.Phase != phase || b.Status.Message != message):
			seen, phase, message = true, b.Status.Phase, b.Status.Message
			fmt.Fprintf(out, "%s  %s\n", elapsed(start), backupProgress(&b.Status))
		case apierrors.IsNotFound(err):
			return fmt.Errorf("EtcdBackup %s was deleted before it finished: run `kubectl etcd backup %s` again for a backup", key, b.Spec.ClusterRef.Name)
		case err != nil && ctx.Err() == nil:
			fmt.Fprintf(out, "%s  reading the EtcdBackup failed, trying again: %v\n", elapsed(start), err)
		}
		switch phase {
		case etcdv1beta1.BackupSucceeded:
			return nil
		case etcdv1beta1.BackupFailed:
			return fmt.Errorf("EtcdBackup %s failed: %s\nAn EtcdBackup is not retried: fix what the message says, then run `kubectl etcd backup %s` again (`kubectl -n %s describe etcdbackup %s` shows its events)",
				key, orNone(b.Status.Message), b.Spec.ClusterRef.Name, key.Namespace, key.Name)
		}
		select {
		case <-ctx.Done():
			within := "within " + timeout.String()
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				within = "when interrupted"
			}
			return fmt.Errorf("EtcdBackup %s had not finished %s (phase %s); it goes on: follow it with `kubectl -n %s get etcdbackup %s -w`",
				key, within, orNone(string(phase)), key.Namespace, key.Name)
		case <-time.After(pollInterval):
		}
	}
}

// backupProgress writes a backup's phase for a progress line.
func backupProgress(st *etcdv1beta1.EtcdBackupStatus) string {
	switch st.Phase {
	case "":
		return "waiting for the operator to pick it up"
	case etcdv1beta1.BackupSucceeded:
		return fmt.Sprintf("Succeeded: %s at revision %d from member %s, stored at %s", humanBytes(st.SizeBytes), st.Revision, orNone(st.Member), orNone(st.Location))
	}
	if st.Message != "" {
		return string(st.Phase) + ": " + oneLine(st.Message)
	}
	return string(st.Phase)
}
