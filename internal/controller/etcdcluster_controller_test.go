package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

const waitTimeout = 30 * time.Second

func createCluster(t *testing.T, name string, replicas int32) *etcdv1beta1.EtcdCluster {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-" + name}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	c := testutil.EtcdCluster(name, testutil.InNamespace(ns.Name), testutil.WithReplicas(replicas))
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatalf("create cluster: %v", err)
	}
	retireAtEnd(t, c)
	return c
}

// retireAtEnd deletes the cluster when the test ends, and waits until the operator has let it go, so
// that clusters of finished tests (whose etcd members are stopped) do not keep the reconcilers busy
// with passes that time out while later tests wait for theirs. When the test failed, it first logs the
// cluster's state (dumpCluster).
func retireAtEnd(t *testing.T, c *etcdv1beta1.EtcdCluster) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			dumpCluster(t, c)
		}
		ctx := context.Background()
		if err := k8s.Delete(ctx, c); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete cluster %s: %v", c.Name, err)
			return
		}
		testutil.Eventually(t, waitTimeout, "cluster "+c.Name+" deleted", func(context.Context) error {
			err := k8s.Get(ctx, client.ObjectKeyFromObject(c), &etcdv1beta1.EtcdCluster{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%w)", err)
		})
	})
}

// dumpCluster logs what a failed test needs to be diagnosed from CI output alone: the cluster's
// conditions, its pods, and the last operator log lines about its namespace.
func dumpCluster(t *testing.T, c *etcdv1beta1.EtcdCluster) {
	t.Helper()
	got := &etcdv1beta1.EtcdCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), got); err == nil {
		t.Logf("status of %s: phase %s, members %d, ready %d", c.Name, got.Status.Phase, len(got.Status.Members), got.Status.ReadyReplicas)
		for _, cond := range got.Status.Conditions {
			t.Logf("  %s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	pods := &corev1.PodList{}
	if err := k8s.List(context.Background(), pods, client.InNamespace(c.Namespace)); err == nil {
		for _, p := range pods.Items {
			t.Logf("  pod %s uid %s phase %s deleting %v", p.Name, p.UID, p.Status.Phase, p.DeletionTimestamp != nil)
		}
	}
	const lastLines = 80
	var lines []string
	for _, l := range strings.Split(operatorLogs.String(), "\n") {
		// info, debug (V(1)) and errors: deeper levels are controller-runtime's request dumps
		if strings.Contains(l, `"level":"Level(`) {
			continue
		}
		if strings.Contains(l, `"namespace":"`+c.Namespace+`"`) || strings.Contains(l, c.Namespace+"/") {
			lines = append(lines, l)
		}
	}
	t.Logf("last %d of %d operator log lines about namespace %s:", min(lastLines, len(lines)), len(lines), c.Namespace)
	for _, l := range lines[max(0, len(lines)-lastLines):] {
		t.Log("  " + l)
	}
}

func getCluster(t *testing.T, c *etcdv1beta1.EtcdCluster) *etcdv1beta1.EtcdCluster {
	t.Helper()
	got := &etcdv1beta1.EtcdCluster{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
		t.Fatalf("get cluster: %v", err)
	}
	return got
}

func getPod(c *etcdv1beta1.EtcdCluster, name string) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	return p, k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: name}, p)
}

// runPods makes the member pods look as kubelet would report them once their containers run: phase
// Running at the given IPs (there is no kubelet in this test).
func runPods(t *testing.T, c *etcdv1beta1.EtcdCluster, ips map[string]string) {
	t.Helper()
	for name, ip := range ips {
		testutil.Eventually(t, waitTimeout, "pod "+name+" running", func(context.Context) error {
			p, err := getPod(c, name)
			if err != nil {
				return err
			}
			p.Status.Phase = corev1.PodRunning
			p.Status.PodIP = ip
			p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			return k8s.Status().Update(context.Background(), p)
		})
	}
}

func condition(c *etcdv1beta1.EtcdCluster, condType string) *metav1.Condition {
	return meta.FindStatusCondition(c.Status.Conditions, condType)
}

// TestBootstrapCreatesMembers: a new cluster gets its Services, one claim and one pod per member, all
// members bootstrapping together with the full initial cluster and the cluster's UID as token.
func TestBootstrapCreatesMembers(t *testing.T) {
	c := createCluster(t, "boot", 3)
	ctx := context.Background()
	opts := resources.Options{}
	testutil.Eventually(t, waitTimeout, "three member pods", func(context.Context) error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		if len(pods.Items) != 3 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		return nil
	})
	c = getCluster(t, c)
	if !slices.Contains(c.Finalizers, etcdv1beta1.Finalizer) {
		t.Errorf("finalizers = %v", c.Finalizers)
	}
	wantInitial := "--initial-cluster=" + opts.InitialCluster(c, []string{"boot-0", "boot-1", "boot-2"})
	for i := range 3 {
		name := fmt.Sprintf("boot-%d", i)
		p, err := getPod(c, name)
		if err != nil {
			t.Fatal(err)
		}
		cmd := p.Spec.Containers[0].Command
		for _, want := range []string{wantInitial, "--initial-cluster-state=new", "--initial-cluster-token=" + string(c.UID), "--name=" + name} {
			if !slices.Contains(cmd, want) {
				t.Errorf("pod %s command lacks %q: %q", name, want, cmd)
			}
		}
		if !metav1.IsControlledBy(p, c) {
			t.Errorf("pod %s is not controlled by the cluster", name)
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "data-" + name}, pvc); err != nil {
			t.Errorf("claim of %s: %v", name, err)
		} else if !metav1.IsControlledBy(pvc, c) {
			t.Errorf("claim of %s is not controlled by the cluster", name)
		}
	}
	peer := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "boot-peer"}, peer); err != nil {
		t.Fatal(err)
	}
	if peer.Spec.ClusterIP != corev1.ClusterIPNone || !peer.Spec.PublishNotReadyAddresses {
		t.Errorf("peer service is not headless with publishNotReadyAddresses: %+v", peer.Spec)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "boot-client"}, &corev1.Service{}); err != nil {
		t.Errorf("client service: %v", err)
	}
	if n := promtestutil.ToFloat64(metrics.APIWrites.WithLabelValues("create", "Pod", c.Namespace)); n != 3 {
		t.Errorf("etcd_operator_api_writes_total{verb=create,kind=Pod,namespace=%s} = %v, want the 3 pods created", c.Namespace, n)
	}
	testutil.Eventually(t, waitTimeout, "status Creating", func(context.Context) error {
		c = getCluster(t, c)
		p := condition(c, etcdv1beta1.ConditionProgressing)
		if c.Status.Phase != etcdv1beta1.PhaseCreating || p == nil || p.Status != metav1.ConditionTrue || p.Reason != etcdv1beta1.ReasonBootstrapping {
			return fmt.Errorf("phase %q, progressing %+v", c.Status.Phase, p)
		}
		if a := condition(c, etcdv1beta1.ConditionAvailable); a == nil || a.Status != metav1.ConditionFalse {
			return fmt.Errorf("available %+v", a)
		}
		return nil
	})
}

// TestBootstrapPodsRebuiltOnAFixedSpec: the first members of a cluster whose spec.version has no image
// wait to pull it; the status names each one's problem and the Progressing message says what to
// check. Once spec.version is fixed, their pods (their etcd never ran) are recreated with the current
// spec, once each, on their claims.
func TestBootstrapPodsRebuiltOnAFixedSpec(t *testing.T) {
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-typo"}}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	c := testutil.EtcdCluster("typo", testutil.InNamespace("ns-typo"), testutil.WithReplicas(1), testutil.WithVersion("3.6.99"))
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatalf("create cluster: %v", err)
	}
	retireAtEnd(t, c)
	var first *corev1.Pod
	testutil.Eventually(t, waitTimeout, "pod typo-0 built for 3.6.99, waiting for its image", func(context.Context) error {
		p, err := getPod(c, "typo-0")
		if err != nil {
			return err
		}
		if !strings.HasSuffix(p.Spec.Containers[0].Image, ":v3.6.99") {
			return fmt.Errorf("image %s", p.Spec.Containers[0].Image)
		}
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.EtcdContainer, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "` + p.Spec.Containers[0].Image + `"`}}}}
		if err := k8s.Status().Update(context.Background(), p); err != nil {
			return err
		}
		first = p
		return nil
	})
	testutil.Eventually(t, waitTimeout, "the status names the image pull", func(context.Context) error {
		got := getCluster(t, c)
		p := condition(got, etcdv1beta1.ConditionProgressing)
		if len(got.Status.Members) != 1 || !strings.Contains(got.Status.Members[0].Problem, "ImagePullBackOff") ||
			p == nil || !strings.Contains(p.Message, "typo-0: etcd container ImagePullBackOff") || !strings.Contains(p.Message, "check spec.version and spec.image") {
			return fmt.Errorf("members %+v, Progressing %+v", got.Status.Members, p)
		}
		return nil
	})
	updateSpec(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = etcdv1beta1.DefaultVersion })
	var second *corev1.Pod
	testutil.Eventually(t, waitTimeout, "pod typo-0 recreated with the fixed spec", func(context.Context) error {
		p, err := getPod(c, "typo-0")
		if err != nil {
			return err
		}
		if p.UID == first.UID || strings.HasSuffix(p.Spec.Containers[0].Image, ":v3.6.99") {
			return fmt.Errorf("pod %s on %s", p.UID, p.Spec.Containers[0].Image)
		}
		second = p
		return nil
	})
	testutil.Consistently(t, 3*time.Second, "the new pod stays", func(context.Context) error {
		p, err := getPod(c, "typo-0")
		if err != nil {
			return err
		}
		if p.UID != second.UID || p.DeletionTimestamp != nil {
			return fmt.Errorf("pod %s (deleted %v), want %s kept", p.UID, p.DeletionTimestamp, second.UID)
		}
		return nil
	})
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: "data-typo-0"}, &corev1.PersistentVolumeClaim{}); err != nil {
		t.Errorf("claim of typo-0: %v", err)
	}
}

// TestBootstrapWaitsForEveryAddress: the initial members' pods hold etcd back in await-peers until every
// one of them has its address; then the operator tells each (a POST on its peer port, where one listens
// here) and marks each with the annotation the init container also reads.
func TestBootstrapWaitsForEveryAddress(t *testing.T) {
	c := createCluster(t, "gate", 3)
	var told atomic.Int32
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.87", strconv.Itoa(resources.PeerPort)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == resources.PeersAddressedPath {
			told.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	names := []string{"gate-0", "gate-1", "gate-2"}
	for _, name := range names {
		testutil.Eventually(t, waitTimeout, "pod "+name, func(context.Context) error {
			_, err := getPod(c, name)
			return err
		})
		p, _ := getPod(c, name)
		if !slices.ContainsFunc(p.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == resources.AwaitPeersContainerName }) {
			t.Errorf("pod %s has no init container %s: %v", name, resources.AwaitPeersContainerName, p.Spec.InitContainers)
		}
	}
	marked := func(name string) bool {
		p, err := getPod(c, name)
		return err == nil && p.Annotations[etcdv1beta1.AnnotationPeersAddressed] == "true"
	}
	runPods(t, c, map[string]string{names[0]: "127.0.0.87", names[1]: "127.0.0.88"})
	testutil.Consistently(t, 2*time.Second, "no member told while one has no address", func(context.Context) error {
		if n := told.Load(); n > 0 || marked(names[0]) || marked(names[1]) {
			return fmt.Errorf("told %d times; %s marked %v", n, names[0], marked(names[0]))
		}
		return nil
	})
	runPods(t, c, map[string]string{names[2]: "127.0.0.89"})
	testutil.Eventually(t, waitTimeout, "every member told and marked", func(context.Context) error {
		for _, name := range names {
			if !marked(name) {
				return fmt.Errorf("pod %s not marked", name)
			}
		}
		if told.Load() == 0 {
			return errors.New("no POST on the listening member's peer port")
		}
		return nil
	})
}

// TestStatusFromRealEtcd: the status reports what real etcd members say (cluster ID, member IDs,
// leader, version), a deleted member pod comes back on its claim with the same command, and passes
// that observe nothing new write nothing.
func TestStatusFromRealEtcd(t *testing.T) {
	c := createCluster(t, "real", 3)
	ctx := context.Background()
	names := []string{"real-0", "real-1", "real-2"}
	hosts := []string{"127.0.0.11", "127.0.0.12", "127.0.0.13"}
	members := testenv.StartEtcd(t, names, hosts)
	runPods(t, c, map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]})

	wantClusterID := etcd.FormatID(uint64(members[0].Etcd.Server.Cluster().ID()))
	testutil.Eventually(t, waitTimeout, "Available from real etcd", func(context.Context) error {
		c = getCluster(t, c)
		a := condition(c, etcdv1beta1.ConditionAvailable)
		if a == nil || a.Status != metav1.ConditionTrue {
			return fmt.Errorf("available %+v", a)
		}
		if c.Status.Phase != etcdv1beta1.PhaseRunning || c.Status.ReadyReplicas != 3 {
			return fmt.Errorf("phase %q ready %d", c.Status.Phase, c.Status.ReadyReplicas)
		}
		return nil
	})
	st := c.Status
	if st.ClusterID != wantClusterID {
		t.Errorf("clusterID = %q, want %q", st.ClusterID, wantClusterID)
	}
	if st.CurrentVersion != "3.6.16" {
		t.Errorf("currentVersion = %q", st.CurrentVersion)
	}
	if st.ObservedGeneration != c.Generation {
		t.Errorf("observedGeneration %d != generation %d", st.ObservedGeneration, c.Generation)
	}
	leaders := 0
	for i, m := range st.Members {
		if m.Name != names[i] || !m.Healthy || m.Role != etcdv1beta1.RoleVoter || m.ID == "" || m.DBSizeBytes <= 0 {
			t.Errorf("member %d = %+v", i, m)
		}
		if m.ID != etcd.FormatID(uint64(members[i].Etcd.Server.MemberID())) {
			t.Errorf("member %s ID %s, etcd says %s", m.Name, m.ID, etcd.FormatID(uint64(members[i].Etcd.Server.MemberID())))
		}
		if m.Leader {
			leaders++
			if st.Leader != m.Name {
				t.Errorf("status.leader %q, member %s leads", st.Leader, m.Name)
			}
		}
	}
	if leaders != 1 {
		t.Errorf("%d members marked leader", leaders)
	}

	// The steady state includes the first consistency check's result.
	testutil.Eventually(t, waitTimeout, "first consistency check", func(context.Context) error {
		if d := condition(getCluster(t, c), etcdv1beta1.ConditionDataInconsistent); d == nil || d.Status != metav1.ConditionFalse {
			return fmt.Errorf("DataInconsistent %+v", d)
		}
		return nil
	})
	// Nothing changes: passes triggered by pod updates write no status.
	rv := getCluster(t, c).ResourceVersion
	for i := range 3 {
		p, err := getPod(c, names[0])
		if err != nil {
			t.Fatal(err)
		}
		p.Labels["touch"] = fmt.Sprint(i)
		if err := k8s.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// The health check interval (5 s here) also passes without a write.
	testutil.Consistently(t, 6*time.Second, "status written while nothing changed", func(context.Context) error {
		if got := getCluster(t, c); got.ResourceVersion != rv {
			return fmt.Errorf("resourceVersion %s -> %s; status %+v", rv, got.ResourceVersion, got.Status)
		}
		return nil
	})

	// C04 at the object level: a deleted member pod is recreated on its claim with the same command.
	old, err := getPod(c, names[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, old, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "member pod recreated", func(context.Context) error {
		p, err := getPod(c, names[1])
		if err != nil {
			return err
		}
		if p.UID == old.UID {
			return errors.New("still the old pod")
		}
		if !slices.Equal(p.Spec.Containers[0].Command, old.Spec.Containers[0].Command) {
			t.Errorf("recreated pod's command differs:\n old %q\n new %q", old.Spec.Containers[0].Command, p.Spec.Containers[0].Command)
		}
		return nil
	})
	testutil.Eventually(t, waitTimeout, "Degraded while the member has no running pod", func(context.Context) error {
		c = getCluster(t, c)
		if d := condition(c, etcdv1beta1.ConditionDegraded); d == nil || d.Status != metav1.ConditionTrue {
			return fmt.Errorf("degraded %+v", d)
		}
		if a := condition(c, etcdv1beta1.ConditionAvailable); a == nil || a.Status != metav1.ConditionTrue {
			return fmt.Errorf("available %+v (2 of 3 healthy keep quorum)", a)
		}
		return nil
	})
	runPods(t, c, map[string]string{names[1]: hosts[1]})
	testutil.Eventually(t, waitTimeout, "Running again", func(context.Context) error {
		c = getCluster(t, c)
		if c.Status.Phase != etcdv1beta1.PhaseRunning || c.Status.ReadyReplicas != 3 {
			return fmt.Errorf("phase %q ready %d", c.Status.Phase, c.Status.ReadyReplicas)
		}
		return nil
	})
}

// TestC13_DeleteWithoutQuorum: deleting a cluster none of whose members answers completes at once: the
// finalizer makes no etcd call.
func TestC13_DeleteWithoutQuorum(t *testing.T) {
	c := createCluster(t, "dead", 3)
	// Running pods at addresses where nothing listens: no member answers.
	runPods(t, c, map[string]string{"dead-0": "127.0.0.21", "dead-1": "127.0.0.22", "dead-2": "127.0.0.23"})
	testutil.Eventually(t, waitTimeout, "finalizer", func(context.Context) error {
		if !slices.Contains(getCluster(t, c).Finalizers, etcdv1beta1.Finalizer) {
			return errors.New("no finalizer yet")
		}
		return nil
	})
	start := time.Now()
	if err := k8s.Delete(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "cluster gone", func(context.Context) error {
		err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c), &etcdv1beta1.EtcdCluster{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return errors.New("still there")
		}
		return fmt.Errorf("still there (%w)", err)
	})
	t.Logf("deleted in %s with no member answering", time.Since(start).Round(time.Millisecond))
}

// TestClaimOfAnotherClusterIsNotUsed: a claim left by an earlier cluster of the same name (retainPolicy
// Retain) blocks the bootstrap with a message naming it; once it is deleted, the cluster starts.
func TestClaimOfAnotherClusterIsNotUsed(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-reuse"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	old := testutil.EtcdCluster("reuse", testutil.InNamespace(ns.Name), testutil.WithUID("uid-of-an-earlier-cluster"))
	stale := resources.Options{}.BuildPVC(old, resources.Member{Name: "reuse-0", InitialClusterState: resources.StateNew, InitialCluster: "reuse-0=x,reuse-1=y,reuse-2=z"})
	stale.OwnerReferences = nil
	if err := k8s.Create(ctx, stale); err != nil {
		t.Fatal(err)
	}
	c := testutil.EtcdCluster("reuse", testutil.InNamespace(ns.Name), testutil.WithReplicas(1))
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	retireAtEnd(t, c)
	testutil.Eventually(t, waitTimeout, "bootstrap blocked by the stale claim", func(context.Context) error {
		got := getCluster(t, c)
		p := condition(got, etcdv1beta1.ConditionProgressing)
		if p == nil || p.Status != metav1.ConditionFalse || p.Reason != etcdv1beta1.ReasonInvalidSpec || !strings.Contains(p.Message, "data-reuse-0") {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	if _, err := getPod(c, "reuse-0"); !apierrors.IsNotFound(err) {
		t.Fatalf("a member pod was created on another cluster's claim (get: %v)", err)
	}
	// The user deletes the stale claim (no controller-manager here to drop its protection finalizer).
	testutil.Eventually(t, waitTimeout, "stale claim deleted", func(context.Context) error {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(stale), pvc); apierrors.IsNotFound(err) || (err == nil && pvc.UID != stale.UID) {
			return nil
		} else if err != nil {
			return err
		}
		pvc.Finalizers = nil
		if err := k8s.Update(ctx, pvc); err != nil {
			return err
		}
		if err := k8s.Delete(ctx, pvc, client.Preconditions{UID: &stale.UID}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return errors.New("deleting")
	})
	testutil.Eventually(t, waitTimeout, "the cluster bootstraps on a fresh claim", func(context.Context) error {
		if _, err := getPod(c, "reuse-0"); err != nil {
			return err
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(stale), pvc); err != nil {
			return err
		}
		if uid := pvc.Annotations[etcdv1beta1.AnnotationClusterUID]; uid != string(getCluster(t, c).UID) {
			return fmt.Errorf("claim cluster-uid %q", uid)
		}
		return nil
	})
}

// TestRetainPolicyAppliesToExistingClaims: switching storage.retainPolicy releases (Retain) or adopts
// (Delete) the claims that already exist, not only those created afterwards.
func TestRetainPolicyAppliesToExistingClaims(t *testing.T) {
	c := createCluster(t, "keep", 1)
	ctx := context.Background()
	key := client.ObjectKey{Namespace: c.Namespace, Name: "data-keep-0"}
	owned := func(want bool) func(context.Context) error {
		return func(context.Context) error {
			pvc := &corev1.PersistentVolumeClaim{}
			if err := k8s.Get(ctx, key, pvc); err != nil {
				return err
			}
			if got := metav1.IsControlledBy(pvc, getCluster(t, c)); got != want {
				return fmt.Errorf("claim controlled by the cluster: %v, want %v", got, want)
			}
			return nil
		}
	}
	testutil.Eventually(t, waitTimeout, "claim owned under Delete", owned(true))
	setPolicy := func(p etcdv1beta1.RetainPolicy) {
		testutil.Eventually(t, waitTimeout, "set retainPolicy", func(context.Context) error {
			got := getCluster(t, c)
			got.Spec.Storage.RetainPolicy = p
			return k8s.Update(ctx, got)
		})
	}
	setPolicy(etcdv1beta1.RetainPolicyRetain)
	testutil.Eventually(t, waitTimeout, "claim released under Retain", owned(false))
	setPolicy(etcdv1beta1.RetainPolicyDelete)
	testutil.Eventually(t, waitTimeout, "claim owned again under Delete", owned(true))
}

// TestForeignObjectsReported: a Service of the cluster's name that the cluster does not own blocks the
// pass before anything else (Progressing False, no pod created), and the status still says so; a
// foreign PodDisruptionBudget is reported but blocks nothing (the members are created).
func TestForeignObjectsReported(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-foreign"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "fo-client", Namespace: ns.Name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "x", Port: 80}}}}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "fo", Namespace: ns.Name},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}}}
	for _, o := range []client.Object{svc, pdb} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	c := testutil.EtcdCluster("fo", testutil.InNamespace(ns.Name), testutil.WithReplicas(1))
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	retireAtEnd(t, c)
	testutil.Eventually(t, waitTimeout, "Progressing names the foreign Service", func(context.Context) error {
		p := condition(getCluster(t, c), etcdv1beta1.ConditionProgressing)
		if p == nil || p.Status != metav1.ConditionFalse || !strings.Contains(p.Message, "Service fo-client exists and is not owned") {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	if _, err := getPod(c, "fo-0"); !apierrors.IsNotFound(err) {
		t.Fatalf("a member pod was created while the Service is foreign: %v", err)
	}
	if err := k8s.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	// deleting a Service the cluster does not own brings no event: the blocked cluster looks again
	// within verdict.RequeueBlocked
	testutil.Eventually(t, verdict.RequeueBlocked+waitTimeout, "the member created despite the foreign PodDisruptionBudget", func(context.Context) error {
		_, err := getPod(c, "fo-0")
		return err
	})
}

// TestCertManagerMissingReported: a cluster whose certificates a cert-manager issuer is to issue
// (spec.tls.issuerRef) where cert-manager is not installed is blocked before any member is created,
// and Progressing says what to do.
func TestCertManagerMissingReported(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-no-cert-manager"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	c := testutil.EtcdCluster("cm", testutil.InNamespace(ns.Name), testutil.WithReplicas(1), testutil.WithTLS(true, true), testutil.WithIssuer("ca", ""))
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	retireAtEnd(t, c)
	testutil.Eventually(t, waitTimeout, "Progressing says cert-manager is not installed", func(context.Context) error {
		p := condition(getCluster(t, c), etcdv1beta1.ConditionProgressing)
		if p == nil || p.Status != metav1.ConditionFalse || p.Reason != etcdv1beta1.ReasonCertificateNotReady ||
			!strings.Contains(p.Message, "cert-manager is not installed in this Kubernetes cluster") || !strings.Contains(p.Message, "install cert-manager") {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	if _, err := getPod(c, "cm-0"); !apierrors.IsNotFound(err) {
		t.Fatalf("a member pod was created without its certificates: %v", err)
	}
}

// TestHealthReportedWhileBlocked: a pass blocked before it observes the members (here by a Service of
// the cluster's name the cluster no longer owns) still reports their health: a member that stops is
// reported, where the status used to keep saying every member was healthy.
func TestHealthReportedWhileBlocked(t *testing.T) {
	ctx := context.Background()
	c := createCluster(t, "blk", 3)
	names := []string{"blk-0", "blk-1", "blk-2"}
	hosts := []string{"127.0.0.211", "127.0.0.212", "127.0.0.213"}
	members := testenv.StartEtcd(t, names, hosts)
	runPods(t, c, map[string]string{names[0]: hosts[0], names[1]: hosts[1], names[2]: hosts[2]})
	testutil.Eventually(t, waitTimeout, "3 of 3 ready", func(context.Context) error {
		if got := getCluster(t, c); got.Status.ReadyReplicas != 3 {
			return fmt.Errorf("ready %d", got.Status.ReadyReplicas)
		}
		return nil
	})
	svc := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "blk-client"}, svc); err != nil {
		t.Fatal(err)
	}
	svc.OwnerReferences = nil
	if err := k8s.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "blocked by the Service", func(context.Context) error {
		if p := condition(getCluster(t, c), etcdv1beta1.ConditionProgressing); p == nil || !strings.Contains(p.Message, "Service blk-client exists and is not owned") {
			return fmt.Errorf("progressing %+v", p)
		}
		return nil
	})
	members[2].Stop()
	// a blocked cluster is looked at again within verdict.RequeueBlocked
	testutil.Eventually(t, verdict.RequeueBlocked+waitTimeout, "the stopped member reported while blocked", func(context.Context) error {
		got := getCluster(t, c)
		d := condition(got, etcdv1beta1.ConditionDegraded)
		if got.Status.ReadyReplicas != 2 || d == nil || d.Status != metav1.ConditionTrue || !strings.Contains(d.Message, "blk-2") {
			return fmt.Errorf("ready %d, degraded %+v", got.Status.ReadyReplicas, d)
		}
		if p := condition(got, etcdv1beta1.ConditionProgressing); p == nil || p.Reason != etcdv1beta1.ReasonForeignObject {
			return fmt.Errorf("progressing %+v, want still blocked by the Service", p)
		}
		return nil
	})
}

// TestBootstrapPodRebuiltWithoutItsClaim: the claim of an initial member deleted while its pod waited
// to be scheduled (which does not protect a claim) leaves a pod that can never start; before the
// cluster forms, the operator deletes that pod and makes a new claim and pod.
func TestBootstrapPodRebuiltWithoutItsClaim(t *testing.T) {
	c := createCluster(t, "noclaim", 1)
	ctx := context.Background()
	var pod *corev1.Pod
	claim := &corev1.PersistentVolumeClaim{}
	testutil.Eventually(t, waitTimeout, "pod and claim of noclaim-0", func(context.Context) error {
		var err error
		if pod, err = getPod(c, "noclaim-0"); err != nil {
			return err
		}
		return k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName("noclaim-0")}, claim)
	})
	if err := k8s.Delete(ctx, claim); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, waitTimeout, "the pod without its claim deleted", func(context.Context) error {
		if p, err := getPod(c, "noclaim-0"); err == nil && p.UID == pod.UID && p.DeletionTimestamp == nil {
			return errors.New("still there")
		}
		return nil
	})
	waitEvent(t, c, "UpdatingMember", "Deleted pod noclaim-0 (its claim is gone or being deleted, so it can never start)")
	finishClaimDeletion(t, c, claim.UID)
	testutil.Eventually(t, waitTimeout, "a new claim and pod", func(context.Context) error {
		p, err := getPod(c, "noclaim-0")
		if err != nil {
			return err
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName("noclaim-0")}, pvc); err != nil {
			return err
		}
		if p.UID == pod.UID || pvc.UID == claim.UID {
			return errors.New("the old pod or claim is still there")
		}
		return nil
	})
}
