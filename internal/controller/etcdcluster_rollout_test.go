package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/kube"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// waitAvailable waits until the cluster is Available with every member a healthy voter.
func waitAvailable(t *testing.T, c *etcdv1beta1.EtcdCluster, ready int32) *etcdv1beta1.EtcdCluster {
	t.Helper()
	testutil.Eventually(t, waitTimeout, "Available", func(context.Context) error {
		c = getCluster(t, c)
		a := condition(c, etcdv1beta1.ConditionAvailable)
		if a == nil || a.Status != metav1.ConditionTrue || c.Status.ReadyReplicas != ready {
			return fmt.Errorf("available %+v ready %d", a, c.Status.ReadyReplicas)
		}
		return nil
	})
	return c
}

// TestRollingUpdateFollowersFirstLeaderLast: a change of the pod template restarts the members one at a
// time on real etcd: followers first, each only after the one before is back and healthy, and the
// leader last, after leadership moved to an updated member. The members keep their IDs (their data),
// and the PodDisruptionBudget keeps a quorum.
func TestRollingUpdateFollowersFirstLeaderLast(t *testing.T) {
	c := createCluster(t, "roll", 3)
	ctx := context.Background()
	names := []string{"roll-0", "roll-1", "roll-2"}
	hosts := []string{"127.0.0.31", "127.0.0.32", "127.0.0.33"}
	members := testenv.StartEtcd(t, names, hosts)
	ipOf := map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]}
	runPods(t, c, ipOf)
	c = waitAvailable(t, c, 3)

	pdb := &policyv1.PodDisruptionBudget{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, pdb); err != nil {
		t.Fatalf("PodDisruptionBudget: %v", err)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 || !metav1.IsControlledBy(pdb, c) {
		t.Errorf("PodDisruptionBudget minAvailable %v controlled %v, want 2 and owned", pdb.Spec.MinAvailable, metav1.IsControlledBy(pdb, c))
	}

	leaderName := func() string {
		for i, m := range members {
			if m.Etcd.Server.Lead() == uint64(m.Etcd.Server.MemberID()) {
				return names[i]
			}
		}
		return ""
	}
	uids, _ := podAndClaimUIDs(t, c, names)
	firstLeader := leaderName()
	testutil.Eventually(t, waitTimeout, "DataInconsistent=False from real HashKV", func(context.Context) error {
		c = getCluster(t, c)
		d := condition(c, etcdv1beta1.ConditionDataInconsistent)
		if d == nil || d.Status != metav1.ConditionFalse || d.Reason != etcdv1beta1.ReasonHashesMatch || !strings.Contains(d.Message, "all 3 members hashed to") {
			return fmt.Errorf("DataInconsistent %+v", d)
		}
		return nil
	})

	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("200Mi")}}}
	})
	wantHash := resources.Options{}.SpecHash(c)

	// Restarts go through the Eviction API: while the budget has not been computed (here there is no
	// disruption controller yet), the eviction is refused, the rollout waits and says so, and no pod goes.
	testutil.Eventually(t, waitTimeout, "rollout waits for the PodDisruptionBudget", func(context.Context) error {
		c = getCluster(t, c)
		p := condition(c, etcdv1beta1.ConditionProgressing)
		if p == nil || p.Reason != etcdv1beta1.ReasonRolloutPaused || !strings.Contains(p.Message, "the PodDisruptionBudget refuses its eviction") ||
			!strings.Contains(p.Message, "every member serves and is Ready: the budget's status lags behind them") {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	for _, n := range names {
		if p, err := getPod(c, n); err != nil || p.UID != uids[n] || p.DeletionTimestamp != nil {
			t.Fatalf("pod %s went while its eviction was refused (%v)", n, err)
		}
	}
	runDisruptionController(t, c)

	// Play kubelet: a pod recreated with a new UID "starts" (the embedded member keeps running on its
	// data, as a restarted member does). Record the order and who led when each member was restarted.
	type restart struct{ member, leader string }
	var order []restart
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond) // sampling interval: sees every restart and who led then
	defer tick.Stop()
	for len(order) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("rollout did not finish in 60s; restarts so far: %+v", order)
		}
		for _, n := range names {
			p, err := getPod(c, n)
			if err != nil || p.UID == uids[n] {
				continue
			}
			uids[n] = p.UID
			order = append(order, restart{n, leaderName()})
			if got := p.Annotations[etcdv1beta1.AnnotationSpecHash]; got != wantHash {
				t.Errorf("recreated pod %s has spec hash %q, want %q", n, got, wantHash)
			}
			if got := p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory]; got.String() != "200Mi" {
				t.Errorf("recreated pod %s requests memory %s, want 200Mi", n, got.String())
			}
			// while one member is restarting, no other member pod is gone
			pods := &corev1.PodList{}
			if err := k8s.List(ctx, pods, client.InNamespace(c.Namespace)); err != nil {
				t.Fatal(err)
			}
			if len(pods.Items) != 3 {
				t.Errorf("%d member pods while %s restarts, want 3 (at most one member down)", len(pods.Items), n)
			}
			runPods(t, c, map[string]string{n: ipOf[n]})
		}
		<-tick.C
	}
	for i, r := range order {
		if r.member == r.leader {
			t.Errorf("restart %d: %s was restarted while it led", i+1, r.member)
		}
	}
	if order[2].member != firstLeader {
		t.Errorf("restart order %+v: the first leader %s was not last", order, firstLeader)
	}
	c = waitAvailable(t, c, 3)
	testutil.Eventually(t, waitTimeout, "phase Running after the rollout", func(context.Context) error {
		c = getCluster(t, c)
		if c.Status.Phase != etcdv1beta1.PhaseRunning {
			return fmt.Errorf("phase %s", c.Status.Phase)
		}
		return nil
	})
	for i, m := range c.Status.Members {
		if want := fmt.Sprintf("%x", uint64(members[i].Etcd.Server.MemberID())); m.ID != want {
			t.Errorf("member %s ID %s after the rollout, want %s (the same member on its data)", m.Name, m.ID, want)
		}
	}
	// each member served on the new spec: the record of its restart onto it is gone from its claim
	testutil.Eventually(t, waitTimeout, "no claim records a restart onto an untried spec", func(ctx context.Context) error {
		for _, n := range names {
			pvc := &corev1.PersistentVolumeClaim{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(n)}, pvc); err != nil {
				return err
			}
			if v, ok := pvc.Annotations[etcdv1beta1.AnnotationRolledOnto]; ok {
				return fmt.Errorf("claim of %s has %s=%s", n, etcdv1beta1.AnnotationRolledOnto, v)
			}
		}
		return nil
	})
}

// TestC09_VersionPathRefusedWithoutPodChanges: a version the members cannot move to (it got past
// admission) sets Valid=False with the allowed path and touches no pod.
func TestC09_VersionPathRefusedWithoutPodChanges(t *testing.T) {
	c := createCluster(t, "path", 1)
	ctx := context.Background()
	testutil.Eventually(t, waitTimeout, "pod path-0", func(context.Context) error { _, err := getPod(c, "path-0"); return err })
	before, _ := getPod(c, "path-0")
	// The members run 3.5.20 (as the status records), and the spec asks for 3.6.16: etcd's checklist
	// needs 3.5.26 first. CEL allows it (it cannot see what members run); the operator must not.
	testutil.Eventually(t, waitTimeout, "status set to members running 3.5.20", func(context.Context) error {
		c = getCluster(t, c)
		c.Status.CurrentVersion = "3.5.20"
		c.Status.ClusterID = "abc"
		return k8s.Status().Update(ctx, c) // retried on a conflict with the operator's own writes
	})
	testutil.Eventually(t, waitTimeout, "Valid=False", func(context.Context) error {
		c = getCluster(t, c)
		v := condition(c, etcdv1beta1.ConditionValid)
		if v == nil || v.Status != metav1.ConditionFalse || v.Reason != etcdv1beta1.ReasonInvalidSpec {
			return fmt.Errorf("Valid %+v", v)
		}
		return nil
	})
	if v := condition(c, etcdv1beta1.ConditionValid); !strings.Contains(v.Message, "3.5.26") || !strings.Contains(v.Message, "no member is changed") {
		t.Errorf("Valid message %q does not name the path", v.Message)
	}
	after, err := getPod(c, "path-0")
	if err != nil || after.UID != before.UID || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("pod path-0 was touched: %v", err)
	}
}

// TestVolumeExpansion: a larger storage.size expands bound claims whose StorageClass allows it, and
// says which claims cannot grow when it does not.
func TestVolumeExpansion(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		expand    bool
		reason    string
		wantBytes string
	}{
		{"grow", true, etcdv1beta1.ReasonExpandingVolumes, "2Gi"},
		{"nogrow", false, etcdv1beta1.ReasonExpansionRefused, "1Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc-" + tc.name},
				Provisioner: "example.com/none", AllowVolumeExpansion: ptr.To(tc.expand)}
			if err := k8s.Create(ctx, sc); err != nil {
				t.Fatal(err)
			}
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-vol-" + tc.name}}
			if err := k8s.Create(ctx, ns); err != nil {
				t.Fatal(err)
			}
			size := resource.MustParse("1Gi")
			c := testutil.EtcdCluster("vol", testutil.InNamespace(ns.Name), testutil.WithReplicas(1),
				testutil.WithStorageSize(size.String()), testutil.WithStorageClass(sc.Name))
			if err := k8s.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			retireAtEnd(t, c)
			pvc := &corev1.PersistentVolumeClaim{}
			key := client.ObjectKey{Namespace: ns.Name, Name: "data-vol-0"}
			// play the volume controller: bound at 1Gi
			setClaimStatus := func(capacity resource.Quantity) {
				testutil.Eventually(t, waitTimeout, "claim status", func(context.Context) error {
					if err := k8s.Get(ctx, key, pvc); err != nil {
						return err
					}
					pvc.Status.Phase = corev1.ClaimBound
					pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: capacity}
					return k8s.Status().Update(ctx, pvc) // retried on a conflict with the operator's writes
				})
			}
			setClaimStatus(size)
			bigger := resource.MustParse("2Gi")
			c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.Size = &bigger })
			testutil.Eventually(t, waitTimeout, "VolumesResized "+tc.reason, func(context.Context) error {
				c = getCluster(t, c)
				v := condition(c, etcdv1beta1.ConditionVolumesResized)
				if v == nil || v.Reason != tc.reason || v.Status != metav1.ConditionFalse {
					return fmt.Errorf("VolumesResized %+v", v)
				}
				return nil
			})
			if err := k8s.Get(ctx, key, pvc); err != nil {
				t.Fatal(err)
			}
			if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != tc.wantBytes {
				t.Errorf("claim requests %s, want %s", got.String(), tc.wantBytes)
			}
			if !tc.expand {
				if msg := condition(c, etcdv1beta1.ConditionVolumesResized).Message; !strings.Contains(msg, "does not allow volume expansion") || !strings.Contains(msg, "data-vol-0") {
					t.Errorf("message %q does not say which claim cannot grow and why", msg)
				}
				return
			}
			// the storage provider grows the volume: the condition turns True
			setClaimStatus(bigger)
			testutil.Eventually(t, waitTimeout, "VolumesResized True", func(context.Context) error {
				c = getCluster(t, c)
				if v := condition(c, etcdv1beta1.ConditionVolumesResized); v == nil || v.Status != metav1.ConditionTrue {
					return fmt.Errorf("VolumesResized %+v", v)
				}
				return nil
			})
		})
	}
}

// runDisruptionController plays kube-controller-manager's disruption controller for cluster c's
// PodDisruptionBudget until the test ends: every 50 ms, disruptionsAllowed is the number of Ready
// member pods that are not terminating, less minAvailable, with observedGeneration current, so that
// the Eviction API answers as it would in a cluster.
func runDisruptionController(t *testing.T, c *etcdv1beta1.EtcdCluster) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			pdb := &policyv1.PodDisruptionBudget{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, pdb); err != nil || pdb.Spec.MinAvailable == nil {
				continue
			}
			pods := &corev1.PodList{}
			if err := k8s.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1beta1.LabelCluster: c.Name}); err != nil {
				continue
			}
			var healthy int32
			for _, p := range pods.Items {
				for _, cond := range p.Status.Conditions {
					if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
						healthy++
					}
				}
			}
			want := pdb.Status
			want.ObservedGeneration, want.CurrentHealthy, want.ExpectedPods = pdb.Generation, healthy, int32(len(pods.Items))
			want.DesiredHealthy = int32(pdb.Spec.MinAvailable.IntValue())
			want.DisruptionsAllowed = max(0, healthy-want.DesiredHealthy)
			if want.ObservedGeneration == pdb.Status.ObservedGeneration && want.DisruptionsAllowed == pdb.Status.DisruptionsAllowed &&
				want.CurrentHealthy == pdb.Status.CurrentHealthy && want.ExpectedPods == pdb.Status.ExpectedPods {
				continue
			}
			pdb.Status = want
			_ = k8s.Status().Update(ctx, pdb) // a conflict is retried on the next tick
		}
	}()
}

// TestImageChange: a rollout's UpdatingMember event names the image change, or says that the image
// stays when the spec changed elsewhere.
func TestImageChange(t *testing.T) {
	for _, tc := range []struct{ old, cur, want string }{
		{"etcd:v3.5.35", "etcd:v3.6.16", "image etcd:v3.5.35 → etcd:v3.6.16"},
		{"etcd:v3.6.16", "etcd:v3.6.16", "image etcd:v3.6.16, unchanged"},
		{"", "etcd:v3.6.16", "image etcd:v3.6.16"},
	} {
		if got := imageChange(tc.old, tc.cur); got != tc.want {
			t.Errorf("imageChange(%q, %q) = %q, want %q", tc.old, tc.cur, got, tc.want)
		}
	}
}

// TestRolloutOntoInvalidPodRestartsNoMember: a spec whose pod the API server refuses (a memory request
// above its limit, which the schema cannot tell) pauses the rollout before any member goes down: no pod
// is evicted, and Progressing says which member waits, the API server's reason, and what to fix. Once
// the spec is fixed, the rollout restarts the members.
func TestRolloutOntoInvalidPodRestartsNoMember(t *testing.T) {
	c := createCluster(t, "badpod", 3)
	names := []string{"badpod-0", "badpod-1", "badpod-2"}
	hosts := []string{"127.0.0.158", "127.0.0.159", "127.0.0.160"}
	testenv.StartEtcd(t, names, hosts)
	runPods(t, c, map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]})
	c = waitAvailable(t, c, 3)
	uids, _ := podAndClaimUIDs(t, c, names)
	runDisruptionController(t, c) // evictions would go through

	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}
	})
	testutil.Eventually(t, waitTimeout, "the rollout paused on the refused pod", func(context.Context) error {
		c = getCluster(t, c)
		p := condition(c, etcdv1beta1.ConditionProgressing)
		if p == nil || p.Status != metav1.ConditionFalse || p.Reason != etcdv1beta1.ReasonRolloutPaused ||
			!strings.Contains(p.Message, "the API server refuses the pod the current spec makes for it") ||
			!strings.Contains(p.Message, "must be less than or equal to memory limit") || !strings.Contains(p.Message, "fix spec.podTemplate") {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	for _, n := range names {
		if p, err := getPod(c, n); err != nil || p.UID != uids[n] || p.DeletionTimestamp != nil {
			t.Fatalf("pod %s went for a spec whose pod is refused (%v)", n, err)
		}
	}

	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("512Mi")
	})
	testutil.Eventually(t, waitTimeout, "a member restarted onto the fixed spec", func(context.Context) error {
		for _, n := range names {
			if p, err := getPod(c, n); err != nil || p.UID != uids[n] {
				return nil
			}
		}
		return errors.New("every pod is the one before the fix")
	})
}

// TestPodRefusedSinceAdmissionIsBlockedStep: a LimitRange added after the cluster runs refuses the pod
// of a member whose pod is gone: the pass does not fail with a reconcile error, retried with backoff,
// but says which pod the API server refuses and why (Progressing False, Waiting), looks again within
// seconds, and recreates the pod once the LimitRange is gone.
func TestPodRefusedSinceAdmissionIsBlockedStep(t *testing.T) {
	c := createCluster(t, "lrpod", 3)
	names := []string{"lrpod-0", "lrpod-1", "lrpod-2"}
	hosts := []string{"127.0.0.37", "127.0.0.38", "127.0.0.39"}
	testenv.StartEtcd(t, names, hosts)
	runPods(t, c, map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]})
	c = waitAvailable(t, c, 3)
	ctx := context.Background()
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "tiny-pods", Namespace: c.Namespace}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypePod, Max: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}
	if err := k8s.Create(ctx, lr); err != nil {
		t.Fatal(err)
	}
	old, err := getPod(c, names[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "Progressing says the API server refuses the pod", func(context.Context) error {
		c = getCluster(t, c)
		p := condition(c, etcdv1beta1.ConditionProgressing)
		if p == nil || p.Status != metav1.ConditionFalse || p.Reason != etcdv1beta1.ReasonWaiting ||
			!strings.Contains(p.Message, "Cannot create the pod of lrpod-1: ") || !strings.Contains(p.Message, "maximum memory usage per Pod is 64Mi") ||
			!strings.Contains(p.Message, "fix spec.podTemplate, or what the API server names") {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	if err := k8s.Delete(ctx, lr); err != nil {
		t.Fatal(err)
	}
	// within RequeueRefused of a pass, with no event to wake the operator
	testutil.Eventually(t, 15*time.Second, "the pod of lrpod-1 recreated once the LimitRange is gone", func(context.Context) error {
		p, err := getPod(c, names[1])
		if err != nil {
			return err
		}
		if p.UID == old.UID {
			return errors.New("not yet")
		}
		return nil
	})
}

// TestRolloutBeyondQuotaRestartsNoMember: a spec that asks each member for more cpu than the
// namespace's ResourceQuota has room for, once every member is rolled, pauses the rollout before any
// member goes down (the dry run of one pod cannot tell, as the old pod still counts), and Progressing
// says which quota, how much room it has and how much the roll needs. Once the quota has room, the
// rollout restarts the members. (envtest runs no quota controller: the test keeps the quota's status.)
func TestRolloutBeyondQuotaRestartsNoMember(t *testing.T) {
	c := createCluster(t, "quotaroll", 3)
	names := []string{"quotaroll-0", "quotaroll-1", "quotaroll-2"}
	hosts := []string{"127.0.0.45", "127.0.0.46", "127.0.0.47"}
	testenv.StartEtcd(t, names, hosts)
	runPods(t, c, map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]})
	c = waitAvailable(t, c, 3)
	uids, _ := podAndClaimUIDs(t, c, names)
	runDisruptionController(t, c) // evictions would go through
	ctx := context.Background()

	// the quota has 150m of requests.cpu to spare; each member asks 100m more on the new spec
	used := resource.Quantity{}
	for _, n := range names {
		p, err := getPod(c, n)
		if err != nil {
			t.Fatal(err)
		}
		cpu := kube.QuotaUsage(p)[corev1.ResourceRequestsCPU]
		used.Add(cpu)
	}
	hard := used.DeepCopy()
	hard.Add(resource.MustParse("150m"))
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute", Namespace: c.Namespace},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: hard}}}
	if err := k8s.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceRequestsCPU: used}}
	if err := k8s.Status().Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	c = updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}
	})
	testutil.Eventually(t, waitTimeout, "the rollout paused on the quota", func(context.Context) error {
		c = getCluster(t, c)
		p := condition(c, etcdv1beta1.ConditionProgressing)
		if p == nil || p.Status != metav1.ConditionFalse || p.Reason != etcdv1beta1.ReasonRolloutPaused ||
			!strings.Contains(p.Message, "ResourceQuota compute has room for requests.cpu 150m more") ||
			!strings.Contains(p.Message, "rolling 3 members onto the new spec needs up to 300m more") ||
			!strings.Contains(p.Message, "raise the quota, or lower spec.podTemplate.resources") {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	// an alert on events sees the pause too
	waitWarning(t, c, etcdv1beta1.ReasonRolloutPaused, "ResourceQuota compute has room for requests.cpu 150m more")
	for _, n := range names {
		if p, err := getPod(c, n); err != nil || p.UID != uids[n] || p.DeletionTimestamp != nil {
			t.Fatalf("pod %s went for a spec the quota has no room for (%v)", n, err)
		}
	}

	// room for the whole roll (and, as nothing here frees the old pods' share, for the new pods beside them)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
		t.Fatal(err)
	}
	hard.Add(resource.MustParse("1"))
	q.Spec.Hard[corev1.ResourceRequestsCPU] = hard
	if err := k8s.Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	q.Status.Hard[corev1.ResourceRequestsCPU] = hard
	if err := k8s.Status().Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	// within RequeueRefused of a pass, with no event to wake the operator
	testutil.Eventually(t, 15*time.Second, "a member restarted once the quota has room", func(context.Context) error {
		for _, n := range names {
			if p, err := getPod(c, n); err != nil || p.UID != uids[n] {
				return nil
			}
		}
		return errors.New("every pod is the one from before")
	})
}
