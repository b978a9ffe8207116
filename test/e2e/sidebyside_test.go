//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/benchresult"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// donePredicate is when an operation counts as done, on both sides: what a client of the cluster
// relies on, read from etcd itself and not from any status.
const donePredicate = "the n members etcd lists are all voters, each answers on its pod's IP, all report one cluster ID and the same leader"

// The operations BenchmarkSideBySide measures: what each is called in the table, and its target.
var (
	opBootstrap   = benchOp{"bootstrap3", "apply → 3 healthy voters", "≤ 0.6 × floor"}
	opPodDeleted  = benchOp{"podDeleted", "the leader's pod deleted (claim kept) → 3 healthy voters", "≤ 0.8 × floor"}
	opPodAndClaim = benchOp{"podAndClaimDeleted", "member pod and claim deleted → 3 healthy voters", "≤ 8 s"}
	opScaleUp     = benchOp{"scale3to5", "scale 3 → 5", "≤ 8 s"}
	opScaleDown   = benchOp{"scale5to3", "scale 5 → 3 (membership; the pods' termination apart)", "≤ 0.5 s"}
	// opUpgrade's target is 3 × the operator's median of opPodDeleted (one member's restart) + 10 s.
	opUpgrade     = benchOp{"upgrade3", "rolling upgrade 3.5 → 3.6 of 3 members (until status shows every member on 3.6)", ""}
	sideBySideOps = []benchOp{opBootstrap, opPodDeleted, opPodAndClaim, opScaleUp, opScaleDown, opUpgrade}
)

// idleWindowBench is how long the operator's API writes are counted with its cluster idle.
const idleWindowBench = time.Minute

// measurePoll polls what measure waits for: every 20 ms, each attempt with a context of 10 s. poll's
// 200 ms between attempts would be a large part of "scale 5 → 3", whose target is 0.5 s; an attempt on
// kept clients (podClients), a pod list and one round of calls to every member at once, costs less than
// that.
var measurePoll = testutil.Poller{Interval: 20 * time.Millisecond, AttemptTimeout: poll.AttemptTimeout}

// benchOp names one operation of BenchmarkSideBySide.
type benchOp struct{ name, title, target string }

// of returns op's figures in res.
func (op benchOp) of(res *benchresult.Result) *benchresult.Operation {
	return res.Op(op.name, op.title, op.target)
}

// BenchmarkSideBySide measures, in one run, the floor (a static 3-pod StatefulSet of the same etcd
// image and storage, applied by hand) and this operator's clusters, E2E_BENCH_RUNS runs each (default
// 3), the two sides alternating, with one predicate for both (donePredicate), a continuous writer
// through each operation on a running cluster; then E2E_BENCH_CLUSTERS (default 100; 0: none)
// one-member clusters applied at once. It logs each figure, writes bin/bench/sidebyside.json
// (E2E_BENCH_OUT), and `make bench` renders the README's measured table from it (hack/benchtable). Run
// it with -benchtime 1x: one call takes every run.
func BenchmarkSideBySide(b *testing.B) {
	runs := 3
	if v, err := strconv.Atoi(os.Getenv("E2E_BENCH_RUNS")); err == nil && v > 0 {
		runs = v
	}
	image := etcdImage(b)
	res := &benchresult.Result{Runs: runs, EtcdImage: image, Predicate: donePredicate,
		Machine: fmt.Sprintf("%d cores, Kubernetes %s, the default StorageClass", runtime.NumCPU(), serverVersion(b))}
	for _, op := range sideBySideOps {
		op.of(res) // the table's order, whichever side goes first
	}
	for run := 1; run <= runs; run++ {
		sides := []func(){func() { benchFloor(b, res, image, run) }, func() { benchOperator(b, res, run) }}
		if run%2 == 0 {
			sides[0], sides[1] = sides[1], sides[0] // alternate which side goes first
		}
		for _, side := range sides {
			side()
		}
	}
	if s, ok := benchresult.Summarize(opPodDeleted.of(res).Operator); ok {
		opUpgrade.of(res).Target = fmt.Sprintf("≤ 3 × pod deleted + 10 s = %.1f s", 3*s.Median+10)
	}
	if rss, err := operatorMetric(context.Background(), "process_resident_memory_bytes"); err == nil {
		res.OperatorMiB = rss / (1 << 20)
	}
	clusters := 100
	if v, err := strconv.Atoi(os.Getenv("E2E_BENCH_CLUSTERS")); err == nil && v >= 0 {
		clusters = v
	}
	if clusters > 0 {
		res.ManyClusters = benchManyClusters(b, clusters, image)
	}
	res.Date = time.Now().UTC().Format(time.RFC3339)
	out := os.Getenv("E2E_BENCH_OUT")
	if out == "" {
		out = filepath.Join("..", "..", "bin", "bench", "sidebyside.json")
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := res.Write(out); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %s:\n%s", out, res.Table())
	for _, o := range res.Operations {
		if s, ok := benchresult.Summarize(o.Operator); ok {
			b.ReportMetric(s.Median, o.Name+"-s")
		}
	}
}

// BenchmarkManyClusters runs only the last part of BenchmarkSideBySide: the floor (as many bare etcd
// pods, benchManyPodsFloor), then E2E_BENCH_CLUSTERS (default 100) one-member clusters applied at once,
// until all are Available, and the operator's memory then.
// It writes nothing; `E2E_ARGS="-run ^$ -bench ManyClusters -benchtime 1x" bash hack/test-e2e.sh`.
func BenchmarkManyClusters(b *testing.B) {
	clusters := 100
	if v, err := strconv.Atoi(os.Getenv("E2E_BENCH_CLUSTERS")); err == nil && v > 0 {
		clusters = v
	}
	m := benchManyClusters(b, clusters, etcdImage(b))
	b.ReportMetric(m.FloorReadySeconds, "floor-ready-s")
	b.ReportMetric(m.AvailableSeconds, "available-s")
	b.ReportMetric(m.OperatorMiB, "rss-MiB")
}

// measure runs op, then polls done with measurePoll until it holds, and records as run's figure in
// figures the seconds from just before op to the end of the first attempt of done that succeeded; with
// a writer w running, also the longest gap, in seconds, between its acknowledged writes in that time in
// gaps. done's attempts share one etcd client per pod (podClients), closed when measure returns.
//
// The figure is an upper bound of when what done waits for came about: by the end of that attempt at
// the latest. The start of that attempt would be no bound at all, since done asks the members during
// the attempt and the change may come while it asks. The start of the attempt before, which failed, is a
// lower bound when it failed on what it saw, not on a call that timed out (once come about, the change
// stays); it is logged beside the figure as "not before", 0 when the first attempt succeeded. The two
// are an interval and two attempts apart.
func measure(b *testing.B, figures *[]float64, w *writer, gaps *[]float64, what string, op func(), done func(ctx context.Context, clients *podClients) error) {
	b.Helper()
	clients := &podClients{clients: map[string]podClient{}}
	defer clients.close()
	var failed, last time.Time // the start of the attempt before the latest, and of the latest
	start := time.Now()
	op()
	measurePoll.Eventually(b, scaleTimeout, what, func(ctx context.Context) error {
		failed, last = last, time.Now()
		return done(ctx, clients)
	})
	took := time.Since(start)
	var after time.Duration
	if !failed.IsZero() {
		after = failed.Sub(start)
	}
	*figures = append(*figures, took.Seconds())
	if w == nil {
		b.Logf("%s: %.2f s (not before %.2f s)", what, took.Seconds(), after.Seconds())
		return
	}
	gap := w.longestGapFrom(b, start, start.Add(took))
	*gaps = append(*gaps, gap.Seconds())
	b.Logf("%s: %.2f s (not before %.2f s); longest gap between acknowledged writes %.2f s", what, took.Seconds(), after.Seconds(), gap.Seconds())
}

// benchOperator takes this operator's operations on a cluster of its own, each measured until
// donePredicate holds under a continuous writer, then waits for the cluster to be Available again
// before the next one; in the first run it also counts the operator's API writes in a minute of idle.
// Then it upgrades another cluster from 3.5 to 3.6.
func benchOperator(b *testing.B, res *benchresult.Result, run int) {
	ctx := context.Background()
	var c *etcdv1beta1.EtcdCluster
	ns := fmt.Sprintf("bench-operator-%d-%d", run, benchRuns.Add(1))
	defer deleteNamespace(ns) // the next runs do not share the machine with this one's members
	measure(b, &opBootstrap.of(res).Operator, nil, nil, ns+": apply -> 3 voters",
		func() { c = newCluster(b, ns, "demo", 3) }, membersAnswer(ns, 3, "", ""))
	assertAvailable(b, c, availableTimeout)
	w := startWriter(b, clientServiceEndpoint(b, c))

	old := leaderPod(b, ns)
	o := opPodDeleted.of(res)
	measure(b, &o.Operator, w, &o.OperatorWriteGap, ns+": leader's pod deleted -> 3 voters",
		func() {
			if err := k8s.Delete(ctx, old); err != nil {
				b.Fatal(err)
			}
		}, membersAnswer(ns, 3, old.Name, old.UID))
	assertAvailable(b, c, recoverTimeout)

	old = memberPod(b, c, "demo-1")
	o = opPodAndClaim.of(res)
	measure(b, &o.Operator, w, &o.OperatorWriteGap, ns+": pod and claim deleted -> 3 voters",
		func() { deleteMemberWithData(b, c, "demo-1") }, membersAnswer(ns, 3, "demo-1", old.UID))
	assertAvailable(b, c, scaleTimeout)

	o = opScaleUp.of(res)
	measure(b, &o.Operator, w, &o.OperatorWriteGap, ns+": scale 3 -> 5",
		func() { scale(b, c, 5) }, membersAnswer(ns, 5, "", ""))
	assertAvailable(b, c, scaleTimeout)

	o = opScaleDown.of(res)
	measure(b, &o.Operator, w, &o.OperatorWriteGap, ns+": scale 5 -> 3",
		func() { scale(b, c, 3) }, membersAnswer(ns, 3, "", ""))
	assertAvailable(b, c, scaleTimeout)
	w.stopAndVerify(b, podEndpoint(memberPod(b, c, "demo-0")))
	if run == 1 {
		n := idleWrites(b, c)
		res.IdleAPIWritesPerMinute = &n
	}

	up := newCluster(b, fmt.Sprintf("bench-upgrade-%d-%d", run, benchRuns.Add(1)), "demo", 3, testutil.WithVersion(oldVersion))
	defer deleteNamespace(up.Namespace)
	assertAvailable(b, up, availableTimeout)
	took, uw := rollAndCheck(b, up, false, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Version = newVersion }, upgradedTo(newVersion))
	o = opUpgrade.of(res)
	o.Operator = append(o.Operator, took.Seconds())
	uw.mu.Lock()
	o.OperatorWriteGap = append(o.OperatorWriteGap, uw.longestGap.Seconds())
	uw.mu.Unlock()
}

// idleWrites returns how many API writes the operator sends in idleWindowBench (scaled to a minute)
// once cluster c has settled: nothing to do, and its status agreeing with what every member reports.
func idleWrites(b *testing.B, c *etcdv1beta1.EtcdCluster) float64 {
	b.Helper()
	ctx := context.Background()
	poll.Eventually(b, statusTimeout+time.Minute, "the cluster settled: nothing to do, status agrees with every member", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		if !meta.IsStatusConditionFalse(got.Status.Conditions, etcdv1beta1.ConditionProgressing) {
			return fmt.Errorf("conditions %v", got.Status.Conditions)
		}
		pods, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		return statusAgreesWithMembers(ctx, c, pods)
	})
	before, err := operatorSeries(ctx, "etcd_operator_api_writes_total")
	if err != nil {
		b.Fatalf("scrape operator metrics: %v", err)
	}
	start := time.Now()
	deadline := start.Add(idleWindowBench)
	poll.Eventually(b, idleWindowBench+10*time.Second, "the idle window over", func(context.Context) error {
		if left := time.Until(deadline); left > 0 {
			return fmt.Errorf("%s left", left.Round(time.Second))
		}
		return nil
	})
	after, err := operatorSeries(ctx, "etcd_operator_api_writes_total")
	if err != nil {
		b.Fatalf("scrape operator metrics: %v", err)
	}
	// the counter has the namespace of each object written: this cluster's writes are those of its
	// namespace; the others' (other clusters the operator serves meanwhile) are logged apart
	own := `namespace="` + c.Namespace + `"`
	var writes float64
	var which, others []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		d := after[k] - before[k]
		switch {
		case d <= 0:
		case strings.Contains(k, own):
			writes += d
			which = append(which, fmt.Sprintf("%.0f %s", d, k))
		default:
			others = append(others, fmt.Sprintf("%.0f %s", d, k))
		}
	}
	n := writes / time.Since(start).Minutes()
	b.Logf("%s: %.0f operator API writes for this cluster in %s of idle (%.1f per minute): %v; for other objects meanwhile: %v (other clusters: %s)",
		c.Namespace, writes, time.Since(start).Round(time.Second), n, which, others, otherClusters(ctx, c))
	return n
}

// benchFloor applies the floor, a static 3-member StatefulSet, and deletes one of its pods, each
// measured until donePredicate holds.
func benchFloor(b *testing.B, res *benchresult.Result, image string, run int) {
	ctx := context.Background()
	ns := fmt.Sprintf("bench-floor-%d-%d", run, benchRuns.Add(1))
	defer deleteNamespace(ns)
	measure(b, &opBootstrap.of(res).Floor, nil, nil, ns+": apply -> 3 voters",
		func() { applyFloor(b, ns, image) }, membersAnswer(ns, 3, "", ""))

	// a client of a static cluster is given its members' addresses: here their pod IPs, which the host
	// reaches (it does not resolve the cluster's DNS names)
	var eps []string
	for i := range 3 {
		eps = append(eps, podEndpoint(floorPod(b, ns, fmt.Sprintf("floor-%d", i))))
	}
	w := startWriter(b, eps[0], eps[1:]...)
	old := leaderPod(b, ns)
	o := opPodDeleted.of(res)
	measure(b, &o.Floor, w, &o.FloorWriteGap, ns+": leader's pod deleted -> 3 voters",
		func() {
			if err := k8s.Delete(ctx, old); err != nil {
				b.Fatal(err)
			}
		}, membersAnswer(ns, 3, old.Name, old.UID))
	// read back through a member that kept its address: the leader's pod came back with another
	for _, p := range []string{"floor-0", "floor-1", "floor-2"} {
		if p != old.Name {
			w.stopAndVerify(b, podEndpoint(floorPod(b, ns, p)))
			return
		}
	}
}

// floorPod returns the floor's pod of that name in namespace ns.
func floorPod(b *testing.B, ns, name string) *corev1.Pod {
	b.Helper()
	p := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		b.Fatal(err)
	}
	return p
}

// leaderPod returns the pod of the member that leads the etcd cluster of namespace ns: both sides
// delete the leader's pod, the member whose loss costs an election (or a handover) and the most time.
func leaderPod(b *testing.B, ns string) *corev1.Pod {
	b.Helper()
	pods, err := etcdPods(context.Background(), ns)
	if err != nil {
		b.Fatal(err)
	}
	leader := leaderOf(context.Background(), pods)
	if leader == "" {
		b.Fatalf("no member of namespace %s reports a leader", ns)
	}
	return pods[leader]
}

// deleteNamespace deletes namespace ns without waiting for it to go.
func deleteNamespace(ns string) {
	_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
}

// applyFloor creates namespace ns (deleted when the benchmark ends) and in it what an SRE would apply
// by hand for a static 3-member etcd run as this operator runs it by default: a headless Service that
// publishes not-ready addresses, a Secret with a CA and a certificate for every member's name (server
// and client use), and a StatefulSet whose pods start together (podManagementPolicy Parallel) with a
// fixed --initial-cluster, TLS with client certificates on both ports, a claim each of the operator's
// default size on the default StorageClass, and the operator's pod and container security settings.
// The tests' clients dial the floor's pods with that certificate (floorTLS).
func applyFloor(b *testing.B, ns, image string) {
	b.Helper()
	ctx := context.Background()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := k8s.Create(ctx, nsObj); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = k8s.Delete(context.Background(), nsObj) })
	labels := map[string]string{"app": "floor"}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "floor", Namespace: ns}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: labels,
		Ports: []corev1.ServicePort{{Name: "peer", Port: 2380}, {Name: "client", Port: 2379}}}}
	domain := "floor." + ns + ".svc.cluster.local"
	secret := floorCertificates(b, ns, domain)
	var initial []string
	for i := range 3 {
		initial = append(initial, fmt.Sprintf("floor-%d=https://floor-%d.%s:2380", i, i, domain))
	}
	const certs = "/etc/etcd/tls"
	// the kubelet expands $(POD_NAME) in the command: the etcd image has no shell
	cmd := []string{"/usr/local/bin/etcd", "--name=$(POD_NAME)",
		"--data-dir=" + resources.DataDir,
		"--listen-peer-urls=https://0.0.0.0:2380", "--listen-client-urls=https://0.0.0.0:2379",
		"--advertise-client-urls=https://$(POD_NAME)." + domain + ":2379",
		"--initial-advertise-peer-urls=https://$(POD_NAME)." + domain + ":2380",
		"--initial-cluster=" + strings.Join(initial, ","), "--initial-cluster-state=new", "--initial-cluster-token=floor",
		"--cert-file=" + certs + "/tls.crt", "--key-file=" + certs + "/tls.key", "--trusted-ca-file=" + certs + "/ca.crt", "--client-cert-auth",
		"--peer-cert-file=" + certs + "/tls.crt", "--peer-key-file=" + certs + "/tls.key", "--peer-trusted-ca-file=" + certs + "/ca.crt", "--peer-client-cert-auth"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "floor", Namespace: ns}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](3), ServiceName: "floor", PodManagementPolicy: appsv1.ParallelPodManagement,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			SecurityContext: resources.RestrictedPod(),
			Containers: []corev1.Container{{Name: "etcd", Image: image, ImagePullPolicy: corev1.PullIfNotPresent, Command: cmd,
				Env:             []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				SecurityContext: resources.RestrictedContainer(),
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: resources.DataMountPath},
					{Name: "tls", MountPath: certs, ReadOnly: true}}}},
			Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: secret.Name, DefaultMode: ptr.To[int32](0o440)}}}}}},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resources.DefaultStorageSize}}}}},
	}}
	for _, o := range []client.Object{svc, secret, sts} {
		if err := k8s.Create(ctx, o); err != nil {
			b.Fatalf("create the floor's %T: %v", o, err)
		}
	}
}

// floorTLS holds, by namespace, the client configuration the tests dial the floor's members with:
// the floor's certificate, and a check that the member's certificate is the floor CA's for its domain.
var floorTLS sync.Map

// floorCertificates returns the Secret of the floor's CA (ca.crt) and of one certificate and key
// (tls.crt, tls.key) for every member name of domain, for server and client use (a member is its peers'
// client), and records the tests' client configuration in floorTLS.
func floorCertificates(b *testing.B, ns, domain string) *corev1.Secret {
	b.Helper()
	now := time.Now()
	ca, err := pki.NewCA("floor-ca", 24*time.Hour, now)
	if err != nil {
		b.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.Request{CommonName: "floor", DNSNames: []string{"*." + domain, domain}, Server: true, Client: true}, now)
	if err != nil {
		b.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		b.Fatal(err)
	}
	roots, err := pki.Pool(ca.CertPEM)
	if err != nil {
		b.Fatal(err)
	}
	floorTLS.Store(ns, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair},
		InsecureSkipVerify: true, //nolint:gosec // verified by VerifyConnection: the tests dial pod IPs, which no certificate names
		VerifyConnection:   pki.VerifyServer(roots, "floor-0."+domain)})
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "floor-tls", Namespace: ns},
		Data: map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": certPEM, "tls.key": keyPEM}}
}

// memberPod returns cluster c's member pod of that name.
func memberPod(b *testing.B, c *etcdv1beta1.EtcdCluster, name string) *corev1.Pod {
	b.Helper()
	pods, err := memberPods(context.Background(), c)
	if err != nil || pods[name] == nil {
		b.Fatalf("member pod %s: %v", name, err)
	}
	return pods[name]
}

// membersAnswer returns donePredicate for the pods of namespace ns: etcd lists n members, all voters
// that have started; the pod of each answers on its IP (over TLS with the cluster's client certificate
// when it serves TLS); all report one cluster ID and the same leader. When replaced is set, that pod
// must not be the one with uid gone. Pods etcd does not list (a removed member's, the S3 server's) do
// not count. It asks etcd through clients, which the caller keeps across attempts, every pod at once:
// an attempt takes about as long as its slowest call (at most 1 s), not their sum. A failure names the
// first failing member in name order.
func membersAnswer(ns string, n int, replaced string, gone types.UID) func(ctx context.Context, clients *podClients) error {
	return func(ctx context.Context, clients *podClients) error {
		pods, err := etcdPods(ctx, ns)
		if err != nil {
			return err
		}
		if p := pods[replaced]; replaced != "" && (p == nil || p.UID == gone) {
			return fmt.Errorf("%s not replaced yet", replaced)
		}
		var asked []*corev1.Pod
		for _, name := range slices.Sorted(maps.Keys(pods)) {
			asked = append(asked, pods[name])
		}
		members, err := clients.memberList(ctx, asked)
		if err != nil {
			return err
		}
		if len(members) != n {
			return fmt.Errorf("etcd lists %d members, want %d", len(members), n)
		}
		slices.SortFunc(members, func(a, b *etcdserverpb.Member) int { return strings.Compare(a.Name, b.Name) })
		asked = asked[:0]
		for _, m := range members {
			if m.IsLearner || m.Name == "" {
				return fmt.Errorf("member %x is a learner or has not started", m.ID)
			}
			p := pods[m.Name]
			if p == nil {
				return fmt.Errorf("member %s has no running pod", m.Name)
			}
			asked = append(asked, p)
		}
		sts := make([]*clientv3.StatusResponse, len(asked))
		errs := clients.ask(ctx, asked, func(ctx context.Context, i int, c podClient) (err error) {
			sts[i], err = c.Status(ctx, c.ep)
			return err
		})
		var clusterID, leader uint64
		for i, m := range members {
			st := sts[i]
			if errs[i] != nil {
				return fmt.Errorf("%s: %w", m.Name, errs[i])
			}
			if clusterID != 0 && st.Header.ClusterId != clusterID {
				return fmt.Errorf("two cluster IDs: %x and %x", clusterID, st.Header.ClusterId)
			}
			if st.Leader == 0 || (leader != 0 && st.Leader != leader) {
				return fmt.Errorf("%s reports leader %x (others %x)", m.Name, st.Leader, leader)
			}
			clusterID, leader = st.Header.ClusterId, st.Leader
		}
		return nil
	}
}

// etcdPods returns, by name, the etcd member pods of namespace ns (the floor's or a cluster's; not the
// S3 server's) that have an address and are not being deleted.
func etcdPods(ctx context.Context, ns string) (map[string]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	pods := map[string]*corev1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil && (p.Labels["app"] == "floor" || p.Labels[etcdv1beta1.LabelCluster] != "") {
			pods[p.Name] = p
		}
	}
	return pods, nil
}

// podClients keeps one etcd client per pod, and its endpoint, for the attempts of one measurement: a
// predicate polled every few tens of milliseconds then pays no TLS handshake per call. The key is the
// pod's UID and IP, which fix its endpoint (a pod's etcd command, hence its scheme, does not change):
// podEndpoint, which reads a cluster's client certificate from the API server on every call, runs only
// to dial. A pod replaced under the same name, or given another IP, gets a client of its own. Safe for
// concurrent use as ask uses it, one call per pod at a time; close closes every client.
type podClients struct {
	mu      sync.Mutex
	clients map[string]podClient // guarded by mu
}

// podClient is a client of the etcd of one pod alone, on its IP, and that endpoint.
type podClient struct {
	*clientv3.Client
	ep string
}

// call calls f with the client of the etcd of pod p and a context of at most 1 s. When f fails, unless
// ctx ended first (the caller gave up on the call, not the pod), the client is closed and dropped: the
// next call dials afresh instead of waiting out gRPC's reconnect backoff (a second and more) towards a
// member that has started since. Calls for different pods may run at once.
func (cs *podClients) call(ctx context.Context, p *corev1.Pod, f func(ctx context.Context, c podClient) error) error {
	key := string(p.UID) + " " + p.Status.PodIP
	cs.mu.Lock()
	c, ok := cs.clients[key]
	cs.mu.Unlock()
	if !ok {
		ep := podEndpoint(p)
		cli, err := clientv3.New(withRoot(clientv3.Config{Endpoints: []string{ep}, DialTimeout: time.Second, Logger: zap.NewNop(), TLS: tlsFor(ep)}))
		if err != nil {
			return err
		}
		c = podClient{cli, ep}
		cs.mu.Lock()
		cs.clients[key] = c
		cs.mu.Unlock()
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := f(cctx, c); err != nil {
		if ctx.Err() == nil {
			_ = c.Close()
			cs.mu.Lock()
			delete(cs.clients, key)
			cs.mu.Unlock()
		}
		return err
	}
	return nil
}

// close closes every client cs keeps.
func (cs *podClients) close() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, c := range cs.clients {
		_ = c.Close()
	}
}

// ask calls f, through call, for every pod of pods at once, with i its index in pods, and returns once
// every call has: their errors, in pods' order. Each call takes at most 1 s.
func (cs *podClients) ask(ctx context.Context, pods []*corev1.Pod, f func(ctx context.Context, i int, c podClient) error) []error {
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			errs[i] = cs.call(ctx, p, func(ctx context.Context, c podClient) error { return f(ctx, i, c) })
		})
	}
	wg.Wait()
	return errs
}

// memberList asks the etcd of every pod of pods at once for the member list and returns the first
// that answers, the other calls then cancelled; when none answers, an error with each pod's, in
// pods' order. It takes as long as the first answer, or when none answers the slowest failure: at most
// 1 s.
func (cs *podClients) memberList(ctx context.Context, pods []*corev1.Pod) ([]*etcdserverpb.Member, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	var members []*etcdserverpb.Member
	errs := cs.ask(ctx, pods, func(ctx context.Context, _ int, c podClient) error {
		ml, err := c.MemberList(ctx)
		if err == nil {
			once.Do(func() { members = ml.Members; cancel() })
		}
		return err
	})
	if members != nil {
		return members, nil
	}
	var msgs []string
	for i, err := range errs {
		msgs = append(msgs, fmt.Sprintf("%s: %v", pods[i].Name, err))
	}
	return nil, fmt.Errorf("no member lists the members: %s", strings.Join(msgs, "; "))
}

// etcdImage is the image the operator gives its members (its --etcd-image-repository and the default
// version): the floor runs the same.
func etcdImage(b *testing.B) string {
	b.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator"}, d); err != nil {
		b.Fatal(err)
	}
	var o resources.Options
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--etcd-image-repository="); ok {
			o.ImageRepository = v
		}
	}
	return o.Image(testutil.EtcdCluster("x"))
}

// serverVersion is the Kubernetes version of the cluster.
func serverVersion(b *testing.B) string {
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		b.Fatal(err)
	}
	return v.GitVersion
}

// benchManyPodsFloor is the floor of benchManyClusters: n bare pods, each a one-member etcd of image
// on emptyDir in plain HTTP, with the member pods' security settings, CPU and memory requests and
// readiness probe, created at once as many at a time as benchManyClusters creates clusters, in a
// namespace of their own (deleted after). It returns the seconds from the first create until every pod
// is Ready: what the node takes to start that many etcd containers, whoever creates them.
func benchManyPodsFloor(b *testing.B, n int, image string) float64 {
	b.Helper()
	nsObj := createBenchNamespace(b, "bench-many-floor")
	defer awaitNamespaceGone(b, nsObj)
	ns := nsObj.Name
	version := strings.TrimPrefix(image[strings.LastIndex(image, ":")+1:], "v")
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "floor"}}, Spec: corev1.PodSpec{
			SecurityContext: resources.RestrictedPod(),
			Containers: []corev1.Container{{Name: "etcd", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/usr/local/bin/etcd", "--name=" + name, "--data-dir=" + resources.DataDir,
					"--listen-peer-urls=http://0.0.0.0:2380", "--listen-client-urls=http://0.0.0.0:2379",
					"--listen-metrics-urls=http://0.0.0.0:2381", "--advertise-client-urls=http://127.0.0.1:2379"},
				Resources:       *manyRequests.DeepCopy(),
				ReadinessProbe:  resources.ReadinessProbe(version),
				SecurityContext: resources.RestrictedContainer(),
				VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: resources.DataMountPath}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		}}
	}
	start := time.Now()
	createAll(b, n, func(i int) client.Object { return pod(fmt.Sprintf("floor-%03d", i)) })
	poll.Eventually(b, 10*time.Minute, fmt.Sprintf("%d bare etcd pods Ready", n), func(ctx context.Context) error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return err
		}
		readyPods := 0
		for i := range pods.Items {
			if ready(&pods.Items[i]) {
				readyPods++
			}
		}
		if readyPods < n {
			return fmt.Errorf("%d of %d Ready", readyPods, n)
		}
		return nil
	})
	took := time.Since(start).Seconds()
	b.Logf("%s: the floor: %d bare etcd pods created at once, all Ready in %.1f s", ns, n, took)
	return took
}

// manyRequests are the CPU and memory requests of each member in benchManyClusters and of each pod of
// its floor: small enough for 100 to fit on the node.
var manyRequests = corev1.ResourceRequirements{Requests: corev1.ResourceList{
	corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("32Mi")}}

// createBenchNamespace creates a namespace named prefix-N (N counts the benchmark's namespaces).
func createBenchNamespace(b *testing.B, prefix string) *corev1.Namespace {
	b.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, benchRuns.Add(1))}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		b.Fatal(err)
	}
	return ns
}

// createAll creates object(0) … object(n-1) at once, 16 requests in flight (as many as a `kubectl
// apply` of one file sends, give or take), and fails b if any create fails.
func createAll(b *testing.B, n int, object func(i int) client.Object) {
	b.Helper()
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- k8s.Create(context.Background(), object(i))
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			b.Fatalf("create: %v", err)
		}
	}
}

// awaitNamespaceGone deletes ns and waits until it is gone, so that what follows has the node to itself.
func awaitNamespaceGone(b *testing.B, ns *corev1.Namespace) {
	_ = k8s.Delete(context.Background(), ns)
	poll.Eventually(b, 5*time.Minute, "namespace "+ns.Name+" gone", func(ctx context.Context) error {
		return goneErr(k8s.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}))
	})
}

// benchManyClusters first measures its floor (benchManyPodsFloor, n bare pods of image), then applies
// n one-member clusters (emptyDir, manyRequests so that they fit on the node) at once in one
// namespace, waits until every one is Available, and returns how long each took and the operator's
// resident memory and Go heap then; each namespace is deleted and waited for afterwards, so that what
// runs next does not share the node with them.
func benchManyClusters(b *testing.B, n int, image string) *benchresult.ManyClusters {
	b.Helper()
	floor := benchManyPodsFloor(b, n, image)
	ctx := context.Background()
	nsObj := createBenchNamespace(b, "bench-many")
	defer awaitNamespaceGone(b, nsObj)
	ns := nsObj.Name
	before, err := scrapeOperatorLoad(ctx)
	if err != nil {
		b.Fatalf("scrape operator metrics: %v", err)
	}
	start := time.Now()
	createAll(b, n, func(i int) client.Object {
		c := testutil.EtcdCluster(fmt.Sprintf("m-%03d", i), testutil.InNamespace(ns), testutil.WithReplicas(1), testutil.WithEmptyDir())
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Resources: manyRequests.DeepCopy()} // a copy each: Create decodes the answer into it
		return c
	})
	b.Logf("%s: %d one-member clusters applied in %.1f s", ns, n, time.Since(start).Seconds())
	var created, running time.Duration // the operator's share, then the kubelet's
	poll.Eventually(b, 10*time.Minute, fmt.Sprintf("%d clusters Available", n), func(ctx context.Context) error {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(ns), client.HasLabels{etcdv1beta1.LabelMember}); err != nil {
			return err
		}
		run := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				run++
			}
		}
		if created == 0 && len(pods.Items) >= n {
			created = time.Since(start)
		}
		if running == 0 && run >= n {
			running = time.Since(start)
		}
		list := &etcdv1beta1.EtcdClusterList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		available := 0
		for _, c := range list.Items {
			if meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1beta1.ConditionAvailable) {
				available++
			}
		}
		if available < n {
			return fmt.Errorf("%d of %d Available", available, n)
		}
		return nil
	})
	took := time.Since(start)
	// every cluster Available means every pod ran: a poll that listed the pods just before the last
	// ones ran saw them all Available right after
	if created == 0 {
		created = took
	}
	if running == 0 {
		running = took
	}
	after, err := scrapeOperatorLoad(ctx)
	if err != nil {
		b.Fatalf("scrape operator metrics: %v", err)
	}
	load := after.since(before)
	rss, err := operatorMetric(ctx, "process_resident_memory_bytes")
	if err != nil {
		b.Fatalf("scrape operator metrics: %v", err)
	}
	heap, err := operatorMetric(ctx, "go_memstats_heap_inuse_bytes")
	if err != nil {
		b.Fatalf("scrape operator metrics: %v", err)
	}
	m := &benchresult.ManyClusters{Clusters: n, AvailableSeconds: took.Seconds(), FloorReadySeconds: floor, PodsCreatedSeconds: created.Seconds(),
		PodsRunningSeconds: running.Seconds(), OperatorMiB: rss / (1 << 20), OperatorHeapMiB: heap / (1 << 20),
		Passes: load.passes, PassSeconds: load.passTime(), QueueWaitSeconds: load.queueWait(), OperatorCPUSeconds: load.cpu, APIWrites: load.writes,
		Target: "100 in ≤ 30 s, ≤ 64 MiB"}
	b.Logf("%s: %d clusters Available in %.1f s (pods created by %.1f s, running by %.1f s); operator RSS %.1f MiB, Go heap in use %.1f MiB",
		ns, n, m.AvailableSeconds, m.PodsCreatedSeconds, m.PodsRunningSeconds, m.OperatorMiB, m.OperatorHeapMiB)
	b.Logf("%s: meanwhile the operator made %.0f passes (%.1f per cluster), each waited %.2f s in its work queue and took %.2f s on average; it used %.1f s of CPU and made %.0f API writes (%.1f per cluster)",
		ns, m.Passes, m.Passes/float64(n), m.QueueWaitSeconds, m.PassSeconds, m.OperatorCPUSeconds, m.APIWrites, m.APIWrites/float64(n))
	return m
}

// operatorLoad is what the leading operator's counters say of the work it has done: EtcdCluster
// passes, the seconds they waited in the work queue in all and how many waits that is, its CPU seconds
// and its API requests other than GET.
type operatorLoad struct{ passes, passSum, waitSum, waits, cpu, writes float64 }

// scrapeOperatorLoad reads operatorLoad from the leading operator's metrics.
func scrapeOperatorLoad(ctx context.Context) (operatorLoad, error) {
	var l operatorLoad
	for _, m := range []struct {
		to     *float64
		name   string
		labels []string
	}{
		{&l.passes, "controller_runtime_reconcile_total", []string{`controller="etcdcluster"`}},
		{&l.passSum, "controller_runtime_reconcile_time_seconds_sum", []string{`controller="etcdcluster"`}},
		{&l.waitSum, "workqueue_queue_duration_seconds_sum", []string{`name="etcdcluster"`}},
		{&l.waits, "workqueue_queue_duration_seconds_count", []string{`name="etcdcluster"`}},
		{&l.cpu, "process_cpu_seconds_total", nil},
	} {
		v, err := operatorMetric(ctx, m.name, m.labels...)
		if err != nil {
			return l, err
		}
		*m.to = v
	}
	requests, err := operatorSeries(ctx, "rest_client_requests_total")
	if err != nil {
		return l, err
	}
	for labels, v := range requests {
		if !strings.Contains(labels, `method="GET"`) {
			l.writes += v
		}
	}
	return l, nil
}

// since returns the load between an earlier reading and l.
func (l operatorLoad) since(earlier operatorLoad) operatorLoad {
	return operatorLoad{passes: l.passes - earlier.passes, passSum: l.passSum - earlier.passSum, waitSum: l.waitSum - earlier.waitSum, waits: l.waits - earlier.waits,
		cpu: l.cpu - earlier.cpu, writes: l.writes - earlier.writes}
}

// passTime is the mean duration of a pass, in seconds (0 without passes).
func (l operatorLoad) passTime() float64 {
	if l.passes == 0 {
		return 0
	}
	return l.passSum / l.passes
}

// queueWait is the mean wait in the work queue, in seconds (0 without waits).
func (l operatorLoad) queueWait() float64 {
	if l.waits == 0 {
		return 0
	}
	return l.waitSum / l.waits
}

// otherClusters names the EtcdClusters other than c ("namespace/name"), or says there are none.
func otherClusters(ctx context.Context, c *etcdv1beta1.EtcdCluster) string {
	list := &etcdv1beta1.EtcdClusterList{}
	if err := k8s.List(ctx, list); err != nil {
		return "the other clusters (not listed: " + err.Error() + ")"
	}
	var names []string
	for _, o := range list.Items {
		if o.Namespace != c.Namespace || o.Name != c.Name {
			names = append(names, o.Namespace+"/"+o.Name)
		}
	}
	if len(names) == 0 {
		return "no other cluster"
	}
	return strings.Join(names, ", ")
}
