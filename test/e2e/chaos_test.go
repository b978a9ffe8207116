//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/linearizability"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// The chaos run: CHAOS_FAULTS fault events (default chaosFaults, the short run of make test-e2e; make
// chaos runs 200), drawn from the fault classes below with the seed CHAOS_SEED (default: the time),
// each injected into a healthy 3-member cluster while clients put, read and compare-and-swap through
// the client Service; after each, the run waits until the cluster is healthy again (Available, 3
// healthy voters) and records the time. The clients' history is checked for linearizability at the
// end (porcupine), and every key is read back.
const (
	chaosFaults = 20
	// chaosRecoverTimeout bounds one recovery: the replacement policy, a new member copying the data.
	chaosRecoverTimeout = 4 * time.Minute
	// chaosCheckTimeout bounds the linearizability check of the whole history.
	chaosCheckTimeout = 5 * time.Minute
)

// fault is one class of fault: inject breaks the cluster and returns; the run then waits for recovery.
type fault struct {
	name   string
	inject func(t *testing.T, c *etcdv1beta1.EtcdCluster, rng *rand.Rand)
}

// chaosClasses are the fault classes of the run: every class is a fault the operator repairs on its own.
var chaosClasses = []fault{
	{"pod kill", func(t *testing.T, c *etcdv1beta1.EtcdCluster, rng *rand.Rand) {
		deletePod(t, c, randomMember(rng), 0)
	}},
	{"leader kill", func(t *testing.T, c *etcdv1beta1.EtcdCluster, _ *rand.Rand) {
		pods, err := memberPods(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		leader := leaderOf(context.Background(), pods)
		if leader == "" {
			leader = "demo-0"
		}
		deletePod(t, c, leader, 0)
	}},
	{"pod and claim lost", func(t *testing.T, c *etcdv1beta1.EtcdCluster, rng *rand.Rand) {
		deleteMemberWithData(t, c, randomMember(rng))
	}},
	{"operator killed mid-repair", func(t *testing.T, c *etcdv1beta1.EtcdCluster, rng *rand.Rand) {
		deleteMemberWithData(t, c, randomMember(rng))
		if err := k8s.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(operatorNamespace), operatorSelector); err != nil {
			t.Fatal(err)
		}
	}},
	{"data directory emptied", func(t *testing.T, c *etcdv1beta1.EtcdCluster, rng *rand.Rand) {
		m := randomMember(rng)
		runOnClaim(t, c, resources.PVCName(m), "rm -rf "+resources.DataDir+"/member")
		deletePod(t, c, m, 0)
	}},
	{"database corrupted", func(t *testing.T, c *etcdv1beta1.EtcdCluster, rng *rand.Rand) {
		m := randomMember(rng)
		runOnClaim(t, c, resources.PVCName(m), "db="+resources.DataDir+"/member/snap/db; "+
			"dd if=/dev/urandom of=$db bs=4096 count=$(( $(wc -c < $db) / 4096 )) conv=notrunc")
		deletePod(t, c, m, 0)
	}},
	{"CORRUPT alarm", func(t *testing.T, c *etcdv1beta1.EtcdCluster, rng *rand.Rand) {
		id := memberID(t, c, randomMember(rng))
		cli := etcdClient(t, clientServiceEndpoint(t, c))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Alarm(ctx, &pb.AlarmRequest{
			Action: pb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: pb.AlarmType_CORRUPT}); err != nil {
			t.Fatalf("raise the CORRUPT alarm: %v", err)
		}
	}},
	{"member cut off from its peers", func(t *testing.T, c *etcdv1beta1.EtcdCluster, rng *rand.Rand) {
		m := randomMember(rng)
		heal := cutOff(t, c, m)
		waitUnhealthy(t, c, m)
		heal()
	}},
	{"etcd frozen", func(t *testing.T, c *etcdv1beta1.EtcdCluster, rng *rand.Rand) {
		m := randomMember(rng)
		thaw := freezeMember(t, c, m)
		waitUnhealthy(t, c, m)
		thaw()
	}},
	// a rolling update onto an image that does not exist: its first member is rolled back at the end of
	// the policy, and the change is undone once Progressing says RolloutFailed (the hold would keep the
	// next fault's replacement from being added)
	{"rollout onto an image that does not exist", func(t *testing.T, c *etcdv1beta1.EtcdCluster, _ *rand.Rand) {
		updateCluster(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Image = "docker.io/local/etcd:no-such-tag" })
		poll.Eventually(t, chaosRecoverTimeout, "the rollout rolled back", func(ctx context.Context) error {
			got, err := getCluster(ctx, c)
			if err != nil {
				return err
			}
			if p := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionProgressing); p == nil || p.Reason != etcdv1beta1.ReasonRolloutFailed {
				return fmt.Errorf("progressing %+v", p)
			}
			return nil
		})
		updateCluster(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Image = "" })
	}},
	{"whole cluster killed", func(t *testing.T, c *etcdv1beta1.EtcdCluster, _ *rand.Rand) {
		for _, m := range []string{"demo-0", "demo-1", "demo-2"} {
			deletePod(t, c, m, 0)
		}
	}},
}

// TestChaos: see the constants above. It fails on a fault the cluster does not recover from within
// chaosRecoverTimeout, on a history that is not linearizable, and on a key whose value the members
// disagree on.
func TestChaos(t *testing.T) {
	faults, seed := chaosFaults, uint64(time.Now().UnixNano())
	if v := os.Getenv("CHAOS_FAULTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CHAOS_FAULTS=%q: want a positive number", v)
		}
		faults = n
	}
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: want a number", v)
		}
		seed = s
	}
	t.Logf("chaos: %d faults, seed %d (CHAOS_SEED=%d CHAOS_FAULTS=%d reproduces the schedule)", faults, seed, seed, faults)
	rng := rand.New(rand.NewPCG(seed, 0))
	shellImage(t) // fail before anything starts when the damage classes cannot run

	c := newCluster(t, "e2e-chaos", "demo", 3, withReplaceAfter(replaceAfter))
	assertAvailable(t, c, availableTimeout)
	rec := linearizability.NewRecorder()
	ctx, stop := context.WithCancel(context.Background())
	clientsDone := make(chan error, 1)
	endpoints := []string{clientServiceEndpoint(t, c)}
	go func() {
		clientsDone <- linearizability.RunClients(ctx, endpoints, tlsFor(endpoints[0]), 4, 16, seed, rec)
	}()

	times := map[string][]time.Duration{}
	for i := range faults {
		f := chaosClasses[rng.IntN(len(chaosClasses))]
		start := time.Now()
		f.inject(t, c, rng)
		waitHealthy(t, c, fmt.Sprintf("fault %d/%d (%s) recovered", i+1, faults, f.name))
		took := time.Since(start) // from the injection on
		times[f.name] = append(times[f.name], took)
		t.Logf("fault %d/%d: %s -> healthy in %s (%d operations so far)", i+1, faults, f.name, took.Round(100*time.Millisecond), rec.Len())
	}
	stop()
	if err := <-clientsDone; err != nil {
		t.Fatal(err)
	}
	reportChaos(t, times)
	checkHistory(t, rec)
	assertMembersAgree(t, c, 16)
}

// randomMember returns demo-0, demo-1 or demo-2.
func randomMember(rng *rand.Rand) string { return fmt.Sprintf("demo-%d", rng.IntN(3)) }

// deletePod deletes a member's pod with the given grace period in seconds (0: killed at once).
func deletePod(t *testing.T, c *etcdv1beta1.EtcdCluster, name string, grace int64) {
	t.Helper()
	p := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: name}, p); err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	if err := k8s.Delete(context.Background(), p, client.GracePeriodSeconds(grace)); err != nil {
		t.Fatalf("delete pod %s: %v", name, err)
	}
}

// waitHealthy waits, polling with chaosRecoverTimeout as deadline, until the cluster's status shows it
// Available with 3 healthy voters and no learner, and fails the test (saying what) otherwise. A status
// written before the fault was seen does not count: the cluster must first be seen not whole, or stay
// whole for 10 s (a fault the operator never noticed, healed by kubelet alone).
func waitHealthy(t *testing.T, c *etcdv1beta1.EtcdCluster, what string) {
	t.Helper()
	start := time.Now()
	sawBroken := false
	poll.Eventually(t, chaosRecoverTimeout, what, func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		switch {
		case err != nil:
			return err
		case !whole(got):
			sawBroken = true
			return fmt.Errorf("phase %s, %d ready, members %+v", got.Status.Phase, got.Status.ReadyReplicas, got.Status.Members)
		case !sawBroken && time.Since(start) < 10*time.Second:
			return errors.New("whole, but the fault was not seen yet")
		}
		return nil
	})
}

// waitUnhealthy waits until the status names member unhealthy: the fault was seen, and may be healed.
func waitUnhealthy(t *testing.T, c *etcdv1beta1.EtcdCluster, member string) {
	t.Helper()
	poll.Eventually(t, time.Minute, member+" seen unhealthy", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		for _, m := range got.Status.Members {
			if m.Name == member && !m.Healthy {
				return nil
			}
		}
		return fmt.Errorf("members %+v", got.Status.Members)
	})
}

// whole reports whether the status shows 3 healthy voters, Available, nothing in progress.
func whole(c *etcdv1beta1.EtcdCluster) bool {
	if c.Status.ReadyReplicas != 3 || len(c.Status.Members) != 3 || !meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1beta1.ConditionAvailable) {
		return false
	}
	for _, m := range c.Status.Members {
		if m.Role != etcdv1beta1.RoleVoter || !m.Healthy {
			return false
		}
	}
	return true
}

// reportChaos logs, per fault class, how many faults were injected and the min/median/max recovery.
func reportChaos(t *testing.T, times map[string][]time.Duration) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: recovery times per fault class (all recovered)\n| fault | injected | min | median | max |\n| --- | --- | --- | --- | --- |\n")
	for _, f := range chaosClasses {
		ts := times[f.name]
		if len(ts) == 0 {
			continue
		}
		slices.Sort(ts)
		r := func(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", f.name, len(ts), r(ts[0]), r(ts[len(ts)/2]), r(ts[len(ts)-1]))
	}
	t.Log(b.String())
}

// checkHistory checks the clients' history for linearizability and logs its size.
func checkHistory(t *testing.T, rec *linearizability.Recorder) {
	t.Helper()
	res, err := linearizability.Check(rec.Operations(), chaosCheckTimeout, linearizability.WithVisualization(t.TempDir()+"/history.html"))
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	for _, op := range rec.Operations() {
		in, out := op.Input.(linearizability.Input), op.Output.(linearizability.Output)
		if !out.Unknown && (in.Kind == linearizability.Put || (in.Kind == linearizability.CAS && out.Succeeded)) {
			acked++
		}
	}
	t.Logf("chaos: history of %d operations (%d acknowledged writes, %d with unknown outcome) over %d keys: %v, checked in %s",
		res.Operations, acked, res.Unknown, res.Keys, res.Verdict, res.Duration.Round(time.Millisecond))
	if res.Verdict == porcupine.Ok {
		t.Logf("chaos: 0 acknowledged writes lost: every read saw the last acknowledged write before it, or a later one")
	}
	if res.Verdict != porcupine.Ok {
		t.Errorf("the clients' history is not linearizable (%v); see %s", res.Verdict, res.Visualization)
	}
}

// assertMembersAgree reads every key of the run through every member (linearizable reads) and fails
// when two members return different values.
func assertMembersAgree(t *testing.T, c *etcdv1beta1.EtcdCluster, keys int) {
	t.Helper()
	pods, err := memberPods(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys {
		key := linearizability.Key(k)
		values := map[string]string{}
		for name, p := range pods {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := etcdClient(t, podEndpoint(p)).Get(ctx, key)
			cancel()
			if err != nil {
				t.Fatalf("get %s through %s: %v", key, name, err)
			}
			v := ""
			if len(resp.Kvs) == 1 {
				v = string(resp.Kvs[0].Value)
			}
			values[name] = v
		}
		for name, v := range values {
			if v != values["demo-0"] {
				t.Errorf("%s: %s reads %q, demo-0 %q", key, name, v, values["demo-0"])
			}
		}
	}
}
