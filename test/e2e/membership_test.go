//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// scaleTimeout bounds one change of replicas.
const scaleTimeout = 120 * time.Second

func scale(t testing.TB, c *etcdv1beta1.EtcdCluster, n int32) {
	t.Helper()
	poll.Eventually(t, statusTimeout, "set replicas", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		got.Spec.Replicas = ptr.To(n)
		return k8s.Update(ctx, got)
	})
	c.Spec.Replicas = ptr.To(n)
}

// watchLearners samples the member list every 100 ms until stopped, and returns the most learners
// and the fewest healthy voters (relative to quorum) it saw.
type learnerWatch struct {
	stop        chan struct{}
	done        chan struct{}
	mu          sync.Mutex
	maxLearners int
}

func watchMembers(c *etcdv1beta1.EtcdCluster) *learnerWatch {
	w := &learnerWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			pods, err := memberPods(ctx, c)
			if err == nil {
				for _, p := range pods {
					if p.Status.PodIP == "" {
						continue
					}
					if v, err := viewFrom(ctx, podEndpoint(p)); err == nil {
						n := 0
						for _, m := range v.members {
							if m.IsLearner {
								n++
							}
						}
						w.mu.Lock()
						w.maxLearners = max(w.maxLearners, n)
						w.mu.Unlock()
						break
					}
				}
			}
			cancel()
		}
	}()
	return w
}

func (w *learnerWatch) finish() int {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxLearners
}

// assertMembers checks, through every member pod, that the cluster has exactly n started voters, no
// learner, one cluster ID and no etcd container restart, and returns the member list.
func assertMembers(t testing.TB, c *etcdv1beta1.EtcdCluster, n int, clusterID uint64) []etcd.Member {
	t.Helper()
	return assertMembersAllowRestart(t, c, n, clusterID)
}

// assertMembersAllowRestart is assertMembers where the named members may have restarted.
func assertMembersAllowRestart(t testing.TB, c *etcdv1beta1.EtcdCluster, n int, clusterID uint64, mayRestart ...string) []etcd.Member {
	t.Helper()
	ctx := context.Background()
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != n {
		t.Fatalf("%d member pods, want %d", len(pods), n)
	}
	var members []etcd.Member
	for name, p := range pods {
		v, err := viewFrom(ctx, podEndpoint(p))
		if err != nil {
			t.Fatalf("member list through %s: %v", name, err)
		}
		if clusterID != 0 && v.clusterID != clusterID {
			t.Errorf("%s reports cluster ID %x, want %x", name, v.clusterID, clusterID)
		}
		if len(v.members) != n {
			t.Errorf("%s lists %d members, want %d: %+v", name, len(v.members), n, v.members)
		}
		for _, m := range v.members {
			if m.IsLearner || m.Name == "" {
				t.Errorf("member %+v is a learner or not started", m)
			}
			if _, ok := pods[m.Name]; !ok {
				t.Errorf("member %s has no pod", m.Name)
			}
		}
		members = v.members
	}
	for name, r := range restarts(pods) {
		if r != 0 && !slices.Contains(mayRestart, name) {
			t.Errorf("etcd in %s restarted %d times", name, r)
		}
	}
	return members
}

func clusterIDOf(t testing.TB, c *etcdv1beta1.EtcdCluster) uint64 {
	t.Helper()
	got, err := getCluster(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	id, err := etcd.ParseID(got.Status.ClusterID)
	if err != nil {
		t.Fatalf("status.clusterID %q: %v", got.Status.ClusterID, err)
	}
	return id
}

// TestScaling_1_3_5_3_1: a cluster grows and shrinks one member at a time with at most one learner,
// under a continuous writer that loses no acknowledged write; the cluster ID never changes (C08
// covers the growth from 1 with 10k keys).
func TestScaling_1_3_5_3_1(t *testing.T) {
	c := newCluster(t, "e2e-scale", "demo", 1)
	assertAvailable(t, c, availableTimeout)
	id := clusterIDOf(t, c)
	ctx := context.Background()

	// C08: ~10k keys before growing, so that learners have something to catch up on.
	seed := etcdClient(t, clientServiceEndpoint(t, c))
	for i := 0; i < 10000; i += 100 {
		ops := make([]clientv3.Op, 0, 100)
		for j := i; j < i+100; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("seed/%05d", j), fmt.Sprintf("value-%05d-%s", j, strings.Repeat("x", 200))))
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := seed.Txn(wctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			t.Fatalf("seed keys: %v", err)
		}
	}

	w := startWriter(t, clientServiceEndpoint(t, c))
	watch := watchMembers(c)
	for i, n := range []int32{3, 5, 3, 1} {
		var compared string // before 5 -> 3: the last comparison the status reports
		if i == 2 {
			compared = consistencyMessage(t, c)
		}
		start := time.Now()
		scale(t, c, n)
		assertAvailable(t, c, scaleTimeout)
		t.Logf("scaled to %d in %s", n, time.Since(start).Round(100*time.Millisecond))
		assertMembers(t, c, int(n), id)
		if i == 2 { // 5 -> 3: two members left
			consistencyCovers(t, c, 3, compared, start)
		}
	}
	if n := watch.finish(); n > 1 {
		t.Errorf("C08: %d learners at once, want at most 1", n)
	}
	pods, _ := memberPods(ctx, c)
	for _, p := range pods {
		w.stopAndVerify(t, podEndpoint(p))
		resp, err := etcdClient(t, podEndpoint(p)).Get(ctx, "seed/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil || resp.Count != 10000 {
			t.Errorf("C08: seed keys after scaling: %v %v, want 10000", resp, err)
		}
	}
}

// consistencyMessage returns the message of c's DataInconsistent condition ("" without one).
func consistencyMessage(t *testing.T, c *etcdv1beta1.EtcdCluster) string {
	t.Helper()
	got, err := getCluster(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if d := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionDataInconsistent); d != nil {
		return d.Message
	}
	return ""
}

// consistencyCovers waits until the DataInconsistent condition reports a comparison of n members other
// than the one it reported before (before; the writer moves the revision on, so that a new comparison
// says another revision): the comparison runs again within about a minute of a member joining or
// leaving, not at the next interval (10 minutes). since is when the members changed.
func consistencyCovers(t *testing.T, c *etcdv1beta1.EtcdCluster, n int, before string, since time.Time) {
	t.Helper()
	want := fmt.Sprintf("all %d members hashed to", n)
	poll.Eventually(t, 90*time.Second, "DataInconsistent: a new comparison, "+want, func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		d := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionDataInconsistent)
		if d == nil || d.Status != metav1.ConditionFalse || !strings.Contains(d.Message, want) || d.Message == before {
			return fmt.Errorf("DataInconsistent %+v (before the change: %q)", d, before)
		}
		return nil
	})
	t.Logf("the members changed -> DataInconsistent reports a new comparison of %d members in %s", n, time.Since(since).Round(100*time.Millisecond))
}

// TestC02_MemberPodAndClaimDeleted: a member loses its pod and its data; the operator removes its
// stale ID and adds a fresh member under the same name, which joins as a learner and is promoted.
func TestC02_MemberPodAndClaimDeleted(t *testing.T) {
	c := newCluster(t, "e2e-c02", "demo", 3)
	assertAvailable(t, c, availableTimeout)
	id := clusterIDOf(t, c)
	ctx := context.Background()
	svc := clientServiceEndpoint(t, c)
	if _, err := etcdClient(t, svc).Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	before := assertMembers(t, c, 3, id)
	var oldID uint64
	for _, m := range before {
		if m.Name == "demo-1" {
			oldID = m.ID
		}
	}
	w := startWriter(t, svc)
	start := time.Now()
	deleteMemberWithData(t, c, "demo-1")
	waitReplaced(t, c, "demo-1", oldID, scaleTimeout)
	t.Logf("C02: member pod and claim deleted -> 3 healthy voters in %s", time.Since(start).Round(100*time.Millisecond))
	after := assertMembers(t, c, 3, id)
	for _, m := range after {
		if m.ID == oldID {
			t.Errorf("C02: the old member ID %x is still there", oldID)
		}
	}
	pods, _ := memberPods(ctx, c)
	resp, err := etcdClient(t, podEndpoint(pods["demo-1"])).Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Errorf("C02: k through the new demo-1: %v %v", resp, err)
	}
	w.stopAndVerify(t, podEndpoint(pods["demo-1"]))
}

// TestC03_ShrinkThenGrow: 3 -> 1 -> 3; the members added back get fresh claims (no member starts on
// a removed member's data), one cluster ID, no restarts.
func TestC03_ShrinkThenGrow(t *testing.T) {
	c := newCluster(t, "e2e-c03", "demo", 3)
	assertAvailable(t, c, availableTimeout)
	id := clusterIDOf(t, c)
	ctx := context.Background()
	if _, err := etcdClient(t, clientServiceEndpoint(t, c)).Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	claims := map[string]string{}
	list := &corev1.PersistentVolumeClaimList{}
	if err := k8s.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		claims[p.Name] = string(p.UID)
	}
	scale(t, c, 1)
	assertAvailable(t, c, scaleTimeout)
	survivor := assertMembers(t, c, 1, id)[0].Name // the leader stays
	scale(t, c, 3)
	assertAvailable(t, c, scaleTimeout)
	assertMembers(t, c, 3, id)
	if err := k8s.List(ctx, list, client.InNamespace(c.Namespace)); err != nil {
		t.Fatal(err)
	}
	pods, _ := memberPods(ctx, c)
	for _, p := range list.Items {
		member := p.Labels[etcdv1beta1.LabelMember]
		if _, ok := pods[member]; !ok {
			t.Errorf("C03: claim %s of no member left behind", p.Name)
		}
		if old, ok := claims[p.Name]; ok && old == string(p.UID) && member != survivor {
			t.Errorf("C03: %s reuses the claim of the removed member", member)
		}
	}
	for name, p := range pods {
		resp, err := etcdClient(t, podEndpoint(p)).Get(ctx, "k")
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
			t.Errorf("C03: k through %s: %v %v", name, resp, err)
		}
	}
}

// TestOperatorKilledDuringScaleUp: the operator pod is deleted right after it added a learner; the
// new operator resumes from what it observes and the cluster converges.
func TestOperatorKilledDuringScaleUp(t *testing.T) {
	c := newCluster(t, "e2e-kill", "demo", 3)
	assertAvailable(t, c, availableTimeout)
	id := clusterIDOf(t, c)
	w := startWriter(t, clientServiceEndpoint(t, c))
	scale(t, c, 5)
	poll.Eventually(t, scaleTimeout, "a learner in the member list", func(ctx context.Context) error {
		pods, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		v, err := viewFrom(ctx, podEndpoint(pods["demo-0"]))
		if err != nil {
			return err
		}
		for _, m := range v.members {
			if m.IsLearner {
				return nil
			}
		}
		return fmt.Errorf("no learner yet: %+v", v.members)
	})
	killOperator(t)
	assertAvailable(t, c, scaleTimeout)
	assertMembers(t, c, 5, id)
	pods, _ := memberPods(context.Background(), c)
	w.stopAndVerify(t, podEndpoint(pods["demo-0"]))
}

// TestOperatorKilledDuringReplacement: the operator pod is deleted right after it removed the stale
// member of a member that lost its data; the new operator adds the replacement and the cluster
// converges with 3 voters and the same cluster ID.
func TestOperatorKilledDuringReplacement(t *testing.T) {
	c := newCluster(t, "e2e-kill-replace", "demo", 3)
	_, got := assertAvailable(t, c, availableTimeout)
	id := clusterIDOf(t, c)
	var oldID string
	for _, m := range got.Status.Members {
		if m.Name == "demo-2" {
			oldID = m.ID
		}
	}
	w := startWriter(t, clientServiceEndpoint(t, c))
	deleteMemberWithData(t, c, "demo-2")
	poll.Eventually(t, scaleTimeout, "the stale member removed", func(ctx context.Context) error {
		pods, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		v, err := viewFrom(ctx, podEndpoint(pods["demo-0"]))
		if err != nil {
			return err
		}
		for _, m := range v.members {
			if etcd.FormatID(m.ID) == oldID {
				return fmt.Errorf("%s still a member", oldID)
			}
		}
		return nil
	})
	killOperator(t)
	assertAvailable(t, c, scaleTimeout)
	members := assertMembers(t, c, 3, id)
	for _, m := range members {
		if etcd.FormatID(m.ID) == oldID {
			t.Errorf("the stale member %s is back", oldID)
		}
	}
	pods, _ := memberPods(context.Background(), c)
	w.stopAndVerify(t, podEndpoint(pods["demo-0"]))
}

// killOperator deletes the operator pod at once (no grace) and waits until its replacement admits
// EtcdClusters again (waitAdmission), as a user's next kubectl apply needs.
func killOperator(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(operatorNamespace), operatorSelector); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if err := k8s.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	took, err := waitAdmission(admissionTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("operator pod deleted -> EtcdClusters admitted again in %s", took.Round(100*time.Millisecond))
}

// deleteMemberWithData deletes a member's claim and pod (the claim goes once the pod has), as losing
// a node with local storage would, and returns the deleted pod.
func deleteMemberWithData(t testing.TB, c *etcdv1beta1.EtcdCluster, member string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "data-" + member}, pvc); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, pods[member]); err != nil {
		t.Fatal(err)
	}
	return pods[member]
}

// TestJoinedMemberReadyOnlyOnceServing: a member that has just joined passes its readiness probe
// (/readyz on the metrics port) up to 7 s before it serves clients, when the leader's snapshot already
// held its first publish (etcd-io/etcd#16436). Its pod must not turn Ready, and join the client
// Service, before it serves: while the cluster scales 1 -> 3, every member pod that is Ready is asked,
// every 100 ms, for its status on its own client URL, and each must answer. The cluster is never
// QuorumLost meanwhile: the first new voter, promoted into a cluster of two, takes part in raft. The
// cluster scales up to 4 times, until a member has lost its first publish (about half of the joins
// on the local cluster), and back to 1 between rounds.
func TestJoinedMemberReadyOnlyOnceServing(t *testing.T) {
	c := newCluster(t, "e2e-readygate", "demo", 1)
	assertAvailable(t, c, availableTimeout)
	id := clusterIDOf(t, c)
	ctx := context.Background()
	for round := 1; round <= 4; round++ {
		stopReady := sampleReadyServes(c)
		stopPhases := sampleStatus(c, func(c *etcdv1beta1.EtcdCluster) string { return string(c.Status.Phase) })
		start := time.Now()
		scale(t, c, 3)
		assertAvailable(t, c, scaleTimeout)
		took := time.Since(start)
		unserved, asked := stopReady()
		phases := stopPhases()
		assertMembers(t, c, 3, id)
		lost := lostFirstPublish(ctx, t, c)
		t.Logf("round %d: 1 -> 3 in %s; phases %v; %d answers of Ready pods; lost their first publish: %v",
			round, took.Round(100*time.Millisecond), phases.steps, asked, lost)
		for _, u := range unserved {
			t.Errorf("round %d: a Ready member pod did not serve: %s", round, u)
		}
		if slices.ContainsFunc(phases.steps, func(s string) bool { return strings.HasPrefix(s, string(etcdv1beta1.PhaseQuorumLost)) }) {
			t.Errorf("round %d: phase QuorumLost during the scale-up: %v", round, phases.steps)
		}
		if len(lost) > 0 || t.Failed() {
			return
		}
		scale(t, c, 1)
		assertAvailable(t, c, scaleTimeout)
		poll.Eventually(t, scaleTimeout, "the removed members' pods gone", func(ctx context.Context) error {
			pods, err := memberPods(ctx, c)
			if err != nil {
				return err
			}
			if len(pods) != 1 {
				return fmt.Errorf("%d pods", len(pods))
			}
			return nil
		})
	}
	t.Logf("no new member lost its first publish in 4 rounds: the Ready pods were checked, the race was not met")
}

// sampleReadyServes asks, every 100 ms until the returned function is called, each member pod of c
// that is Ready for its etcd status on the pod's own client URL, within 1 s; the function returns each
// failure (the pod, when, the error) and how many answers it got.
func sampleReadyServes(c *etcdv1beta1.EtcdCluster) func() ([]string, int) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	clients := map[types.UID]*clientv3.Client{}
	var unserved []string // written by the sampler until done is closed
	var answers int
	start := time.Now()
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			pods, err := memberPods(ctx, c)
			for _, p := range pods {
				if err != nil || p.Status.PodIP == "" || p.DeletionTimestamp != nil || !podReady(p) {
					continue
				}
				ep := podEndpoint(p)
				cli := clients[p.UID]
				if cli == nil {
					if cli, err = clientv3.New(withRoot(clientv3.Config{Endpoints: []string{ep}, DialTimeout: time.Second,
						Logger: zap.NewNop(), TLS: tlsFor(ep)})); err != nil {
						unserved = append(unserved, fmt.Sprintf("%s at %s: %v", p.Name, time.Since(start).Round(100*time.Millisecond), err))
						continue
					}
					clients[p.UID] = cli
				}
				callCtx, callCancel := context.WithTimeout(ctx, time.Second)
				_, err := cli.Status(callCtx, ep)
				callCancel()
				switch {
				case ctx.Err() != nil:
				case err != nil:
					unserved = append(unserved, fmt.Sprintf("%s at %s: %v", p.Name, time.Since(start).Round(100*time.Millisecond), err))
				default:
					answers++
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() ([]string, int) {
		cancel()
		<-done
		for _, cli := range clients {
			_ = cli.Close()
		}
		return unserved, answers
	}
}

// podReady reports whether pod p's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// lostFirstPublish returns the member pods of c whose etcd logged that its first publish failed
// (etcd-io/etcd#16436: it serves only after retrying it).
func lostFirstPublish(ctx context.Context, t *testing.T, c *etcdv1beta1.EtcdCluster) []string {
	t.Helper()
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for _, name := range slices.Sorted(maps.Keys(pods)) {
		raw, err := kube.CoreV1().Pods(c.Namespace).GetLogs(name, &corev1.PodLogOptions{Container: resources.EtcdContainer}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("logs of %s: %v", name, err)
		}
		if strings.Contains(string(raw), `"msg":"failed to publish local member to cluster through raft"`) {
			lost = append(lost, name)
		}
	}
	return lost
}

// TestScaleDownDrainsClientService: a scale-down takes the pods of the members it removes out of the
// client Service before etcd removes them: every removed member's pod is seen not Ready while etcd
// still lists the member, through 5 -> 3 and 3 -> 1, and the phase is never QuorumLost (the pass that
// removed several members once counted them as voters still), and an eviction of such a pod is refused
// (a dry run: the PodDisruptionBudget holds evictions meanwhile; under its usual unhealthyPodEvictionPolicy
// AlwaysAllow a node drain could take pods that are not Ready, and in 3 -> 1 quorum with both). Meanwhile each write dials the Service afresh, as
// a short-lived client does; how many fail is reported (kube-proxy may lag behind the Service on a
// loaded node), and every acknowledged write must be read back.
func TestScaleDownDrainsClientService(t *testing.T) {
	c := newCluster(t, "e2e-drain", "demo", 5)
	assertAvailable(t, c, availableTimeout)
	ep := clientServiceEndpoint(t, c)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var acked []string
	failed := map[string]int{}
	var failedAt []time.Time // when each failed write was sent
	done := make(chan struct{})
	go func() {
		defer close(done)
		pace := time.NewTicker(20 * time.Millisecond)
		defer pace.Stop()
		for n := 0; ctx.Err() == nil; n++ {
			key, sent := fmt.Sprintf("fresh/%08d", n), time.Now()
			cli, err := clientv3.New(withRoot(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 3 * time.Second, Logger: zap.NewNop(), TLS: tlsFor(ep)}))
			if err == nil {
				wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
				_, err = cli.Put(wctx, key, key)
				wcancel()
				_ = cli.Close()
			}
			mu.Lock()
			if err == nil {
				acked = append(acked, key)
			} else if ctx.Err() == nil {
				failed[err.Error()]++
				failedAt = append(failedAt, sent)
			}
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-pace.C:
			}
		}
	}()
	poll.Eventually(t, statusTimeout, "the first write acknowledged", func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) == 0 {
			return fmt.Errorf("none yet; failed %v", failed)
		}
		return nil
	})
	// every 50 ms: when each member's pod is first seen not Ready while etcd lists it, since it was last
	// seen Ready, and when etcd first lists it no more
	notReadyAt, removedAt := map[string]time.Time{}, map[string]time.Time{}
	// a dry-run eviction of each pod when first seen drained while listed, and again when first seen
	// drained and not Ready while listed (the budget's rule for a pod that is not Ready differs), by
	// "name" and "name, not Ready"; each in a goroutine of its own (a 429 may ask the client to wait)
	evicted := map[string]error{}
	var evictions sync.WaitGroup
	evict := func(key string, p *corev1.Pod) {
		evicted[key] = nil
		evictions.Add(1)
		go func() {
			defer evictions.Done()
			ectx, ecancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer ecancel()
			err := k8s.SubResource("eviction").Create(ectx, p, &policyv1.Eviction{
				DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}, Preconditions: &metav1.Preconditions{UID: &p.UID}}})
			if err == nil {
				err = errAdmitted
			}
			mu.Lock()
			evicted[key] = err
			mu.Unlock()
		}()
	}
	var phases []etcdv1beta1.ClusterPhase
	lister := etcdClient(t, ep)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ctx.Err() == nil {
			lctx, lcancel := context.WithTimeout(ctx, time.Second)
			resp, err := lister.MemberList(lctx)
			pods, perr := memberPods(lctx, c)
			if got, gerr := getCluster(lctx, c); gerr == nil && (len(phases) == 0 || phases[len(phases)-1] != got.Status.Phase) {
				phases = append(phases, got.Status.Phase)
			}
			lcancel()
			if err == nil && perr == nil {
				listed := map[string]bool{}
				for _, m := range resp.Members {
					listed[m.Name] = true
				}
				mu.Lock()
				for name, p := range pods {
					if podReady(p) {
						delete(notReadyAt, name) // not Ready at first (just after the bootstrap): what counts is the last change
					} else if _, seen := notReadyAt[name]; !seen && listed[name] {
						notReadyAt[name] = time.Now()
					}
					if serving := model.PodCondition(p, resources.ServingCondition); listed[name] && serving != nil && serving.Reason == resources.ReasonRemoving {
						if _, tried := evicted[name]; !tried {
							evict(name, p)
						}
						if _, tried := evicted[name+", not Ready"]; !tried && !podReady(p) {
							evict(name+", not Ready", p)
						}
					}
					if _, seen := removedAt[name]; !seen && !listed[name] {
						removedAt[name] = time.Now()
					}
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	for _, n := range []int32{3, 1} {
		start := time.Now()
		scale(t, c, n)
		assertAvailable(t, c, scaleTimeout)
		t.Logf("scaled down to %d in %s", n, time.Since(start).Round(100*time.Millisecond))
		assertMembers(t, c, int(n), clusterIDOf(t, c))
	}
	// a moment more of writes through the one member left, then stop
	mu.Lock()
	target := len(acked) + 10
	mu.Unlock()
	poll.Eventually(t, statusTimeout, "10 more writes after the last scale-down", func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if len(acked) < target {
			return fmt.Errorf("%d of %d", len(acked), target)
		}
		return nil
	})
	cancel()
	<-done
	<-watched
	evictions.Wait()

	if slices.Contains(phases, etcdv1beta1.PhaseQuorumLost) {
		t.Errorf("phases %v: QuorumLost in a scale-down", phases)
	}
	if len(removedAt) != 4 {
		t.Errorf("removed members seen: %v, want 4", slices.Collect(maps.Keys(removedAt)))
	}
	drainedSeen := 0
	for name, removed := range removedAt {
		if drained, ok := notReadyAt[name]; !ok || !drained.Before(removed) {
			t.Errorf("%s removed from etcd while its pod was Ready (not Ready seen %v, at %v; removed at %v): want it out of the client Service first",
				name, ok, drained.Format("15:04:05.000"), removed.Format("15:04:05.000"))
		} else {
			t.Logf("%s: its pod not Ready %v before etcd removed it", name, removed.Sub(drained).Round(10*time.Millisecond))
		}
		for _, key := range []string{name, name + ", not Ready"} {
			switch err, tried := evicted[key]; {
			case !tried:
				t.Logf("%s: no eviction tried (never seen so while listed)", key)
			case !apierrors.IsTooManyRequests(err):
				t.Errorf("a dry-run eviction of the drained pod of %s while etcd listed it: %v, want it refused (429) by the PodDisruptionBudget", key, err)
			default:
				if key != name {
					drainedSeen++
				}
				t.Logf("%s: its eviction refused while drained: %v", key, err)
			}
		}
	}
	if drainedSeen < 2 { // 3 -> 1 drains both members it removes: the cluster is settled by then
		t.Errorf("%d removed members' evictions refused while drained and not Ready, want at least the 2 of 3 -> 1", drainedSeen)
	}
	nfailed := 0
	for _, k := range failed {
		nfailed += k
	}
	pods, err := memberPods(context.Background(), c)
	if err != nil || len(pods) != 1 {
		t.Fatalf("member pods %v: %v", slices.Collect(maps.Keys(pods)), err)
	}
	for _, p := range pods {
		rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := etcdClient(t, podEndpoint(p)).Get(rctx, "fresh/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		rcancel()
		if err != nil {
			t.Fatalf("read the writes back: %v", err)
		}
		have := map[string]bool{}
		for _, kv := range resp.Kvs {
			have[string(kv.Key)] = true
		}
		lost := 0
		for _, k := range acked {
			if !have[k] {
				lost++
			}
		}
		if lost > 0 {
			t.Errorf("%d of %d acknowledged writes lost", lost, len(acked))
		}
	}
	t.Logf("fresh-connection writer: %d writes acknowledged, all readable; %d failed %v", len(acked), nfailed, failed)
	for _, at := range failedAt {
		var near []string // how far each removal was from the failed write's start
		for name, removed := range removedAt {
			near = append(near, fmt.Sprintf("%s removed %+.2fs", name, removed.Sub(at).Seconds()))
		}
		slices.Sort(near)
		t.Logf("a write sent at %s failed: %s", at.Format("15:04:05.000"), strings.Join(near, ", "))
	}
}

// errAdmitted stands for a dry-run eviction the API server admitted (a nil error).
var errAdmitted = errors.New("admitted")
