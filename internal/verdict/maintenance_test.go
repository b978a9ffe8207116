package verdict

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestPlanDefragmentation: at a schedule time every voter with enough free space is due, the threshold
// adds voters whose file is mostly free at any time, MinReclaimable keeps small gains out, pending
// members stay pending until defragmented or gone, and the leader comes last.
func TestPlanDefragmentation(t *testing.T) {
	const mi = int64(1 << 20)
	created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	// three voters n-0, n-1, n-2 (n-1 leads) of sizes/inUse in MiB; learner n-3 is never due
	build := func(d *etcdv1beta1.DefragmentationSpec, st *etcdv1beta1.MaintenanceStatus, size, inUse [3]int64) *model.Cluster {
		e := &model.Etcd{ClusterID: 1, Leader: 2, Status: map[uint64]etcd.EndpointStatus{}, Health: map[uint64]error{}}
		for i := range 3 {
			id := uint64(i + 1)
			e.Members = append(e.Members, etcd.Member{ID: id, Name: fmt.Sprintf("n-%d", i)})
			e.Status[id] = etcd.EndpointStatus{DBSizeBytes: size[i] * mi, DBSizeInUseBytes: inUse[i] * mi}
			e.Health[id] = nil
		}
		e.Members = append(e.Members, etcd.Member{ID: 4, Name: "n-3", IsLearner: true})
		e.Status[4] = etcd.EndpointStatus{DBSizeBytes: 900 * mi, DBSizeInUseBytes: 1 * mi}
		c := testutil.EtcdCluster("n")
		c.CreationTimestamp = metav1.NewTime(created)
		c.Spec.Maintenance = &etcdv1beta1.MaintenanceSpec{Defragmentation: d}
		c.Status.Maintenance = st
		return model.Build(model.Input{Cluster: c, Etcd: e})
	}
	at := func(h int) time.Time { return created.Add(time.Duration(h) * time.Hour) }
	daily := &etcdv1beta1.DefragmentationSpec{Schedule: "0 3 * * *"}
	threshold := &etcdv1beta1.DefragmentationSpec{ThresholdPercent: ptr.To[int32](50)}
	small := resource.MustParse("1Mi")
	for _, tc := range []struct {
		name         string
		d            *etcdv1beta1.DefragmentationSpec
		st           *etcdv1beta1.MaintenanceStatus
		size, inUse  [3]int64
		now          time.Time
		want         []string
		wantSchedule time.Time
		why          string
	}{
		{"no schedule time yet", daily, nil, [3]int64{500, 500, 500}, [3]int64{10, 10, 10}, at(2), nil, time.Time{}, ""},
		{"schedule: every voter with 64Mi free, the leader last", daily, nil, [3]int64{500, 500, 500}, [3]int64{10, 10, 480}, at(4),
			[]string{"n-0", "n-1"}, at(3), "scheduled at 2026-12-01T03:00:00Z; 490.0 MiB of its 500.0 MiB database file is free"},
		{"schedule handled already", daily, &etcdv1beta1.MaintenanceStatus{LastScheduleTime: ptr.To(metav1.NewTime(at(3)))},
			[3]int64{500, 500, 500}, [3]int64{10, 10, 10}, at(20), nil, time.Time{}, ""},
		{"next day's time", daily, &etcdv1beta1.MaintenanceStatus{LastScheduleTime: ptr.To(metav1.NewTime(at(3)))},
			[3]int64{500, 500, 500}, [3]int64{10, 10, 10}, at(28), []string{"n-0", "n-2", "n-1"}, at(27), ""},
		{"threshold reached by one", threshold, nil, [3]int64{500, 500, 100}, [3]int64{300, 200, 60}, at(1),
			[]string{"n-1"}, time.Time{}, "300.0 MiB of its 500.0 MiB database file is free (60%, threshold 50%)"},
		{"threshold reached, but less than minReclaimable", threshold, nil, [3]int64{60, 60, 60}, [3]int64{10, 10, 10}, at(1), nil, time.Time{}, ""},
		{"threshold with a small minReclaimable", &etcdv1beta1.DefragmentationSpec{ThresholdPercent: ptr.To[int32](50), MinReclaimable: &small},
			nil, [3]int64{100, 100, 100}, [3]int64{10, 60, 10}, at(1), []string{"n-0", "n-2"}, time.Time{}, ""},
		{"pending kept, a member gone dropped", threshold, &etcdv1beta1.MaintenanceStatus{PendingDefragmentation: []string{"n-1", "gone", "n-2"}},
			[3]int64{100, 100, 100}, [3]int64{90, 90, 90}, at(1), []string{"n-2", "n-1"}, time.Time{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := PlanDefragmentation(build(tc.d, tc.st, tc.size, tc.inUse), tc.now)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(plan.Pending, tc.want) {
				t.Errorf("pending %v, want %v", plan.Pending, tc.want)
			}
			if !plan.ScheduleTime.Equal(tc.wantSchedule) {
				t.Errorf("schedule time %v, want %v", plan.ScheduleTime, tc.wantSchedule)
			}
			if tc.why != "" && len(tc.want) > 0 && !strings.Contains(plan.Why[tc.want[0]], tc.why) {
				t.Errorf("why %q, want %q", plan.Why[tc.want[0]], tc.why)
			}
		})
	}
	if plan, err := PlanDefragmentation(build(nil, nil, [3]int64{500, 500, 500}, [3]int64{1, 1, 1}), at(100)); err != nil || plan.Pending != nil {
		t.Errorf("without a policy: %v %v, want nothing", plan.Pending, err)
	}
	if _, err := PlanDefragmentation(build(&etcdv1beta1.DefragmentationSpec{Schedule: "not cron"}, nil, [3]int64{}, [3]int64{}), at(1)); err == nil {
		t.Error("a schedule that does not parse: no error")
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 900: "900 B", 1536: "1.5 KiB", 512 << 20: "512.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
