package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// restoreOptions are the flags of `kubectl etcd restore`.
type restoreOptions struct {
	into     string
	replicas int32
	apply    bool
	output   string
}

// newRestoreCommand returns `kubectl etcd restore BACKUP --into NEWCLUSTER`.
func newRestoreCommand(g *globals) *cobra.Command {
	o := &restoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore BACKUP --into NEWCLUSTER",
		Short: "Print the manifest of a new cluster that starts from an EtcdBackup (--apply creates it)",
		Long: `Print the manifest of a new EtcdCluster, NEWCLUSTER, whose members start from the snapshot of the
EtcdBackup BACKUP (spec.bootstrap.restore.backupRef). The backed-up cluster is not touched; the new
cluster gets a new cluster ID.

When the backed-up cluster still exists, the manifest copies its replicas, version, image, storage,
etcd options and TLS settings (spec.tls.client, spec.tls.peer and spec.tls.issuerRef; not
spec.tls.secrets, whose certificates name the old cluster's members). Otherwise the version is the
one the snapshot was taken with, and the rest are the defaults.

Review the manifest, then apply it with kubectl apply -f, or run again with --apply to create it.`,
		Example: `  kubectl etcd restore demo-20260101-030000 --into demo-copy -n apps
  kubectl etcd restore demo-20260101-030000 --into demo-copy --replicas 5 --apply`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRestore(cmd, g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.into, "into", "", "Name of the new EtcdCluster (required)")
	f.Int32Var(&o.replicas, "replicas", 0, "Members of the new cluster (default: the backed-up cluster's, or 3)")
	f.BoolVar(&o.apply, "apply", false, "Create the new EtcdCluster instead of printing it")
	f.StringVarP(&o.output, "output", "o", "yaml", "Format of the manifest: yaml or json")
	_ = cmd.MarkFlagRequired("into")
	return cmd
}

// runRestore reads the backup and its cluster, then prints or creates the new cluster.
func runRestore(cmd *cobra.Command, g *globals, o *restoreOptions, backup string) error {
	if o.output != "yaml" && o.output != "json" {
		return fmt.Errorf("unknown output format %q: use -o yaml or -o json", o.output)
	}
	if o.replicas != 0 && (o.replicas < 1 || o.replicas > 9 || o.replicas%2 == 0) {
		return fmt.Errorf("--replicas %d: a cluster has an odd number of members from 1 to 9, such as 3 or 5", o.replicas)
	}
	c, ns, err := g.client()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	b := &etcdv1beta1.EtcdBackup{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: backup}, b); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no EtcdBackup %q in namespace %s: `kubectl -n %s get etcdbackups` lists them", backup, ns, ns)
		}
		return fmt.Errorf("read EtcdBackup %s/%s: %w", ns, backup, err)
	}
	warn := cmd.ErrOrStderr()
	switch b.Status.Phase {
	case etcdv1beta1.BackupSucceeded:
	case etcdv1beta1.BackupFailed:
		return fmt.Errorf("EtcdBackup %s/%s failed and holds no snapshot: restore a Succeeded one (`kubectl -n %s get etcdbackups`)", ns, backup, ns)
	default:
		fmt.Fprintf(warn, "Note: EtcdBackup %s is %s, not Succeeded yet: the new cluster creates no member until it succeeds.\n", backup, orNone(string(b.Status.Phase)))
	}
	source := &etcdv1beta1.EtcdCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.Spec.ClusterRef.Name}, source); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("read EtcdCluster %s/%s, the backed-up cluster: %w", ns, b.Spec.ClusterRef.Name, err)
		}
		source = nil
		fmt.Fprintf(warn, "Note: EtcdCluster %s, the backed-up cluster, no longer exists: the version is the snapshot's, storage and TLS are the defaults.\n", b.Spec.ClusterRef.Name)
	} else if source.Spec.TLS != nil && source.Spec.TLS.Secrets != nil {
		fmt.Fprintf(warn, "Note: EtcdCluster %s keeps its certificates in spec.tls.secrets; they name its members, not the new cluster's, so the manifest leaves spec.tls.secrets out: add Secrets issued for %s to use your own.\n", source.Name, o.into)
	}
	ec := restoreManifest(b, source, o.into, o.replicas)
	if !o.apply {
		return writeManifest(cmd.OutOrStdout(), o.output, ec, b)
	}
	if err := c.Create(ctx, ec); err != nil {
		return fmt.Errorf("create EtcdCluster %s/%s: %w", ns, o.into, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "EtcdCluster %s/%s created from EtcdBackup %s: follow it with `kubectl etcd status %s -n %s`.\n", ns, o.into, backup, o.into, ns)
	return nil
}

// restoreManifest returns the EtcdCluster into that restores backup b, with the settings of source
// (the backed-up cluster; nil when it is gone) and replicas members (0: the source's, or the default).
func restoreManifest(b *etcdv1beta1.EtcdBackup, source *etcdv1beta1.EtcdCluster, into string, replicas int32) *etcdv1beta1.EtcdCluster {
	ec := &etcdv1beta1.EtcdCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: etcdv1beta1.GroupVersion.String(), Kind: "EtcdCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: into, Namespace: b.Namespace},
		Spec: etcdv1beta1.EtcdClusterSpec{
			Bootstrap: &etcdv1beta1.BootstrapSpec{Restore: &etcdv1beta1.RestoreSpec{
				BackupRef: &etcdv1beta1.LocalObjectReference{Name: b.Name},
			}},
		},
	}
	s := &ec.Spec
	if source != nil {
		s.Replicas = source.Spec.Replicas
		s.Version = source.Spec.Version
		s.Image = source.Spec.Image
		s.Storage = *source.Spec.Storage.DeepCopy()
		s.Options = source.Spec.Options.DeepCopy()
		if t := source.Spec.TLS; t != nil {
			s.TLS = &etcdv1beta1.TLSSpec{Client: t.Client.DeepCopy(), Peer: t.Peer.DeepCopy(), IssuerRef: t.IssuerRef.DeepCopy()}
		}
	} else {
		s.Version = b.Status.EtcdVersion
	}
	if replicas > 0 {
		s.Replicas = ptr.To(replicas)
	}
	return ec
}

// manifest is an EtcdCluster as a user writes it: no status, no server-set metadata.
type manifest struct {
	APIVersion string                      `json:"apiVersion"`
	Kind       string                      `json:"kind"`
	Metadata   manifestMeta                `json:"metadata"`
	Spec       etcdv1beta1.EtcdClusterSpec `json:"spec"`
}

// manifestMeta is the metadata of a manifest.
type manifestMeta struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// writeManifest writes ec as a manifest to apply; in YAML, after a comment saying what it restores.
func writeManifest(w io.Writer, format string, ec *etcdv1beta1.EtcdCluster, b *etcdv1beta1.EtcdBackup) error {
	m := manifest{APIVersion: ec.APIVersion, Kind: ec.Kind, Metadata: manifestMeta{Name: ec.Name, Namespace: ec.Namespace}, Spec: ec.Spec}
	if format == "yaml" {
		fmt.Fprintf(w, "# A new cluster from EtcdBackup %s: a snapshot of EtcdCluster %s", b.Name, b.Spec.ClusterRef.Name)
		if b.Status.Revision > 0 {
			fmt.Fprintf(w, " at revision %d", b.Status.Revision)
		}
		if t := b.Status.CompletionTime; t != nil {
			fmt.Fprintf(w, ", taken %s", t.UTC().Format("2006-01-02 15:04:05 UTC"))
		}
		fmt.Fprintln(w, ".")
	}
	return printObject(w, format, m)
}
