//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// TestDefragmentationShrinksDatabases: 48 MiB written, deleted and compacted leave most of every
// member's database file free; spec.maintenance.defragmentation with a threshold defragments each
// member once, the leader last, while a client keeps writing: every file shrinks, the status records
// it, and no acknowledged write is lost.
func TestDefragmentationShrinksDatabases(t *testing.T) {
	c := newCluster(t, "e2e-defrag", "demo", 3)
	assertAvailable(t, c, availableTimeout)
	ctx := context.Background()
	ep := clientServiceEndpoint(t, c)
	writeDeleteCompact(t, etcdClient(t, ep), 48)
	w := startWriter(t, ep) // its writes also let etcd release the compacted pages
	pods, memberCli := memberClients(ctx, t, c)
	before := map[string]int64{}
	poll.Eventually(t, statusTimeout, "32 MiB free in every member's file", func(ctx context.Context) error {
		for name, p := range pods {
			st, err := memberCli[name].Status(ctx, podEndpoint(p))
			if err != nil {
				return err
			}
			if st.DbSize-st.DbSizeInUse < 32<<20 {
				return fmt.Errorf("%s: %d of %d bytes free", name, st.DbSize-st.DbSizeInUse, st.DbSize)
			}
			before[name] = st.DbSize
		}
		return nil
	})

	start := time.Now()
	minFree := resource.MustParse("16Mi")
	poll.Eventually(t, statusTimeout, "set the defragmentation policy", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		got.Spec.Maintenance = &etcdv1beta1.MaintenanceSpec{Defragmentation: &etcdv1beta1.DefragmentationSpec{
			ThresholdPercent: ptr.To[int32](50), MinReclaimable: &minFree}}
		return k8s.Update(ctx, got)
	})
	var last *etcdv1beta1.DefragmentationRecord
	poll.Eventually(t, recoverTimeout, "every member defragmented", func(ctx context.Context) error {
		for name := range before {
			if err := eventSaying(ctx, c, "Defragmented", corev1.EventTypeNormal, "Defragmented "+name+" "); err != nil {
				return err
			}
		}
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		if st := got.Status.Maintenance; st == nil || len(st.PendingDefragmentation) > 0 || st.LastDefragmentation == nil {
			return fmt.Errorf("status.maintenance %+v", st)
		} else {
			last = st.LastDefragmentation
		}
		return nil
	})
	t.Logf("defragmentation: 3 members in %s after the policy was set; the last: %s, %d ms, %d -> %d bytes",
		time.Since(start).Round(100*time.Millisecond), last.Member, last.DurationMillis, last.DBSizeBeforeBytes, last.DBSizeAfterBytes)
	if err := eventSaying(ctx, c, "MovedLeader", corev1.EventTypeNormal, "from "+last.Member); err != nil {
		t.Errorf("the last member defragmented, %s, had not led or leadership was not moved first: %v", last.Member, err)
	}
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	for name, p := range pods {
		st, err := memberCli[name].Status(sctx, podEndpoint(p))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("defragmentation: %s database file %d -> %d bytes", name, before[name], st.DbSize)
		if st.DbSize > before[name]/2 {
			t.Errorf("%s: database file %d bytes after, %d before: want at most half", name, st.DbSize, before[name])
		}
	}
	assertAvailable(t, c, statusTimeout)
	w.stopAndVerify(t, ep) // 0 acknowledged writes lost
}

// writeDeleteCompact writes n values of 1 MiB with cli, deletes them and compacts them away: the
// members' database files keep their size, with that much free for a defragmentation to release.
func writeDeleteCompact(t testing.TB, cli *clientv3.Client, n int) {
	t.Helper()
	value := strings.Repeat("x", 1<<20)
	for i := range n {
		pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cli.Put(pctx, fmt.Sprintf("frag/%02d", i), value)
		cancel()
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	del, err := cli.Delete(wctx, "frag/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(wctx, del.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
}
