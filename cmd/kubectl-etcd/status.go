package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// errNoCRD is returned when the API server does not know EtcdClusters.
var errNoCRD = errors.New("this Kubernetes cluster has no EtcdCluster kind: install etcd-operator's CRDs (kubectl apply --server-side -f dist/install.yaml), or --context names another cluster")

// newStatusCommand returns `kubectl etcd status [CLUSTER]`.
func newStatusCommand(g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status [CLUSTER]",
		Short: "Show a cluster's state and members, or list the namespace's clusters",
		Long: `Show an EtcdCluster's state as the operator reports it in its status: phase, version, cluster ID,
leader, ready members, the conditions that are not in their normal state, the last backup, whether
it is paused, the members still to be defragmented and the requests (defrag, move-leader,
replace-member) not carried out yet; then one line per member, with why and since when a member is
down. Without a name, list the namespace's clusters.

-o json or -o yaml prints the cluster's status (without a name: the clusters).`,
		Example: `  kubectl etcd status demo -n apps
  kubectl etcd status -n apps
  kubectl etcd status demo -o yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, ns, err := g.client()
			if err != nil {
				return err
			}
			if len(args) == 0 {
				return listClusters(cmd, c, ns, output)
			}
			ec := &etcdv1beta1.EtcdCluster{}
			if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: args[0]}, ec); err != nil {
				return clusterGetError(err, ns, args[0])
			}
			if output != "" {
				return printObject(cmd.OutOrStdout(), output, ec.Status)
			}
			return writeStatus(cmd.OutOrStdout(), ec, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml (default: a table)")
	return cmd
}

// listClusters writes the EtcdClusters of namespace ns.
func listClusters(cmd *cobra.Command, c client.Client, ns, output string) error {
	list := &etcdv1beta1.EtcdClusterList{}
	if err := c.List(cmd.Context(), list, client.InNamespace(ns)); err != nil {
		if meta.IsNoMatchError(err) {
			return errNoCRD
		}
		return fmt.Errorf("list the EtcdClusters of namespace %s: %w", ns, err)
	}
	if output != "" {
		list.APIVersion, list.Kind = etcdv1beta1.GroupVersion.String(), "EtcdClusterList"
		return printObject(cmd.OutOrStdout(), output, list)
	}
	if len(list.Items) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "No EtcdClusters in namespace %s.\n", ns)
		return nil
	}
	return writeClusterList(cmd.OutOrStdout(), list.Items, time.Now())
}

// clusterGetError explains a failed read of EtcdCluster ns/name.
func clusterGetError(err error, ns, name string) error {
	if meta.IsNoMatchError(err) {
		return errNoCRD
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("no EtcdCluster %q in namespace %s: `kubectl etcd status -n %s` lists its clusters, -n names another namespace", name, ns, ns)
	}
	return fmt.Errorf("read EtcdCluster %s/%s: %w", ns, name, err)
}
