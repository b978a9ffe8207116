package verdict

import (
	"fmt"
	"sort"
	"strings"

	"github.com/etcdkit/etcd-operator/internal/model"
)

// NoSpaceMargin is the share of the quota a database may fill for its NOSPACE alarm to be disarmed:
// below it, writes have room again; above it, the alarm would come back at once.
const NoSpaceMargin = 0.9

// NoSpace is the verdict on etcd's NOSPACE alarm.
type NoSpace struct {
	// Disarm are the members whose alarm may be disarmed now: every member serves and every database
	// fits the quota with room to spare.
	Disarm []*model.Member
	// Full, when not empty, says why the alarm stays: the message for the Progressing condition.
	Full string
	// Defragment are the members, followers first and the leader last, whose database file does not
	// fit the quota with room to spare but whose data does: a defragmentation gives the rest back,
	// after which the alarm can be disarmed. Set only with Full.
	Defragment []*model.Member
}

// JudgeNoSpace judges the NOSPACE alarms of m against the quota (bytes): nothing while no member
// raised one or a member is still starting (the alarms of all are judged at once); the members to
// disarm when every database fits; otherwise why it stays. Every member's database counts: one that
// does not fit would raise the alarm again at once.
func JudgeNoSpace(m *model.Cluster, quota int64) NoSpace {
	var alarmed []*model.Member
	var full []string
	for _, mem := range m.Listed() {
		if mem.NoSpace() {
			alarmed = append(alarmed, mem)
		}
		if st := mem.Status; st == nil || float64(st.DBSizeBytes) >= NoSpaceMargin*float64(quota) {
			var size int64
			if st != nil {
				size = st.DBSizeBytes
			}
			full = append(full, fmt.Sprintf("%s (%d bytes)", mem.Name, size))
		}
	}
	if len(alarmed) == 0 {
		return NoSpace{}
	}
	for _, mem := range m.Listed() {
		if !mem.Serving() {
			return NoSpace{}
		}
	}
	if len(full) > 0 {
		sort.Strings(full)
		v := NoSpace{Full: fmt.Sprintf("NOSPACE: etcd refuses writes: the database of %s fills more than %d%% of the %d-byte quota",
			strings.Join(full, ", "), int(NoSpaceMargin*100), quota)}
		if v.Defragment = shrinkable(m, quota); len(v.Defragment) > 0 {
			v.Full += fmt.Sprintf("; their data fits: defragmenting %s, then the alarm is disarmed", v.Defragment[0].Name)
		} else {
			v.Full += "; raise spec.options.quotaBackendBytes (the members roll, then the alarm is disarmed), or delete keys and compact (the operator then defragments the members)"
		}
		return v
	}
	return NoSpace{Disarm: alarmed}
}

// shrinkable returns the members of m, followers by name and the leader last, whose database file
// fills more than NoSpaceMargin of quota while the part in use does not: a defragmentation brings
// them under it.
func shrinkable(m *model.Cluster, quota int64) []*model.Member {
	var out []*model.Member
	leader := m.Leader()
	for _, mem := range m.Listed() {
		st := mem.Status
		if st == nil || float64(st.DBSizeBytes) < NoSpaceMargin*float64(quota) || float64(st.DBSizeInUseBytes) >= NoSpaceMargin*float64(quota) {
			continue
		}
		out = append(out, mem)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if li, lj := out[i] == leader, out[j] == leader; li != lj {
			return lj
		}
		return out[i].Name < out[j].Name
	})
	return out
}
