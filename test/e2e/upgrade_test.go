//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// The etcd versions the upgrade tests run; hack/build-images.sh packs both images.
const (
	oldVersion = "3.5.35"
	newVersion = "3.6.16"
	// rolloutTimeout bounds a rolling update of 3 members.
	rolloutTimeout = 180 * time.Second
)

// rolloutWatch polls the member pods and etcd every 100 ms during a rolling update and records each
// member restart (a pod going away), who led just before it, and how many members were down at once.
type rolloutWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	restarts []restartSeen
	maxDown  int
	downAt   string
}

type restartSeen struct {
	member, leader string
	at             time.Duration
}

// String says which member restarted, who led then, and when (seconds after the watch began).
func (r restartSeen) String() string {
	return fmt.Sprintf("%s at +%.1fs (leader %s)", r.member, r.at.Seconds(), r.leader)
}

func watchRollout(c *etcdv1beta1.EtcdCluster) *rolloutWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &rolloutWatch{cancel: cancel, done: make(chan struct{})}
	start := time.Now()
	uids := map[string]types.UID{}
	gone := map[string]bool{} // restart recorded, pod not yet replaced
	leader := ""
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond) // sampling interval: sees every restart
		defer tick.Stop()
		for ctx.Err() == nil {
			pods, err := memberPods(ctx, c)
			if err == nil {
				if l := leaderOf(ctx, pods); l != "" {
					leader = l
				}
				down := 0
				var downNames []string
				for _, n := range []string{c.Name + "-0", c.Name + "-1", c.Name + "-2"} {
					p := pods[n]
					if p == nil || p.DeletionTimestamp != nil || !ready(p) {
						down++
						downNames = append(downNames, n)
					}
					switch {
					case p == nil || p.DeletionTimestamp != nil:
						if !gone[n] && uids[n] != "" {
							gone[n] = true
							w.mu.Lock()
							w.restarts = append(w.restarts, restartSeen{n, leader, time.Since(start)})
							w.mu.Unlock()
						}
					case uids[n] == "":
						uids[n] = p.UID
					case p.UID != uids[n]:
						if !gone[n] { // went and came back between two polls
							w.mu.Lock()
							w.restarts = append(w.restarts, restartSeen{n, leader, time.Since(start)})
							w.mu.Unlock()
						}
						uids[n], gone[n] = p.UID, false
					}
				}
				w.mu.Lock()
				if down > w.maxDown {
					w.maxDown, w.downAt = down, fmt.Sprintf("%v at %s", downNames, time.Since(start).Round(100*time.Millisecond))
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *rolloutWatch) stop() {
	w.cancel()
	<-w.done
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// leaderOf asks the running members who leads; "" when none answers within 300 ms.
func leaderOf(ctx context.Context, pods map[string]*corev1.Pod) string {
	for _, p := range pods {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		// a TLS handshake on a loaded machine takes more than the few milliseconds a plain call does
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		cli, err := etcd.New(cctx, etcd.Config{Endpoints: []string{podEndpoint(p)}, DialTimeout: time.Second, TLS: tlsFor(podEndpoint(p))})
		if err != nil {
			cancel()
			continue
		}
		st, err := cli.Status(cctx, podEndpoint(p))
		_ = cli.Close()
		cancel()
		if err != nil || st.Leader == 0 {
			continue
		}
		_, members, err := func() (uint64, []etcd.Member, error) {
			c2, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			cl, err := etcd.New(c2, etcd.Config{Endpoints: []string{podEndpoint(p)}, DialTimeout: time.Second, TLS: tlsFor(podEndpoint(p))})
			if err != nil {
				return 0, nil, err
			}
			defer func() { _ = cl.Close() }()
			return cl.MemberList(c2)
		}()
		if err != nil {
			continue
		}
		for _, m := range members {
			if m.ID == st.Leader {
				return m.Name
			}
		}
	}
	return ""
}

// rollAndCheck changes the cluster with mutate under a continuous writer (optionally killing the
// operator after the first member restarted), waits until every member runs the new spec, and checks
// the rollout's invariants: each member restarted exactly once, never while it led, at most one
// member down at any moment, the cluster Available in every status written meanwhile, the same members
// and cluster ID, every acknowledged write readable.
// It returns how long the rollout took and the writer's record.
func rollAndCheck(t testing.TB, c *etcdv1beta1.EtcdCluster, killMidway bool, mutate func(*etcdv1beta1.EtcdCluster), done func(*etcdv1beta1.EtcdCluster) error) (time.Duration, *writer) {
	t.Helper()
	id := clusterIDOf(t, c)
	before := assertMembers(t, c, 3, id)
	// the operator's Available comes from etcd; kubelet's readiness probes may lag it by a period
	poll.Eventually(t, statusTimeout, "every member pod Ready", func(ctx context.Context) error {
		pods, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		for n, p := range pods {
			if !ready(p) {
				return fmt.Errorf("pod %s is not Ready", n)
			}
		}
		return nil
	})
	wr := startWriter(t, clientServiceEndpoint(t, c))
	rw := watchRollout(c)
	// one member down at a time, the leader handing over before its restart: never below quorum
	aw := watchAvailable(t, c)
	start := time.Now()
	// the operator writes status while the cluster settles: update the newest version
	updateCluster(t, c, mutate)
	if killMidway {
		poll.Eventually(t, rolloutTimeout, "the first member restarted", func(context.Context) error {
			rw.mu.Lock()
			defer rw.mu.Unlock()
			if len(rw.restarts) == 0 {
				return fmt.Errorf("no restart yet")
			}
			return nil
		})
		killOperator(t)
	}
	// what `kubectl wait --for=condition=Progressing=False` waits for: once it holds, every member pod
	// runs the new spec and is Ready (the client Service routes to each)
	poll.Eventually(t, rolloutTimeout, "Progressing False, Reconciled, for the new generation", func(ctx context.Context) error {
		cur, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		p := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionProgressing)
		if p == nil || p.Status != metav1.ConditionFalse || p.Reason != etcdv1beta1.ReasonReconciled || p.ObservedGeneration != cur.Generation {
			return fmt.Errorf("Progressing %+v, generation %d", p, cur.Generation)
		}
		return nil
	})
	if pods, err := memberPods(context.Background(), c); err != nil {
		t.Fatal(err)
	} else {
		for n, p := range pods {
			if !ready(p) {
				t.Errorf("Progressing is False (Reconciled) while pod %s is not Ready", n)
			}
		}
	}
	poll.Eventually(t, rolloutTimeout, "every member on the new spec", func(ctx context.Context) error {
		cur, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		if cur.Status.Phase != etcdv1beta1.PhaseRunning || cur.Status.ReadyReplicas != 3 || cur.Status.ObservedGeneration != cur.Generation {
			return fmt.Errorf("phase %s ready %d observedGeneration %d/%d", cur.Status.Phase, cur.Status.ReadyReplicas, cur.Status.ObservedGeneration, cur.Generation)
		}
		return done(cur)
	})
	took := time.Since(start)
	rw.stop()
	aw.assertNeverUnavailable(t, "rolling restart")
	aw.assertNeverStalled(t, "rolling restart")
	aw.assertNeverDegraded(t, "rolling restart")
	assertOneEventPerMember(t, c, "UpdatingMember")
	pods, _ := memberPods(context.Background(), c)
	wr.stopAndVerify(t, podEndpoint(pods[c.Name+"-0"]))

	rw.mu.Lock()
	defer rw.mu.Unlock()
	t.Logf("rollout took %s; restarts %v; at most %d member(s) down at once; writes failed at %v", took.Round(100*time.Millisecond), rw.restarts, rw.maxDown, wr.failuresSince(start))
	seen := map[string]int{}
	for i, r := range rw.restarts {
		seen[r.member]++
		if r.member == r.leader {
			t.Errorf("restart %d: %s restarted while it led", i+1, r.member)
		}
	}
	if len(rw.restarts) != 3 || len(seen) != 3 {
		t.Errorf("restarts %v, want each of the 3 members exactly once", rw.restarts)
	}
	if rw.maxDown > 1 {
		t.Errorf("%d members were down at once (%s), want at most 1", rw.maxDown, rw.downAt)
	}
	after := assertMembers(t, c, 3, id)
	for i := range before {
		if before[i].ID != after[i].ID {
			t.Errorf("member %s has ID %x after the rollout, %x before (it must restart on its data)", before[i].Name, after[i].ID, before[i].ID)
		}
	}
	return took, wr
}

// TestUpgrade_3_5_To_3_6: a 3-member etcd 3.5 cluster is upgraded to 3.6 under a continuous writer,
// the operator being killed after the first member restarted: followers first, the leader last, one
// member down at most, every member then runs 3.6 and status.currentVersion says so.
func TestUpgrade_3_5_To_3_6(t *testing.T) {
	c := newCluster(t, "e2e-upgrade", "demo", 3, testutil.WithVersion(oldVersion))
	_, got := assertAvailable(t, c, availableTimeout)
	if got.Status.CurrentVersion != oldVersion {
		t.Fatalf("currentVersion %q, want %s", got.Status.CurrentVersion, oldVersion)
	}
	rollAndCheck(t, c, true, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = newVersion }, upgradedTo(newVersion))
	// the cluster version (what etcd's features follow) moves to 3.6 once every member runs it
	poll.Eventually(t, 30*time.Second, "cluster version 3.6", func(ctx context.Context) error {
		pods, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		for n, p := range pods {
			v, err := etcdClusterVersion(ctx, p)
			if err != nil {
				return err
			}
			if v != "3.6.0" {
				return fmt.Errorf("member %s reports cluster version %q", n, v)
			}
		}
		return nil
	})
}

// upgradedTo is done when every member runs version v and status.currentVersion says so.
func upgradedTo(v string) func(*etcdv1beta1.EtcdCluster) error {
	return func(cur *etcdv1beta1.EtcdCluster) error {
		for _, m := range cur.Status.Members {
			if m.Version != v {
				return fmt.Errorf("member %s runs %s", m.Name, m.Version)
			}
		}
		if cur.Status.CurrentVersion != v {
			return fmt.Errorf("currentVersion %s", cur.Status.CurrentVersion)
		}
		return nil
	}
}

// TestRollingResourcesChange: a change of the member pods' resources rolls the members the same way.
func TestRollingResourcesChange(t *testing.T) {
	c := newCluster(t, "e2e-roll", "demo", 3)
	assertAvailable(t, c, availableTimeout)
	want := resource.MustParse("160Mi")
	rollAndCheck(t, c, false, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: want, corev1.ResourceCPU: resource.MustParse("50m")}}}
	}, func(cur *etcdv1beta1.EtcdCluster) error {
		pods, err := memberPods(context.Background(), cur)
		if err != nil {
			return err
		}
		for n, p := range pods {
			if got := p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]; got.Cmp(want) != 0 {
				return fmt.Errorf("pod %s requests %s memory", n, got.String())
			}
		}
		return nil
	})
}

// TestRolloutUnderExactQuota: a ResourceQuota of exactly the members' pods (pods: 3) does not hold a
// rolling update back: the rollout's dry run of each new pod is counted beside the old pod, which the
// restart deletes first, and the quota's refusal of it is not a reason to pause. Then a
// serviceAccountName that does not exist yet is admitted with a warning that quotes the API server,
// holds the rollout back (RolloutPaused, no member restarted), and the rollout goes on once the service
// account exists. A continuous writer loses no acknowledged write (rollAndCheck).
func TestRolloutUnderExactQuota(t *testing.T) {
	c := newCluster(t, "e2e-rollquota", "demo", 3)
	assertAvailable(t, c, availableTimeout)
	id := clusterIDOf(t, c)
	ctx := context.Background()
	threePodQuota(t, c)
	took, _ := rollAndCheck(t, c, false, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Labels: map[string]string{"rolled": "under-quota"}}
	}, func(cur *etcdv1beta1.EtcdCluster) error {
		pods, err := memberPods(context.Background(), cur)
		if err != nil {
			return err
		}
		for n, p := range pods {
			if p.Labels["rolled"] != "under-quota" {
				return fmt.Errorf("pod %s has labels %v", n, p.Labels)
			}
		}
		return nil
	})
	t.Logf("rolled 3 members under a quota of 3 pods in %s", took.Round(100*time.Millisecond))

	// a service account that does not exist yet: a warning at admission, and no member restarted
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]types.UID{}
	for n, p := range pods {
		uids[n] = p.UID
	}
	cfg := rest.CopyConfig(config)
	warned := &testutil.Warnings{}
	cfg.WarningHandlerWithContext = warned
	warnedClient, err := client.New(cfg, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := updateThrough(ctx, warnedClient, c, func(cur *etcdv1beta1.EtcdCluster) {
		cur.Spec.PodTemplate.ServiceAccountName = "etcd-members"
	}); err != nil {
		t.Fatalf("a serviceAccountName not created yet refused: %v", err)
	}
	if w := strings.Join(warned.Take(), "\n"); !strings.Contains(w, "The API server refuses the members' pods for now") || !strings.Contains(w, `serviceaccount "etcd-members" not found`) {
		t.Errorf("a serviceAccountName not created yet warned %q, want the API server's refusal quoted", w)
	}
	poll.Eventually(t, statusTimeout, "Progressing says the rollout waits for the service account", func(ctx context.Context) error {
		cur, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		p := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionProgressing)
		if p == nil || p.Reason != etcdv1beta1.ReasonRolloutPaused || !strings.Contains(p.Message, "the API server refuses the pod") || !strings.Contains(p.Message, `serviceaccount "etcd-members" not found`) {
			return fmt.Errorf("Progressing %+v", p)
		}
		return nil
	})
	assertNoneRestarted(t, c, uids, "for a pod the API server refuses")
	created := time.Now()
	if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: "etcd-members"}}); err != nil {
		t.Fatal(err)
	}
	waitRolled(t, c, "runs as etcd-members", func(p *corev1.Pod) error {
		if p.Spec.ServiceAccountName != "etcd-members" {
			return fmt.Errorf("service account %q", p.Spec.ServiceAccountName)
		}
		return nil
	})
	t.Logf("service account created -> 3 members rolled onto it in %s", time.Since(created).Round(100*time.Millisecond))
	assertMembers(t, c, 3, id)

	// a compute quota with 150m of requests.cpu to spare, and a spec asking 100m more of each member:
	// a warning at admission, the rollout paused before any restart, and rolled once the quota has room
	compute := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: "compute"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("10")}}}
	if err := k8s.Create(ctx, compute); err != nil {
		t.Fatal(err)
	}
	var used resource.Quantity
	poll.Eventually(t, statusTimeout, "the compute quota counts the member pods", func(ctx context.Context) error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(compute), compute); err != nil {
			return err
		}
		var ok bool
		if used, ok = compute.Status.Used[corev1.ResourceRequestsCPU]; !ok || used.IsZero() {
			return fmt.Errorf("used %v", compute.Status.Used)
		}
		return nil
	})
	setHard := func(hard resource.Quantity) {
		t.Helper()
		poll.Eventually(t, statusTimeout, "the compute quota enforces "+hard.String(), func(ctx context.Context) error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(compute), compute); err != nil {
				return err
			}
			if h := compute.Spec.Hard[corev1.ResourceRequestsCPU]; h.Cmp(hard) != 0 {
				compute.Spec.Hard[corev1.ResourceRequestsCPU] = hard
				if err := k8s.Update(ctx, compute); err != nil {
					return err
				}
			}
			if h := compute.Status.Hard[corev1.ResourceRequestsCPU]; h.Cmp(hard) != 0 {
				return fmt.Errorf("status.hard %v", compute.Status.Hard)
			}
			return nil
		})
	}
	hard := used.DeepCopy()
	hard.Add(resource.MustParse("150m"))
	setHard(hard)
	pods, err = memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for n, p := range pods {
		uids[n] = p.UID
	}
	cur, err := getCluster(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if r := cur.Spec.PodTemplate.Resources; r != nil {
		t.Fatalf("the test assumes the default resources, not %+v", r)
	}
	warned.Take()
	if err := updateThrough(ctx, warnedClient, c, func(cur *etcdv1beta1.EtcdCluster) {
		cur.Spec.PodTemplate.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")}} // the default, +100m cpu
	}); err != nil {
		t.Fatalf("a spec beyond the quota's room refused: %v", err)
	}
	if w := strings.Join(warned.Take(), "\n"); !strings.Contains(w, "The rolling update waits, with no member restarted, until the namespace's quota has room") ||
		!strings.Contains(w, "ResourceQuota compute has room for requests.cpu 150m more") {
		t.Errorf("a spec beyond the quota's room warned %q, want the quota named", w)
	}
	poll.Eventually(t, statusTimeout, "Progressing says the rollout waits for the quota", func(ctx context.Context) error {
		cur, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		p := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionProgressing)
		if p == nil || p.Reason != etcdv1beta1.ReasonRolloutPaused || !strings.Contains(p.Message, "ResourceQuota compute has room for requests.cpu 150m more") ||
			!strings.Contains(p.Message, "rolling 3 members onto the new spec needs up to 300m more") {
			return fmt.Errorf("Progressing %+v", p)
		}
		return nil
	})
	assertNoneRestarted(t, c, uids, "for a spec the quota has no room for")
	hard.Add(resource.MustParse("300m")) // 450m of room for the 300m the roll needs
	raised := time.Now()
	setHard(hard)
	waitRolled(t, c, "runs with 200m", func(p *corev1.Pod) error {
		if cpu := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("200m")) != 0 {
			return fmt.Errorf("cpu %s", cpu.String())
		}
		return nil
	})
	t.Logf("quota raised -> 3 members rolled onto 200m in %s", time.Since(raised).Round(100*time.Millisecond))
	assertMembers(t, c, 3, id)
}

// assertNoneRestarted fails t if a member pod of c is not the one of uids (by member name), or is being
// deleted: it was restarted why.
func assertNoneRestarted(t *testing.T, c *etcdv1beta1.EtcdCluster, uids map[string]types.UID, why string) {
	t.Helper()
	pods, err := memberPods(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	for n, p := range pods {
		if p.UID != uids[n] || p.DeletionTimestamp != nil {
			t.Errorf("pod %s was restarted %s", n, why)
		}
	}
}

// waitRolled waits until Progressing is False for c's current generation and every member pod is
// Ready and passes check (what says what it checks).
func waitRolled(t *testing.T, c *etcdv1beta1.EtcdCluster, what string, check func(*corev1.Pod) error) {
	t.Helper()
	poll.Eventually(t, rolloutTimeout, "every member "+what+", Progressing False", func(ctx context.Context) error {
		cur, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		if p := meta.FindStatusCondition(cur.Status.Conditions, etcdv1beta1.ConditionProgressing); p == nil || p.Status != metav1.ConditionFalse || p.ObservedGeneration != cur.Generation {
			return fmt.Errorf("Progressing %+v", p)
		}
		pods, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		for n, p := range pods {
			if err := check(p); err != nil {
				return fmt.Errorf("pod %s: %w", n, err)
			}
			if !ready(p) {
				return fmt.Errorf("pod %s not Ready", n)
			}
		}
		return nil
	})
}

// TestPDBBlocksEvictionThatBreaksQuorum: with 3 members, evicting one is allowed and evicting a second
// at once is refused (429) by the PodDisruptionBudget; the cluster comes back whole.
func TestPDBBlocksEvictionThatBreaksQuorum(t *testing.T) {
	c := newCluster(t, "e2e-pdb", "demo", 3)
	assertAvailable(t, c, availableTimeout)
	ctx := context.Background()
	poll.Eventually(t, statusTimeout, "the PodDisruptionBudget allows one disruption", func(ctx context.Context) error {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, pdb); err != nil {
			return err
		}
		if pdb.Status.DisruptionsAllowed != 1 || pdb.Spec.MinAvailable.IntValue() != 2 {
			return fmt.Errorf("minAvailable %s, disruptionsAllowed %d", pdb.Spec.MinAvailable.String(), pdb.Status.DisruptionsAllowed)
		}
		return nil
	})
	evict := func(name string) error {
		return kube.PolicyV1().Evictions(c.Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace}})
	}
	if err := evict("demo-1"); err != nil {
		t.Fatalf("evicting the first member: %v", err)
	}
	err := evict("demo-2")
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting a second member at once: %v, want 429 Too Many Requests from the PodDisruptionBudget", err)
	}
	t.Logf("second eviction refused: %v", err)
	assertAvailable(t, c, recoverTimeout)
}

// etcdClusterVersion returns the cluster version a member reports on its /version endpoint (the
// "etcdcluster" field: major.minor.0, the lowest version of the members once they all agreed).
func etcdClusterVersion(ctx context.Context, p *corev1.Pod) (string, error) {
	ep := podEndpoint(p)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep+"/version", nil)
	if err != nil {
		return "", err
	}
	// over TLS with the cluster's client certificate when the member serves TLS (tlsFor is nil otherwise)
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: tlsFor(ep)}}).Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	var v struct {
		Cluster string `json:"etcdcluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return "", fmt.Errorf("decode %s/version: %w", podEndpoint(p), err)
	}
	return v.Cluster, nil
}

// TestStorageGrowthReported: growing storage.size on a StorageClass that cannot expand volumes
// (local-path) says so in the VolumesResized condition, naming the claims, and changes no member.
func TestStorageGrowthReported(t *testing.T) {
	c := newCluster(t, "e2e-grow", "demo", 1)
	assertAvailable(t, c, availableTimeout)
	pods, err := memberPods(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	uid := pods["demo-0"].UID
	bigger := resource.MustParse("2Gi")
	updateCluster(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.Size = &bigger })
	poll.Eventually(t, statusTimeout, "VolumesResized=False VolumeExpansionNotSupported", func(ctx context.Context) error {
		cur, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		for _, cond := range cur.Status.Conditions {
			if cond.Type == etcdv1beta1.ConditionVolumesResized && cond.Status == metav1.ConditionFalse &&
				cond.Reason == etcdv1beta1.ReasonExpansionRefused && strings.Contains(cond.Message, "data-demo-0") &&
				strings.Contains(cond.Message, "local-path does not allow volume expansion") {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", cur.Status.Conditions)
	})
	pods, err = memberPods(context.Background(), c)
	if err != nil || pods["demo-0"] == nil || pods["demo-0"].UID != uid {
		t.Errorf("the member pod changed: %v", err)
	}
}

// assertOneEventPerMember fails the test if cluster c has more than one event of reason about one
// member (its related pod): counting the repeats the events library folds into a series (its count),
// so that a step carried out once is reported once.
func assertOneEventPerMember(t testing.TB, c *etcdv1beta1.EtcdCluster, reason string) {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(c.Namespace)); err != nil {
		t.Fatal(err)
	}
	per := map[string][]string{}
	for _, e := range list.Items {
		if e.Regarding.Name != c.Name || e.Reason != reason {
			continue
		}
		member := "(none)"
		if e.Related != nil {
			member = e.Related.Name
		}
		n := 1
		if e.Series != nil {
			n = int(e.Series.Count)
		}
		for range n {
			per[member] = append(per[member], e.Note)
		}
	}
	if len(per) == 0 {
		t.Errorf("no %s event about %s", reason, c.Name)
	}
	for member, notes := range per {
		if len(notes) > 1 {
			t.Errorf("%d %s events about %s, want 1: %q", len(notes), reason, member, notes)
		}
	}
}

// updateThrough changes the cluster with mutate on its newest version through cl, again on a conflict:
// the operator's status patches change the resourceVersion between a read and an update.
func updateThrough(ctx context.Context, cl client.Client, c *etcdv1beta1.EtcdCluster, mutate func(*etcdv1beta1.EtcdCluster)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		mutate(cur)
		return cl.Update(ctx, cur)
	})
}
