package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// movedLeaderFrom returns the member that cluster c's last MovedLeader event ("Moved leadership from X
// to Y …") moved leadership from, failing t when there is none.
func movedLeaderFrom(t *testing.T, c *etcdv1beta1.EtcdCluster) string {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(c.Namespace)); err != nil {
		t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].EventTime.Before(&list.Items[j].EventTime) })
	from := ""
	for _, e := range list.Items {
		if f := strings.Fields(e.Note); e.Reason == "MovedLeader" && len(f) > 3 && f[1] == "leadership" && f[2] == "from" {
			from = f[3]
		}
	}
	if from == "" {
		t.Fatalf("no MovedLeader event: leadership was not moved before the leader's defragmentation")
	}
	return from
}

// TestDefragmentationOverThreshold: once a compaction leaves most of every member's database file
// free, spec.maintenance.defragmentation with a threshold defragments each member of a real etcd
// cluster once, one at a time, the leader last after leadership moved away from it; every file
// shrinks, and the events and status.maintenance record it.
func TestDefragmentationOverThreshold(t *testing.T) {
	c := createCluster(t, "defrag", 3)
	ctx := context.Background()
	names := []string{"defrag-0", "defrag-1", "defrag-2"}
	hosts := []string{"127.0.0.151", "127.0.0.152", "127.0.0.153"}
	members := testenv.StartEtcd(t, names, hosts)
	runPods(t, c, map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]})
	c = waitAvailable(t, c, 3)

	// 16 MiB written, deleted and compacted away: most of each file is free pages. Every member is
	// over the 50% threshold before the policy is set (bbolt frees the pages over several write
	// transactions), so all three are due in the same pass and the leader is planned last.
	cli := fragment(t, members, func(st *clientv3.StatusResponse) bool {
		free := st.DbSize - st.DbSizeInUse
		return free >= 8<<20 && free*100 >= 60*st.DbSize
	})
	before := map[string]int64{}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, m := range members {
		st, err := cli.Status(wctx, m.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		before[m.Name] = st.DbSize
	}
	minFree := resource.MustParse("4Mi")
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Maintenance = &etcdv1beta1.MaintenanceSpec{Defragmentation: &etcdv1beta1.DefragmentationSpec{
			ThresholdPercent: ptr.To[int32](50), MinReclaimable: &minFree}}
	})
	var order []string
	testutil.Eventually(t, waitTimeout, "every member defragmented once", func(context.Context) error {
		list := &eventsv1.EventList{}
		if err := k8s.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].EventTime.Before(&list.Items[j].EventTime) })
		order = order[:0]
		for _, e := range list.Items {
			if e.Reason == "Defragmented" {
				order = append(order, strings.Fields(e.Note)[1])
			}
		}
		if len(order) < 3 {
			return fmt.Errorf("defragmented %v", order)
		}
		if st := getCluster(t, c).Status.Maintenance; st == nil || len(st.PendingDefragmentation) > 0 || st.LastDefragmentation == nil {
			return fmt.Errorf("status.maintenance %+v", st)
		}
		return nil
	})
	// the leader when its turn came (leadership may also move by itself, on a loaded machine) is
	// defragmented last, once leadership has moved from it
	leader := movedLeaderFrom(t, c)
	if len(order) != 3 || order[2] != leader {
		t.Errorf("defragmentation order %v, want each member once and %s, the leader leadership moved from, last", order, leader)
	}
	st := getCluster(t, c).Status.Maintenance
	if l := st.LastDefragmentation; l.Member != leader || l.DBSizeAfterBytes >= l.DBSizeBeforeBytes {
		t.Errorf("last defragmentation %+v, want %s with a smaller file after", l, leader)
	}
	for _, m := range members {
		st, err := cli.Status(wctx, m.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		if st.DbSize > before[m.Name]/2 {
			t.Errorf("%s: database file %d bytes after, %d before: want it at most half", m.Name, st.DbSize, before[m.Name])
		}
	}
	waitAvailable(t, c, 3)
}

// fragment writes 16 values of 1 MiB through a client of members' first member, deletes them and
// compacts them away, then writes small values until every member's status satisfies freed (bbolt
// frees the compacted pages in a later write transaction, once no reader that began before the
// compaction is open: the operator's checks read too). It returns the client (closed when the test
// ends).
func fragment(t *testing.T, members []*testenv.EtcdMember, freed func(*clientv3.StatusResponse) bool) *clientv3.Client {
	t.Helper()
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{members[0].ClientURL()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	value := strings.Repeat("x", 1<<20)
	for i := range 16 {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := cli.Put(pctx, fmt.Sprintf("big/%02d", i), value)
		cancel()
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	del, err := cli.Delete(wctx, "big/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(wctx, del.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the compacted pages freed in every member's file", func(ctx context.Context) error {
		if _, err := cli.Put(ctx, "tick", time.Now().String()); err != nil {
			return err
		}
		for _, m := range members {
			st, err := cli.Status(ctx, m.ClientURL())
			if err != nil {
				return err
			}
			if !freed(st) {
				return fmt.Errorf("%s: file %d bytes, %d in use", m.Name, st.DbSize, st.DbSizeInUse)
			}
		}
		return nil
	})
	return cli
}
