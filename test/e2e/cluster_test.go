//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// TestC07_C14_BootstrapAndIdle: a new 3-member cluster becomes Available with 3 started voters that
// agree on one cluster ID and no container restart (C07); a key put through the client Service is
// read back from every member; idle, it causes no API writes and at most one reconcile per health
// check interval, and its status shows a deleted member promptly (C14).
func TestC07_C14_BootstrapAndIdle(t *testing.T) {
	// The operator's counters are global: the namespaces of earlier tests (clusters, scheduled
	// backups) must be gone before the idle window is measured.
	waitOtherTestNamespacesGone(t, "e2e-c07")
	c := newCluster(t, "e2e-c07", "demo", 3)
	took, got := assertAvailable(t, c, availableTimeout)
	t.Logf("C07: apply -> Available in %s", took.Round(100*time.Millisecond))

	ctx := context.Background()
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 3 {
		t.Fatalf("%d member pods, want 3", len(pods))
	}
	for name, n := range restarts(pods) {
		if n != 0 {
			t.Errorf("C07: etcd in %s restarted %d times during bootstrap, want 0", name, n)
		}
	}
	// etcd started once every member had its address, told so by the operator (not by the annotation,
	// a second or two later, nor by the init container's deadline)
	for name, p := range pods {
		raw, err := kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: resources.AwaitPeersContainerName}).DoRaw(ctx)
		if err != nil || !strings.Contains(string(raw), "the operator's POST") {
			t.Errorf("C07: %s's %s did not end on the operator's word: %q, %v", name, resources.AwaitPeersContainerName, raw, err)
		} else {
			t.Logf("C07: %s: %s", name, strings.TrimSpace(string(raw)))
		}
	}
	var clusterID uint64
	for name, p := range pods {
		v, err := viewFrom(ctx, podEndpoint(p))
		if err != nil {
			t.Fatalf("member list from %s: %v", name, err)
		}
		if clusterID == 0 {
			clusterID = v.clusterID
		}
		if v.clusterID != clusterID {
			t.Errorf("C07: %s reports cluster ID %x, another member %x", name, v.clusterID, clusterID)
		}
		if len(v.members) != 3 {
			t.Errorf("C07: %s lists %d members, want 3", name, len(v.members))
		}
		for _, m := range v.members {
			if m.IsLearner || m.Name == "" {
				t.Errorf("C07: member %+v is a learner or not started", m)
			}
		}
	}
	if got.Status.ClusterID != etcd.FormatID(clusterID) {
		t.Errorf("status.clusterID %s, etcd says %s", got.Status.ClusterID, etcd.FormatID(clusterID))
	}

	// C14: idle. Wait until the operator has nothing left to do, then watch for a window.
	poll.Eventually(t, statusTimeout, "Progressing=False", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		if !meta.IsStatusConditionFalse(got.Status.Conditions, etcdv1beta1.ConditionProgressing) {
			return fmt.Errorf("conditions %v", got.Status.Conditions)
		}
		return nil
	})
	// The status carries each member's database size and version, refreshed by the periodic health
	// check: the window starts once it agrees with what every member reports now, so that a change
	// made before the window (etcd recording its own bootstrap entries) is not counted as idle work.
	poll.Eventually(t, statusTimeout+time.Minute, "status agrees with every member", func(ctx context.Context) error {
		return statusAgreesWithMembers(ctx, c, pods)
	})
	before, err := getCluster(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	// What the operator writes is counted by its etcd_operator_api_writes_total, by the namespace of the
	// object written (this cluster's: writes for other clusters are theirs); the cluster object's
	// resourceVersion shows any status write. (Pods are also written by kubelet, so their versions say
	// nothing about the operator.)
	rvBefore := before.ResourceVersion
	writesBefore, err := operatorMetric(ctx, "etcd_operator_api_writes_total", `namespace="`+c.Namespace+`"`)
	if err != nil {
		t.Fatalf("scrape operator metrics: %v", err)
	}
	recBefore, err := operatorMetric(ctx, "controller_runtime_reconcile_total", `controller="etcdcluster"`)
	if err != nil {
		t.Fatalf("scrape operator metrics: %v", err)
	}
	// Count what kubelet and the other controllers change in the namespace meanwhile: each change of an
	// owned object legitimately brings one pass (which must write nothing).
	changes := countChanges(t, c.Namespace, idleWindow)
	after, err := getCluster(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	rvAfter := after.ResourceVersion
	writesAfter, err := operatorMetric(ctx, "etcd_operator_api_writes_total", `namespace="`+c.Namespace+`"`)
	if err != nil {
		t.Fatalf("scrape operator metrics: %v", err)
	}
	recAfter, err := operatorMetric(ctx, "controller_runtime_reconcile_total", `controller="etcdcluster"`)
	if err != nil {
		t.Fatalf("scrape operator metrics: %v", err)
	}
	if rvAfter != rvBefore {
		t.Errorf("C14: the EtcdCluster was written while idle (resourceVersion %s -> %s); status diff (-before +after):\n%s",
			rvBefore, rvAfter, cmp.Diff(before.Status, after.Status))
	}
	if n := writesAfter - writesBefore; n != 0 {
		t.Errorf("C14: the operator sent %v API writes while the cluster was idle, want 0", n)
	}
	// One health check per interval (60 s) for this cluster, plus one for a boundary, plus one per
	// change of an object the cluster owns.
	if n := recAfter - recBefore; n > 2+float64(changes) {
		t.Errorf("C14: %v reconciles in %s of idle with %d changes of owned objects, want at most %d", n, idleWindow, changes, 2+changes)
	} else {
		t.Logf("C14: %v reconciles (%d changes of owned objects by others) and %v operator API writes in %s of idle", n, changes, writesAfter-writesBefore, idleWindow)
	}

	// C14 under client load: clients writing all the time move the revision and the database sizes the
	// status carries; the operator writes them when a pass runs anyway, and its own write must not start
	// another pass (once one did, a loaded cluster's status was written about 10 times a second).
	w := startWriter(t, clientServiceEndpoint(t, c))
	writesBefore, err = operatorMetric(ctx, "etcd_operator_api_writes_total", `namespace="`+c.Namespace+`"`)
	if err != nil {
		t.Fatalf("scrape operator metrics: %v", err)
	}
	recBefore, err = operatorMetric(ctx, "controller_runtime_reconcile_total", `controller="etcdcluster"`)
	if err != nil {
		t.Fatalf("scrape operator metrics: %v", err)
	}
	changes = countChanges(t, c.Namespace, loadedWindow)
	writesAfter, err = operatorMetric(ctx, "etcd_operator_api_writes_total", `namespace="`+c.Namespace+`"`)
	if err != nil {
		t.Fatalf("scrape operator metrics: %v", err)
	}
	recAfter, err = operatorMetric(ctx, "controller_runtime_reconcile_total", `controller="etcdcluster"`)
	if err != nil {
		t.Fatalf("scrape operator metrics: %v", err)
	}
	w.stopAndVerify(t, podEndpoint(pods["demo-0"]))
	// at most one health check falls in the window, and each change of an owned object by others
	// brings a pass; each pass writes the status at most once
	if n, most := writesAfter-writesBefore, float64(1+changes); n > most {
		t.Errorf("C14: the operator sent %v API writes in %s while clients wrote, want at most %v", n, loadedWindow, most)
	}
	if n, most := recAfter-recBefore, float64(2+changes); n > most {
		t.Errorf("C14: %v reconciles in %s while clients wrote, with %d changes of owned objects, want at most %v", n, loadedWindow, changes, most)
	} else {
		t.Logf("C14: %v reconciles and %v operator API writes in %s while a client wrote (%d changes of owned objects by others)", n, writesAfter-writesBefore, loadedWindow, changes)
	}

	// C07: a write through the client Service, read back linearizably through each member (after the
	// idle window, which it would end).
	svc := etcdClient(t, clientServiceEndpoint(t, c))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := svc.Put(wctx, "k", "v"); err != nil {
		t.Fatalf("put through the client Service: %v", err)
	}
	for name, p := range pods {
		resp, err := etcdClient(t, podEndpoint(p)).Get(wctx, "k")
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
			t.Errorf("get k through %s: %v %v", name, resp, err)
		}
	}

	// C14: the status reflects a deleted member promptly; observedGeneration is current. The member
	// deleted is the leader, and the cluster stays Available throughout: it hands leadership over as it
	// stops, and the 2 other voters make a quorum.
	victim := pods[leaderOf(ctx, pods)]
	if victim == nil {
		t.Fatal("no member reports a leader")
	}
	aw := watchAvailable(t, c)
	if err := k8s.Delete(ctx, victim); err != nil {
		t.Fatal(err)
	}
	shown := poll.Eventually(t, statusTimeout, "status shows the leader "+victim.Name+" gone or unhealthy", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		for _, m := range got.Status.Members {
			if m.Name == victim.Name && !m.Healthy {
				return nil
			}
		}
		return fmt.Errorf("members %+v", got.Status.Members)
	})
	t.Logf("C14: the status showed the deleted member %s after the delete call", shown.Round(100*time.Millisecond))
	back, got := assertAvailable(t, c, recoverTimeout)
	t.Logf("member pod deleted -> 3 healthy voters again in %s", (shown + back).Round(100*time.Millisecond))
	aw.assertNeverUnavailable(t, "C14: a member pod deleted")
	if got.Status.ObservedGeneration != got.Generation {
		t.Errorf("observedGeneration %d, generation %d", got.Status.ObservedGeneration, got.Generation)
	}
}

// countChanges watches the objects of namespace ns whose changes bring the cluster a pass (pods, claims,
// Services, the PodDisruptionBudget, whose status the disruption controller updates as pods change)
// for d (the window this test observes) and returns how many changes it saw.
func countChanges(t testing.TB, ns string, d time.Duration) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	opts := metav1.ListOptions{}
	var watchers []watch.Interface
	for _, start := range []func() (watch.Interface, error){
		func() (watch.Interface, error) { return kube.CoreV1().Pods(ns).Watch(ctx, opts) },
		func() (watch.Interface, error) { return kube.CoreV1().PersistentVolumeClaims(ns).Watch(ctx, opts) },
		func() (watch.Interface, error) { return kube.CoreV1().Services(ns).Watch(ctx, opts) },
		func() (watch.Interface, error) { return kube.PolicyV1().PodDisruptionBudgets(ns).Watch(ctx, opts) },
	} {
		w, err := start()
		if err != nil {
			t.Fatalf("watch namespace %s: %v", ns, err)
		}
		defer w.Stop()
		watchers = append(watchers, w)
	}
	n := 0
	for _, w := range watchers {
		go func() { <-ctx.Done(); w.Stop() }()
	}
	events := make(chan struct{}, 1024)
	for _, w := range watchers {
		go func() {
			for ev := range w.ResultChan() {
				// a watch without a resourceVersion first replays every object as Added: count only changes
				if ev.Type == watch.Modified || ev.Type == watch.Deleted {
					events <- struct{}{}
				}
			}
		}()
	}
	for {
		select {
		case <-events:
			n++
		case <-ctx.Done():
			return n
		}
	}
}

// TestC04_SingleMemberPodDeleted: the only member's pod is deleted; it comes back on its claim with
// its data, the same cluster ID and the same member ID.
func TestC04_SingleMemberPodDeleted(t *testing.T) {
	c := newCluster(t, "e2e-c04", "demo", 1)
	assertAvailable(t, c, availableTimeout)
	ctx := context.Background()
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	p := pods["demo-0"]
	cli := etcdClient(t, podEndpoint(p))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Put(wctx, "foo", "hello"); err != nil {
		t.Fatal(err)
	}
	before, err := viewFrom(ctx, podEndpoint(p))
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	poll.Eventually(t, recoverTimeout, "a new demo-0 pod", func(ctx context.Context) error {
		pods, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		if np, ok := pods["demo-0"]; !ok || np.UID == p.UID {
			return fmt.Errorf("old pod still there or none yet")
		}
		return nil
	})
	assertAvailable(t, c, recoverTimeout)
	t.Logf("C04: single member pod deleted -> Available again in %s", time.Since(start).Round(100*time.Millisecond))
	pods, err = memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	np := pods["demo-0"]
	after, err := viewFrom(ctx, podEndpoint(np))
	if err != nil {
		t.Fatal(err)
	}
	if after.clusterID != before.clusterID || len(after.members) != 1 || after.members[0].ID != before.members[0].ID {
		t.Errorf("C04: cluster %x members %+v after, %x %+v before: want the same cluster and member ID", after.clusterID, after.members, before.clusterID, before.members)
	}
	// a context of its own: wctx was made before the pod was deleted, and recovery may outlast it
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	resp, err := etcdClient(t, podEndpoint(np)).Get(rctx, "foo")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "hello" {
		t.Errorf("C04: foo after restart: %v %v, want hello", resp, err)
	}
}

// TestC13_DeleteWithoutQuorum: every member is frozen (no quorum, no answers); deleting the cluster
// still removes everything it owns.
func TestC13_DeleteWithoutQuorum(t *testing.T) {
	c := newCluster(t, "e2e-c13", "demo", 3)
	_, got := assertAvailable(t, c, availableTimeout)
	ctx := context.Background()
	pids, err := etcdPIDs(string(got.UID))
	if err != nil || len(pids) != 3 {
		t.Fatalf("etcd processes of the cluster: %v %v, want 3 (run the tests on the node)", pids, err)
	}
	t.Cleanup(func() { // let frozen processes that outlive a failed test finish
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	})
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("freeze etcd pid %d: %v", pid, err)
		}
	}
	poll.Eventually(t, statusTimeout+availableTimeout, "the operator sees no quorum", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		if meta.IsStatusConditionTrue(got.Status.Conditions, etcdv1beta1.ConditionAvailable) {
			return fmt.Errorf("still Available")
		}
		return nil
	})
	start := time.Now()
	if err := k8s.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, deleteTimeout, "everything the cluster owned is gone", func(ctx context.Context) error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), &etcdv1beta1.EtcdCluster{}); err == nil {
			return errors.New("EtcdCluster still there")
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("EtcdCluster still there (%w)", err)
		}
		sel := client.MatchingLabels{etcdv1beta1.LabelCluster: c.Name}
		for kind, l := range map[string]client.ObjectList{"pods": &corev1.PodList{}, "claims": &corev1.PersistentVolumeClaimList{}, "services": &corev1.ServiceList{}} {
			if err := k8s.List(ctx, l, client.InNamespace(c.Namespace), sel); err != nil {
				return err
			}
			if n := meta.LenList(l); n > 0 {
				return fmt.Errorf("%d %s left", n, kind)
			}
		}
		return nil
	})
	t.Logf("C13: deleted without quorum; everything gone in %s", time.Since(start).Round(100*time.Millisecond))
}

// waitOtherTestNamespacesGone waits until no e2e- namespace but own is being deleted: what earlier
// tests left terminating (clusters being deleted, scheduled backups) would otherwise show in the
// operator's global counters. (A failed test keeps its namespace, Active, for inspection.)
func waitOtherTestNamespacesGone(t testing.TB, own string) {
	t.Helper()
	poll.Eventually(t, 5*time.Minute, "earlier tests' namespaces deleted", func(ctx context.Context) error {
		list := &corev1.NamespaceList{}
		if err := k8s.List(ctx, list); err != nil {
			return err
		}
		var left []string
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, "e2e-") && ns.Name != own && ns.Status.Phase == corev1.NamespaceTerminating {
				left = append(left, ns.Name+" ("+string(ns.Status.Phase)+")")
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("namespaces %v still exist", left)
		}
		return nil
	})
}

// statusAgreesWithMembers returns nil once the EtcdCluster's status shows, for every member pod, the
// database size and server version that member reports itself.
func statusAgreesWithMembers(ctx context.Context, c *etcdv1beta1.EtcdCluster, pods map[string]*corev1.Pod) error {
	got, err := getCluster(ctx, c)
	if err != nil {
		return err
	}
	shown := map[string]etcdv1beta1.MemberStatus{}
	for _, m := range got.Status.Members {
		shown[m.Name] = m
	}
	for name, p := range pods {
		cli, err := etcd.New(ctx, etcd.Config{Endpoints: []string{podEndpoint(p)}, DialTimeout: 5 * time.Second, TLS: tlsFor(podEndpoint(p))})
		if err != nil {
			return err
		}
		st, err := cli.Status(ctx, podEndpoint(p))
		_ = cli.Close()
		if err != nil {
			return fmt.Errorf("status of %s: %w", name, err)
		}
		if m := shown[name]; m.DBSizeBytes != st.DBSizeBytes || m.Version != st.Version {
			return fmt.Errorf("%s: status shows %d bytes, version %q; the member reports %d bytes, version %q",
				name, m.DBSizeBytes, m.Version, st.DBSizeBytes, st.Version)
		}
	}
	return nil
}
