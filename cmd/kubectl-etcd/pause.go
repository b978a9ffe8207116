package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// newPauseCommand returns `kubectl etcd pause CLUSTER` (paused true) or `kubectl etcd resume CLUSTER`.
func newPauseCommand(g *globals, paused bool) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "pause CLUSTER",
		Short: "Stop the operator from changing a cluster's members (spec.paused: true)",
		Long: `Set spec.paused to true, then wait until the operator has observed it and print what the status
says. While a cluster is paused the operator creates, deletes, adds, removes and rolls no member; it
still keeps the status current and takes scheduled backups. Spec changes made meanwhile are carried
out on resume.`,
		Example: "  kubectl etcd pause demo -n apps",
	}
	if !paused {
		cmd.Use = "resume CLUSTER"
		cmd.Short = "Let the operator change a paused cluster again (spec.paused: false)"
		cmd.Long = `Set spec.paused to false, then wait until the operator has observed it and print what the status
says. The operator then carries out what it held back, such as spec changes made while paused.`
		cmd.Example = "  kubectl etcd resume demo -n apps"
	}
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, ns, err := g.client()
		if err != nil {
			return err
		}
		return setPaused(cmd, c, client.ObjectKey{Namespace: ns, Name: args[0]}, paused, timeout)
	}
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "How long to wait for the operator to observe the change")
	return cmd
}

// setPaused merge-patches spec.paused of cluster key, then waits until status.observedGeneration
// reaches the patched generation and prints the status.
func setPaused(cmd *cobra.Command, c client.Client, key client.ObjectKey, paused bool, timeout time.Duration) error {
	ctx := cmd.Context()
	ec := &etcdv1beta1.EtcdCluster{}
	ec.Namespace, ec.Name = key.Namespace, key.Name
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused))
	if err := c.Patch(ctx, ec, patch); err != nil {
		return clusterGetError(err, key.Namespace, key.Name)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "EtcdCluster %s: spec.paused is %t (generation %d); waiting for the operator to observe it\n", key, paused, ec.Generation)
	generation := ec.Generation
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for ec.Status.ObservedGeneration < generation {
		select {
		case <-waitCtx.Done():
			return fmt.Errorf("spec.paused of EtcdCluster %s is %t, but the operator has not observed it within %s (status.observedGeneration %d, generation %d): check that the operator runs and watches namespace %s (`kubectl get pods -A -l app.kubernetes.io/name=etcd-operator`)",
				key, paused, timeout, ec.Status.ObservedGeneration, generation, key.Namespace)
		case <-time.After(pollInterval):
		}
		if err := c.Get(waitCtx, key, ec); err != nil && waitCtx.Err() == nil {
			return clusterGetError(err, key.Namespace, key.Name)
		}
	}
	fmt.Fprintf(out, "Observed: phase %s", orNone(string(ec.Status.Phase)))
	if p := meta.FindStatusCondition(ec.Status.Conditions, etcdv1beta1.ConditionProgressing); p != nil {
		fmt.Fprintf(out, ", Progressing=%s %s: %s", p.Status, p.Reason, oneLine(p.Message))
	}
	fmt.Fprintln(out)
	return nil
}
