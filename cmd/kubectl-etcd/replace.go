package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// replaceResult is what replace-member prints with -o.
type replaceResult struct {
	Cluster    string `json:"cluster"`
	Member     string `json:"member"`
	PreviousID string `json:"previousID,omitempty"`
	ID         string `json:"id"`
}

// isTerminal reports whether r is a terminal, where a person can answer a question.
var isTerminal = func(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	return term.IsTerminal(int(f.Fd())) // not /dev/null, which is a character device too
}

// newReplaceCommand returns `kubectl etcd replace-member CLUSTER MEMBER`.
func newReplaceCommand(g *globals) *cobra.Command {
	f := &requestFlags{}
	var yes bool
	cmd := &cobra.Command{
		Use:   "replace-member CLUSTER MEMBER",
		Short: "Replace a member with a new, empty one that copies the data from the leader (etcd.etcdkit.dev/replace-member)",
		Long: `Ask the operator to replace MEMBER (a pod name, such as demo-1): its claim and pod are deleted, and
with them its copy of the data; it is removed from etcd, and a new member of the same name joins with a
new member ID and copies the data from the leader. Use it for a member whose data you no longer trust,
or whose volume you want to move. Then wait until the cluster is Available with every member ready
again, and print the new member ID.

This deletes the member's data: on a terminal the command asks first, unless --yes; elsewhere (a
script, a pipe) it refuses to run without --yes.

The request is the annotation etcd.etcdkit.dev/replace-member=MEMBER. The operator carries it out
only when the cluster keeps its quorum throughout: it waits while the cluster is paused, rolls,
restores or changes its membership, or another member is not healthy (MEMBER itself may be down). A
leader first hands its leadership to a follower. A MEMBER that is not one of the cluster's, a learner,
or the member of a one-member cluster is refused: the command fails with the operator's reason.`,
		Example: `  kubectl etcd replace-member demo demo-1 -n apps
  kubectl etcd replace-member demo demo-1 --yes --timeout 30m`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			if err := confirmReplace(cmd, g, yes, args[0], args[1]); err != nil {
				return err
			}
			return runReplace(cmd, g, f, args[0], args[1])
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "Replace without asking (needed when stdin is not a terminal)")
	f.add(cmd, 15*time.Minute, "replace the member and the cluster to be whole again")
	return cmd
}

// confirmReplace returns nil when the replacement may go ahead: --yes, or a person answered yes on the
// terminal.
func confirmReplace(cmd *cobra.Command, g *globals, yes bool, cluster, member string) error {
	if yes {
		return nil
	}
	in := g.streams.In
	if in == nil || !isTerminal(in) {
		return errors.New("replace-member deletes the member's data: pass --yes to confirm (stdin is not a terminal to ask on)")
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Replace member %s of EtcdCluster %s? Its claim and pod are deleted, with its copy of the data; a new member copies the data from the leader. [y/N] ", member, cluster)
	answer, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && answer == "" {
		return errors.New("no answer: nothing was changed")
	}
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		return errors.New("not confirmed: nothing was changed")
	}
	return nil
}

// runReplace asks for member of cluster to be replaced and waits until the status lists it under a new
// ID, a healthy voter, with the cluster Available and every member ready.
func runReplace(cmd *cobra.Command, g *globals, f *requestFlags, cluster, member string) error {
	r, before, err := send(cmd, g, f, cluster, etcdv1beta1.AnnotationReplaceMember, member)
	if err != nil {
		return err
	}
	res := replaceResult{Cluster: r.key.String(), Member: member}
	if m := memberStatus(before, member); m != nil {
		res.PreviousID = m.ID
	}
	ec, err := r.follow(cmd.Context(), func(ec *etcdv1beta1.EtcdCluster, _ []eventsv1.Event) (bool, error) {
		m := memberStatus(ec, member)
		if m == nil || m.ID == "" || m.ID == res.PreviousID || m.Role != etcdv1beta1.RoleVoter || !m.Healthy {
			return false, nil
		}
		a := meta.FindStatusCondition(ec.Status.Conditions, etcdv1beta1.ConditionAvailable)
		return a != nil && a.Status == metav1.ConditionTrue && ec.Status.ReadyReplicas == ec.Spec.ReplicasOrDefault(), nil
	})
	if err != nil {
		return err
	}
	res.ID = memberStatus(ec, member).ID
	if f.output != "" {
		return printObject(cmd.OutOrStdout(), f.output, res)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Replaced member %s of EtcdCluster %s: member ID %s, was %s; the cluster is Available with %d/%d members ready\n",
		member, r.key, res.ID, orNone(res.PreviousID), ec.Status.ReadyReplicas, ec.Spec.ReplicasOrDefault())
	return nil
}
