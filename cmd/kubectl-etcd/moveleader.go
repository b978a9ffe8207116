package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// moveLeaderResult is what move-leader prints with -o.
type moveLeaderResult struct {
	Cluster        string `json:"cluster"`
	Leader         string `json:"leader"`
	LeaderID       string `json:"leaderID,omitempty"`
	PreviousLeader string `json:"previousLeader,omitempty"`
}

// newMoveLeaderCommand returns `kubectl etcd move-leader CLUSTER MEMBER`.
func newMoveLeaderCommand(g *globals) *cobra.Command {
	f := &requestFlags{}
	cmd := &cobra.Command{
		Use:   "move-leader CLUSTER MEMBER",
		Short: "Move etcd's leadership to a member (etcd.etcdkit.dev/move-leader)",
		Long: `Ask the operator to move etcd's leadership to MEMBER (a pod name, such as demo-1), for example
before draining the leader's node, then wait until MEMBER leads and print it.

The request is the annotation etcd.etcdkit.dev/move-leader=MEMBER. The operator carries it out once
the cluster is settled (not paused, not rolling, every member healthy) and then removes it; until
then the request waits, and the progress lines say what the cluster is doing. A MEMBER that is not a
member of the cluster, or is a learner, is refused: the command fails with the operator's reason.`,
		Example: `  kubectl etcd move-leader demo demo-1 -n apps
  kubectl etcd move-leader demo demo-1 -o json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			return runMoveLeader(cmd, g, f, args[0], args[1])
		},
	}
	f.add(cmd, 2*time.Minute, "move leadership")
	return cmd
}

// runMoveLeader asks for member to lead cluster and waits until the status says it does.
func runMoveLeader(cmd *cobra.Command, g *globals, f *requestFlags, cluster, member string) error {
	r, before, err := send(cmd, g, f, cluster, etcdv1beta1.AnnotationMoveLeader, member)
	if err != nil {
		return err
	}
	ec, err := r.follow(cmd.Context(), func(ec *etcdv1beta1.EtcdCluster, _ []eventsv1.Event) (bool, error) {
		return ec.Status.Leader == member, nil
	})
	if err != nil {
		return err
	}
	res := moveLeaderResult{Cluster: r.key.String(), Leader: member, PreviousLeader: before.Status.Leader}
	if m := memberStatus(ec, member); m != nil {
		res.LeaderID = m.ID
	}
	if f.output != "" {
		return printObject(cmd.OutOrStdout(), f.output, res)
	}
	out := cmd.OutOrStdout()
	if res.PreviousLeader == member {
		fmt.Fprintf(out, "%s leads EtcdCluster %s (ID %s); it led already\n", member, r.key, orNone(res.LeaderID))
		return nil
	}
	fmt.Fprintf(out, "%s leads EtcdCluster %s (ID %s); %s led before\n", member, r.key, orNone(res.LeaderID), orNone(res.PreviousLeader))
	return nil
}
