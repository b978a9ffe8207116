package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// none is what a table shows for a value that is not there.
const none = "-"

// normalStatus is the status of each condition type of an EtcdCluster while all is well; status
// shows the conditions that are not in it.
var normalStatus = map[string]metav1.ConditionStatus{
	etcdv1beta1.ConditionAvailable:            metav1.ConditionTrue,
	etcdv1beta1.ConditionProgressing:          metav1.ConditionFalse,
	etcdv1beta1.ConditionDegraded:             metav1.ConditionFalse,
	etcdv1beta1.ConditionValid:                metav1.ConditionTrue,
	etcdv1beta1.ConditionVolumesResized:       metav1.ConditionTrue,
	etcdv1beta1.ConditionDataInconsistent:     metav1.ConditionFalse,
	etcdv1beta1.ConditionBackupFailing:        metav1.ConditionFalse,
	etcdv1beta1.ConditionCertificatesExpiring: metav1.ConditionFalse,
	etcdv1beta1.ConditionQuorumDataLost:       metav1.ConditionFalse,
}

// abnormalConditions returns the conditions not in their normal status, in the order of the status.
// A condition of a type this plugin does not know is shown only while its status is Unknown.
func abnormalConditions(conds []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range conds {
		want, known := normalStatus[c.Type]
		if (known && c.Status != want) || (!known && c.Status == metav1.ConditionUnknown) {
			out = append(out, c)
		}
	}
	return out
}

// humanBytes writes n bytes in binary units: "512 B", "20 KiB", "1.5 MiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	i := -1
	for v >= unit && i < 5 {
		v /= unit
		i++
	}
	s := fmt.Sprintf("%.1f", v)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}[i]
}

// age writes how long before now t was, as kubectl writes ages ("3m20s", "5d"), or "-" for no time.
func age(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return none
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// yesNo writes a boolean for a table.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// orNone returns s, or "-" when it is empty.
func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// oneLine folds a multi-line message (a container's termination message) into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// newTable returns a tabwriter for tables aligned as kubectl aligns them.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
}

// writeStatus writes the status of one cluster: a header, then its members.
func writeStatus(w io.Writer, c *etcdv1beta1.EtcdCluster, now time.Time) error {
	tw := newTable(w)
	writeHeader(tw, c, now)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(c.Status.Members) == 0 {
		fmt.Fprintln(w, "No members reported yet.")
		return nil
	}
	return writeMembers(w, c.Status.Members, now)
}

// writeHeader writes the cluster-wide lines of writeStatus.
func writeHeader(tw io.Writer, c *etcdv1beta1.EtcdCluster, now time.Time) {
	st := &c.Status
	line := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	line("Cluster", c.Namespace+"/"+c.Name)
	line("Phase", orNone(string(st.Phase)))
	line("Version", orNone(st.CurrentVersion))
	line("Cluster ID", orNone(st.ClusterID))
	line("Leader", orNone(st.Leader))
	line("Ready", fmt.Sprintf("%d/%d", st.ReadyReplicas, c.Spec.ReplicasOrDefault()))
	line("Paused", yesNo(c.Spec.Paused))
	line("Last backup", lastBackup(st.LastBackup, now))
	if m := st.Maintenance; m != nil && len(m.PendingDefragmentation) > 0 {
		line("Pending defragmentation", strings.Join(m.PendingDefragmentation, ", "))
	}
	if reqs := c.Requests(); len(reqs) > 0 {
		line("Requests", strings.Join(reqs, ", ")+" (not carried out yet)")
	}
	if c.Generation > st.ObservedGeneration {
		line("Observed", fmt.Sprintf("generation %d of %d: the operator has not acted on the newest spec yet", st.ObservedGeneration, c.Generation))
	}
	abnormal := abnormalConditions(st.Conditions)
	if len(abnormal) == 0 {
		line("Conditions", "all normal")
		return
	}
	line("Conditions", fmt.Sprintf("%d not in their normal state", len(abnormal)))
	for _, cond := range abnormal {
		fmt.Fprintf(tw, "  %s=%s\t%s: %s (%s ago)\n", cond.Type, cond.Status, cond.Reason, oneLine(cond.Message), age(&cond.LastTransitionTime, now))
	}
}

// lastBackup writes the newest successful backup: its name, age and location.
func lastBackup(b *etcdv1beta1.LastBackup, now time.Time) string {
	if b == nil {
		return "none"
	}
	s := b.Name
	if b.CompletionTime != nil {
		s += ", " + age(b.CompletionTime, now) + " ago"
	}
	if b.Location != "" {
		s += ", " + b.Location
	}
	return s
}

// writeMembers writes the members table. The DOWN SINCE and PROBLEM columns are there only when a
// member is down.
func writeMembers(w io.Writer, members []etcdv1beta1.MemberStatus, now time.Time) error {
	down := false
	for _, m := range members {
		down = down || !m.Healthy
	}
	tw := newTable(w)
	header := "NAME\tID\tROLE\tLEADER\tHEALTHY\tVERSION\tDB SIZE"
	if down {
		header += "\tDOWN SINCE\tPROBLEM"
	}
	fmt.Fprintln(tw, header)
	for _, m := range members {
		leader := ""
		if m.Leader {
			leader = "*"
		}
		size := none
		if m.DBSizeBytes > 0 {
			size = humanBytes(m.DBSizeBytes)
		}
		row := strings.Join([]string{m.Name, orNone(m.ID), orNone(string(m.Role)), orNone(leader), yesNo(m.Healthy), orNone(m.Version), size}, "\t")
		if down {
			since := none
			if m.DownSince != nil {
				since = age(m.DownSince, now) + " ago"
			}
			row += "\t" + since + "\t" + orNone(oneLine(m.Problem))
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// writeClusterList writes the clusters of a namespace as one table.
func writeClusterList(w io.Writer, clusters []etcdv1beta1.EtcdCluster, now time.Time) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tPHASE\tREADY\tVERSION\tLEADER\tLAST BACKUP")
	for i := range clusters {
		c := &clusters[i]
		backup := none
		if b := c.Status.LastBackup; b != nil && b.CompletionTime != nil {
			backup = age(b.CompletionTime, now) + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\n", c.Name, orNone(string(c.Status.Phase)),
			c.Status.ReadyReplicas, c.Spec.ReplicasOrDefault(), orNone(c.Status.CurrentVersion), orNone(c.Status.Leader), backup)
	}
	return tw.Flush()
}
