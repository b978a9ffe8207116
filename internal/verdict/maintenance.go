package verdict

import (
	"fmt"
	"slices"
	"sort"
	"time"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/backup/policy"
	"github.com/etcdkit/etcd-operator/internal/model"
)

// DefragPlan is what spec.maintenance.defragmentation asks of a cluster in one pass.
type DefragPlan struct {
	// Pending names the members to defragment, in order: followers by name, the leader last (so that
	// leadership moves once, to a defragmented follower). Empty when nothing is due.
	Pending []string
	// ScheduleTime is the newest schedule time that fell due since the one status.maintenance
	// recorded (or since the cluster was created); zero when none did.
	ScheduleTime time.Time
	// Why says, per member added to Pending in this pass, what made it due.
	Why map[string]string
}

// PlanDefragmentation returns which members of m are to be defragmented at now: those the status
// recorded as pending and etcd still lists as voters; at a schedule time that fell due, every voter with
// at least MinReclaimable of free space in its database file; and, with ThresholdPercent, every voter
// whose free space reaches that share of its file and MinReclaimable. Free space is dbSize - dbSizeInUse
// as the member reported it in this pass (a member that did not answer is not added). It returns an
// error when the schedule does not parse (admission refuses such a spec).
func PlanDefragmentation(m *model.Cluster, now time.Time) (DefragPlan, error) {
	c := m.Object
	var plan DefragPlan
	d := defragSpec(c)
	if d == nil {
		return plan, nil
	}
	voters := map[string]*model.Member{}
	for _, mem := range m.Listed() {
		if mem.Voter() {
			voters[mem.Name] = mem
		}
	}
	if st := c.Status.Maintenance; st != nil {
		for _, n := range st.PendingDefragmentation {
			if voters[n] != nil && !slices.Contains(plan.Pending, n) {
				plan.Pending = append(plan.Pending, n)
			}
		}
	}
	plan.Why = map[string]string{}
	if err := plan.addDue(d, c, voters, now); err != nil {
		return plan, err
	}
	leader := m.Leader()
	sort.SliceStable(plan.Pending, func(i, j int) bool {
		li, lj := leader != nil && plan.Pending[i] == leader.Name, leader != nil && plan.Pending[j] == leader.Name
		if li != lj {
			return lj
		}
		return plan.Pending[i] < plan.Pending[j]
	})
	return plan, nil
}

// addDue adds to the plan the voters that d makes due at now: at a schedule time that fell due since
// the last one c's status recorded (or since c was created), every voter with at least MinReclaimable
// free; with a threshold, every voter over it.
func (plan *DefragPlan) addDue(d *etcdv1beta1.DefragmentationSpec, c *etcdv1beta1.EtcdCluster, voters map[string]*model.Member, now time.Time) error {
	add := func(mem *model.Member, why string) {
		if !slices.Contains(plan.Pending, mem.Name) {
			plan.Pending = append(plan.Pending, mem.Name)
			plan.Why[mem.Name] = why
		}
	}
	minFree := d.MinReclaimableBytes()
	if d.Schedule != "" {
		sched, err := policy.ParseSchedule(d.Schedule, d.TimeZone)
		if err != nil {
			return fmt.Errorf("spec.maintenance.defragmentation: %w", err)
		}
		earliest := c.CreationTimestamp.Time
		if st := c.Status.Maintenance; st != nil && st.LastScheduleTime != nil {
			earliest = st.LastScheduleTime.Time
		}
		if last, _, _ := policy.MissedSchedule(sched, earliest, now); !last.IsZero() {
			plan.ScheduleTime = last
			for _, mem := range sortedMembers(voters) {
				if free := freeBytes(mem); free >= minFree && free > 0 {
					add(mem, fmt.Sprintf("scheduled at %s; %s of its %s database file is free", last.UTC().Format(time.RFC3339), FormatBytes(free), FormatBytes(mem.Status.DBSizeBytes)))
				}
			}
		}
	}
	if t := d.ThresholdPercent; t != nil {
		for _, mem := range sortedMembers(voters) {
			free := freeBytes(mem)
			if free >= minFree && free > 0 && free*100 >= int64(*t)*mem.Status.DBSizeBytes {
				add(mem, fmt.Sprintf("%s of its %s database file is free (%d%%, threshold %d%%)",
					FormatBytes(free), FormatBytes(mem.Status.DBSizeBytes), free*100/mem.Status.DBSizeBytes, *t))
			}
		}
	}
	return nil
}

// defragSpec returns the cluster's spec.maintenance.defragmentation, nil when it has none.
func defragSpec(c *etcdv1beta1.EtcdCluster) *etcdv1beta1.DefragmentationSpec {
	if c.Spec.Maintenance == nil {
		return nil
	}
	return c.Spec.Maintenance.Defragmentation
}

// freeBytes is the free space in mem's database file as it reported it, 0 when it did not answer.
func freeBytes(mem *model.Member) int64 {
	if mem.Status == nil || mem.Status.DBSizeBytes <= mem.Status.DBSizeInUseBytes {
		return 0
	}
	return mem.Status.DBSizeBytes - mem.Status.DBSizeInUseBytes
}

// sortedMembers returns the members of byName sorted by name.
func sortedMembers(byName map[string]*model.Member) []*model.Member {
	out := make([]*model.Member, 0, len(byName))
	for _, m := range byName {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// FormatBytes writes n bytes in binary units with one decimal: "512.0 MiB", "2.3 GiB", "900 B".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit && exp < 4; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
