package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// defragResult is what defrag prints with -o.
type defragResult struct {
	Cluster string `json:"cluster"`
	// Request is the value of the annotation etcd.etcdkit.dev/defragment the request was made with.
	Request string         `json:"request"`
	Members []defragMember `json:"members"`
	// LastDefragmentation is status.maintenance.lastDefragmentation: the last member done.
	LastDefragmentation *etcdv1beta1.DefragmentationRecord `json:"lastDefragmentation,omitempty"`
}

// defragMember is one member's database file size as the status reported it before the request and
// once it was carried out, in bytes.
type defragMember struct {
	Name              string `json:"name"`
	DBSizeBeforeBytes int64  `json:"dbSizeBeforeBytes"`
	DBSizeAfterBytes  int64  `json:"dbSizeAfterBytes"`
}

// newDefragCommand returns `kubectl etcd defrag CLUSTER`.
func newDefragCommand(g *globals) *cobra.Command {
	f := &requestFlags{}
	cmd := &cobra.Command{
		Use:   "defrag CLUSTER",
		Short: "Defragment every member now (etcd.etcdkit.dev/defragment)",
		Long: `Ask the operator to defragment every voting member now, whatever spec.maintenance says, then wait
until it has and print each member's database file size before and after.

The request is the annotation etcd.etcdkit.dev/defragment=<now, RFC 3339>. The operator carries it
out once the cluster is settled (not paused, not rolling, every member healthy): one member at a
time, followers first, the leader last after leadership moved to a follower; then it removes the
annotation. A member does not serve while etcd rewrites its file (seconds per GiB).`,
		Example: `  kubectl etcd defrag demo -n apps
  kubectl etcd defrag demo --timeout 30m -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			return runDefrag(cmd, g, f, args[0])
		},
	}
	f.add(cmd, 10*time.Minute, "defragment every member")
	return cmd
}

// runDefrag asks for every member of cluster to be defragmented, waits until the operator reports it
// done and prints the sizes.
func runDefrag(cmd *cobra.Command, g *globals, f *requestFlags, cluster string) error {
	token := time.Now().UTC().Format(time.RFC3339)
	r, before, err := send(cmd, g, f, cluster, etcdv1beta1.AnnotationDefragment, token)
	if err != nil {
		return err
	}
	done := fmt.Sprintf("as %s=%s asked", etcdv1beta1.AnnotationDefragment, token)
	ec, err := r.follow(cmd.Context(), func(ec *etcdv1beta1.EtcdCluster, events []eventsv1.Event) (bool, error) {
		if st := ec.Status.Maintenance; st != nil && st.RequestedDefragmentation == token {
			return false, nil // the status of the pass that finished is not written yet
		}
		for _, e := range events {
			if e.Reason == "Defragmented" && strings.Contains(e.Note, done) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	res := defragResult{Cluster: r.key.String(), Request: token}
	if st := ec.Status.Maintenance; st != nil {
		res.LastDefragmentation = st.LastDefragmentation
	}
	for _, m := range ec.Status.Members {
		if m.Role == etcdv1beta1.RoleLearner {
			continue
		}
		dm := defragMember{Name: m.Name, DBSizeAfterBytes: m.DBSizeBytes}
		if b := memberStatus(before, m.Name); b != nil {
			dm.DBSizeBeforeBytes = b.DBSizeBytes
		}
		res.Members = append(res.Members, dm)
	}
	if f.output != "" {
		return printObject(cmd.OutOrStdout(), f.output, res)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "Defragmented every voting member of EtcdCluster %s:\n", r.key)
	tw := newTable(out)
	fmt.Fprintln(tw, "MEMBER\tDB SIZE BEFORE\tDB SIZE AFTER")
	for _, m := range res.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Name, sizeOrNone(m.DBSizeBeforeBytes), sizeOrNone(m.DBSizeAfterBytes))
	}
	return tw.Flush()
}

// sizeOrNone writes a size in bytes, "-" for none reported.
func sizeOrNone(n int64) string {
	if n <= 0 {
		return none
	}
	return humanBytes(n)
}
