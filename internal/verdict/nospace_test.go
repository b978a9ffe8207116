package verdict

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestJudgeNoSpace: nothing to do without an alarm or while a member is starting; the alarmed members
// are disarmed once every database fits 90 % of the quota; otherwise the verdict names the members too
// full, with their sizes.
func TestJudgeNoSpace(t *testing.T) {
	noSpace := fmt.Errorf("health: %w: %w", etcd.ErrAlarm, etcd.ErrNoSpace)
	// inUse: the bytes in use of each member, the whole file when nil
	cluster := func(sizes, inUse []int64, health []error) *model.Cluster {
		e := &model.Etcd{ClusterID: 1, Leader: 1, Status: map[uint64]etcd.EndpointStatus{}, Health: map[uint64]error{}}
		for i := range sizes {
			id := uint64(i + 1)
			e.Members = append(e.Members, etcd.Member{ID: id, Name: fmt.Sprintf("n-%d", i)})
			if sizes[i] >= 0 {
				used := sizes[i]
				if inUse != nil {
					used = inUse[i]
				}
				e.Status[id] = etcd.EndpointStatus{DBSizeBytes: sizes[i], DBSizeInUseBytes: used}
			}
			e.Health[id] = health[i]
		}
		return model.Build(model.Input{Cluster: testutil.EtcdCluster("n"), Etcd: e})
	}
	starting := errors.New("timeout")
	for _, tc := range []struct {
		name    string
		sizes   []int64
		inUse   []int64
		health  []error
		disarm  string
		mention string
		defrag  string
	}{
		{name: "no alarm", sizes: []int64{950, 950, 950}, health: []error{nil, nil, nil}, disarm: "[]"},
		{name: "fits: disarm the alarmed", sizes: []int64{100, 200, 300}, health: []error{nil, noSpace, nil}, disarm: "[n-1]"},
		{name: "a member starting: wait", sizes: []int64{100, 200, -1}, health: []error{nil, noSpace, starting}, disarm: "[]"},
		{name: "too full", sizes: []int64{100, 900, 950}, health: []error{noSpace, noSpace, nil}, disarm: "[]",
			mention: "the database of n-1 (900 bytes), n-2 (950 bytes) fills more than 90% of the 1000-byte quota; raise spec.options.quotaBackendBytes", defrag: "[]"},
		{name: "files too full, data fits: defragment followers first, the leader last", sizes: []int64{950, 100, 950}, inUse: []int64{100, 100, 200},
			health: []error{noSpace, nil, nil}, disarm: "[]", mention: "their data fits: defragmenting n-2, then the alarm is disarmed", defrag: "[n-2 n-0]"},
		{name: "one file's data does not fit: only the others are defragmented", sizes: []int64{950, 950, 950}, inUse: []int64{950, 100, 100},
			health: []error{noSpace, nil, nil}, disarm: "[]", mention: "defragmenting n-1", defrag: "[n-1 n-2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeNoSpace(cluster(tc.sizes, tc.inUse, tc.health), 1000)
			var defrag []string
			for _, m := range v.Defragment {
				defrag = append(defrag, m.Name)
			}
			if tc.defrag != "" && fmt.Sprint(defrag) != tc.defrag {
				t.Errorf("defragment %v, want %s", defrag, tc.defrag)
			}
			var names []string
			for _, m := range v.Disarm {
				names = append(names, m.Name)
			}
			if got := fmt.Sprint(names); got != tc.disarm {
				t.Errorf("disarm %s, want %s", got, tc.disarm)
			}
			if (tc.mention == "") != (v.Full == "") || !strings.Contains(v.Full, tc.mention) {
				t.Errorf("full %q, want it to mention %q", v.Full, tc.mention)
			}
		})
	}
}
