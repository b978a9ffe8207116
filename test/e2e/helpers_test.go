//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/pki"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// newCluster creates namespace ns and an EtcdCluster name in it, and deletes the namespace when the
// test ends.
func newCluster(t testing.TB, ns, name string, replicas int32, opts ...testutil.ClusterOption) *etcdv1beta1.EtcdCluster {
	t.Helper()
	newNamespace(t, ns)
	c := testutil.EtcdCluster(name, append([]testutil.ClusterOption{testutil.InNamespace(ns), testutil.WithReplicas(replicas)}, opts...)...)
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatalf("create EtcdCluster %s/%s: %v", ns, name, err)
	}
	return c
}

// newNamespace creates namespace ns and deletes it when the test ends; after a failed test it is kept
// to be looked at, and the operator's log lines and the events about it are logged.
func newNamespace(t testing.TB, ns string) {
	t.Helper()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := k8s.Create(context.Background(), nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logOperatorAbout(t, ns)
			return
		}
		_ = k8s.Delete(context.Background(), nsObj)
	})
}

// logOperatorAbout logs, for a failed test, the last operator log lines and events of namespace ns:
// what the operator did and said about the test's cluster (the namespace is kept as well).
func logOperatorAbout(t testing.TB, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(operatorNamespace), operatorSelector); err != nil {
		t.Logf("operator pods: %v", err)
	}
	for _, p := range pods.Items {
		raw, err := kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Logf("log of %s: %v", p.Name, err)
			continue
		}
		var lines []string
		for l := range strings.Lines(string(raw)) {
			if strings.Contains(l, `"`+ns+`"`) || strings.Contains(l, ns+"/") {
				lines = append(lines, strings.TrimRight(l, "\n"))
			}
		}
		t.Logf("operator pod %s, its last %d lines about namespace %s:\n%s", p.Name, min(len(lines), 40), ns, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	events := &corev1.EventList{}
	if err := k8s.List(ctx, events, client.InNamespace(ns)); err != nil {
		t.Logf("events of %s: %v", ns, err)
		return
	}
	var out []string
	for _, e := range events.Items {
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time // events.k8s.io/v1 events, the operator's
		}
		out = append(out, fmt.Sprintf("%s %s %s/%s %s: %s", at.UTC().Format(time.TimeOnly), e.Type,
			e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message))
	}
	t.Logf("events of namespace %s:\n%s", ns, strings.Join(out, "\n"))
}

func getCluster(ctx context.Context, c *etcdv1beta1.EtcdCluster) (*etcdv1beta1.EtcdCluster, error) {
	got := &etcdv1beta1.EtcdCluster{}
	return got, k8s.Get(ctx, client.ObjectKeyFromObject(c), got)
}

// assertAvailable waits until the cluster is Available with all members healthy voters, and returns
// the time it took and the cluster as last read.
func assertAvailable(t testing.TB, c *etcdv1beta1.EtcdCluster, timeout time.Duration) (time.Duration, *etcdv1beta1.EtcdCluster) {
	t.Helper()
	want := c.Spec.ReplicasOrDefault()
	var last *etcdv1beta1.EtcdCluster
	took := poll.Eventually(t, timeout, "cluster "+c.Name+" Available", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		last = got
		if !meta.IsStatusConditionTrue(got.Status.Conditions, etcdv1beta1.ConditionAvailable) {
			return fmt.Errorf("not Available: phase %s, conditions %v", got.Status.Phase, got.Status.Conditions)
		}
		if got.Status.ReadyReplicas != want || got.Status.Phase != etcdv1beta1.PhaseRunning {
			return fmt.Errorf("phase %s, %d/%d ready", got.Status.Phase, got.Status.ReadyReplicas, want)
		}
		return nil
	})
	return took, last
}

// awaitClusterGone waits until cluster c is deleted (its finalizer handled by the operator).
func awaitClusterGone(t testing.TB, c *etcdv1beta1.EtcdCluster) {
	t.Helper()
	poll.Eventually(t, deleteTimeout, "the cluster deleted", func(ctx context.Context) error {
		_, err := getCluster(ctx, c)
		return goneErr(err)
	})
}

// goneErr is a poll's answer to reading something that should be gone: nil once the read found
// nothing, the read's error, or "still there".
func goneErr(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return errors.New("still there")
}

// memberPods returns the cluster's member pods by name.
func memberPods(ctx context.Context, c *etcdv1beta1.EtcdCluster) (map[string]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := k8s.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1beta1.LabelCluster: c.Name, "app.kubernetes.io/name": "etcd"}); err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// memberClients returns c's member pods and an etcd client of each member's own endpoint, by
// member name; the clients are closed when the test ends.
func memberClients(ctx context.Context, t testing.TB, c *etcdv1beta1.EtcdCluster) (map[string]*corev1.Pod, map[string]*clientv3.Client) {
	t.Helper()
	pods, err := memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]*clientv3.Client{}
	for name, p := range pods {
		clients[name] = etcdClient(t, podEndpoint(p))
	}
	return pods, clients
}

// podEndpoint is the client URL of a member pod's IP: https:// when the member serves TLS there, and
// then the endpoint dials with its cluster's client certificate (see tlsFor).
func podEndpoint(p *corev1.Pod) string {
	if cfg, ok := floorTLS.Load(p.Namespace); ok && p.Labels["app"] == "floor" { // the bench's floor (applyFloor)
		ep := "https://" + p.Status.PodIP + ":2379"
		endpointTLS.Store(ep, cfg)
		return ep
	}
	if !resources.ServesClientTLS(p) {
		ep := "http://" + p.Status.PodIP + ":2379"
		registerRoot(ep, p.Namespace, p.Labels[etcdv1beta1.LabelCluster])
		return ep
	}
	ep := "https://" + p.Status.PodIP + ":2379"
	register(ep, p.Namespace, p.Labels[etcdv1beta1.LabelCluster])
	registerRoot(ep, p.Namespace, p.Labels[etcdv1beta1.LabelCluster])
	return ep
}

// rootPasswords holds the root password of each cluster with etcd authentication the tests use, by
// "namespace/name" (useRootPassword); endpointPasswords that of each endpoint of such a cluster.
var rootPasswords, endpointPasswords sync.Map

// registerRoot makes the tests' clients of endpoint authenticate as root when cluster namespace/name
// has a root password in rootPasswords.
func registerRoot(endpoint, namespace, name string) {
	if pw, ok := rootPasswords.Load(namespace + "/" + name); ok {
		endpointPasswords.Store(endpoint, pw)
	}
}

// withRoot sets cfg's credentials to root's when its first endpoint is registered with registerRoot.
func withRoot(cfg clientv3.Config) clientv3.Config {
	if pw, ok := endpointPasswords.Load(cfg.Endpoints[0]); ok {
		cfg.Username, cfg.Password = "root", pw.(string)
	}
	return cfg
}

// endpointTLS holds the client configuration of each https:// endpoint the tests dial.
var endpointTLS sync.Map

// register makes tlsFor(endpoint) the client configuration of cluster namespace/name.
func register(endpoint, namespace, name string) {
	cfg, err := clusterClientTLS(context.Background(), namespace, name)
	if err != nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12, VerifyConnection: func(tls.ConnectionState) error {
			return fmt.Errorf("no client certificate of %s/%s: %w", namespace, name, err)
		}}
	}
	endpointTLS.Store(endpoint, cfg)
}

// tlsFor returns the client configuration of an endpoint podEndpoint or clientServiceEndpoint returned,
// nil for a plain-text one.
func tlsFor(endpoint string) *tls.Config {
	if cfg, ok := endpointTLS.Load(endpoint); ok {
		return cfg.(*tls.Config)
	}
	return nil
}

// clusterClientTLS is what a user of cluster namespace/name dials it with: the client certificate the
// operator issued (Secret "<cluster>-client-tls", or the user's of spec.tls.secrets.client), and a
// check that the member's certificate is the cluster CA's for the client Service's name. The tests dial
// pod and Service IPs, which no certificate names, so the name is checked by VerifyConnection.
func clusterClientTLS(ctx context.Context, namespace, name string) (*tls.Config, error) {
	secret := name + resources.ClientTLSSecretSuffix
	c := &etcdv1beta1.EtcdCluster{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, c); err == nil {
		secret = resources.ClientTLSSecretName(c) // spec.tls.secrets.client when the user keeps the certificates
	}
	s := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secret}, s); err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(s.Data[resources.TLSCertKey], s.Data[resources.TLSKeyKey])
	if err != nil {
		return nil, err
	}
	roots, err := pki.Pool(s.Data[resources.CAKey])
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair},
		InsecureSkipVerify: true, //nolint:gosec // verified by VerifyConnection
		VerifyConnection:   pki.VerifyServer(roots, name+"-client."+namespace+".svc"),
	}, nil
}

// etcdClient returns a clientv3 client for the given endpoints, closed when the test ends.
func etcdClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(withRoot(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: tlsFor(endpoints[0])}))
	if err != nil {
		t.Fatalf("etcd client for %v: %v", endpoints, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// clientServiceEndpoint returns the client Service's ClusterIP URL once a read through it succeeds.
// kube-proxy programs a new Service, and a new ready endpoint, some time after the API server has it
// (seconds on a loaded machine); a client that dials too early gets refused and then backs off its
// reconnects for longer than the test lasts. So each attempt uses a new client.
func clientServiceEndpoint(t testing.TB, c *etcdv1beta1.EtcdCluster) string {
	t.Helper()
	svc := &corev1.Service{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-client"}, svc); err != nil {
		t.Fatalf("client service: %v", err)
	}
	ep := "http://" + svc.Spec.ClusterIP + ":2379"
	if c.Spec.ClientTLS() {
		ep = "https://" + svc.Spec.ClusterIP + ":2379"
		register(ep, c.Namespace, c.Name)
	}
	registerRoot(ep, c.Namespace, c.Name)
	took := poll.Eventually(t, serviceTimeout, "a read through the client Service "+ep, func(ctx context.Context) error {
		cli, err := clientv3.New(withRoot(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), TLS: tlsFor(ep)}))
		if err != nil {
			return err
		}
		defer func() { _ = cli.Close() }()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err = cli.Get(rctx, "probe")
		return err
	})
	if took > time.Second {
		t.Logf("the client Service %s served its first read %s after it was asked", ep, took.Round(100*time.Millisecond))
	}
	return ep
}

// serviceTimeout bounds how long a new client Service may take to carry its first read.
const serviceTimeout = 60 * time.Second

// memberView is what one member says about the cluster.
type memberView struct {
	clusterID uint64
	members   []etcd.Member
}

// viewFrom asks one member, through its own endpoint only, for the member list.
func viewFrom(ctx context.Context, endpoint string) (memberView, error) {
	cfg := withRoot(clientv3.Config{Endpoints: []string{endpoint}})
	cli, err := etcd.New(ctx, etcd.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, TLS: tlsFor(endpoint), Username: cfg.Username, Password: cfg.Password})
	if err != nil {
		return memberView{}, err
	}
	defer func() { _ = cli.Close() }()
	id, members, err := cli.MemberList(ctx)
	return memberView{id, members}, err
}

// restarts returns the etcd container restart count of each member pod.
func restarts(pods map[string]*corev1.Pod) map[string]int32 {
	out := map[string]int32{}
	for name, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "etcd" {
				out[name] = cs.RestartCount
			}
		}
	}
	return out
}

// operatorMetric sums the samples of a Prometheus counter, scraped from the operator pod that leads
// (the one that reconciles; the others count nothing), whose labels include every one of labels
// (e.g. `controller="etcdcluster"`).
func operatorMetric(ctx context.Context, name string, labels ...string) (float64, error) {
	series, err := operatorSeries(ctx, name, labels...)
	var sum float64
	for _, v := range series {
		sum += v
	}
	return sum, err
}

// operatorSeries returns the samples of a Prometheus metric as operatorMetric scrapes them, by their
// labels as exposed (`{kind="Pod",verb="patch"}`).
func operatorSeries(ctx context.Context, name string, labels ...string) (map[string]float64, error) {
	leader, err := operatorLeader(ctx, operatorNamespace)
	if err != nil {
		return nil, err
	}
	p := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: leader}, p); err != nil {
		return nil, fmt.Errorf("the leading operator pod: %w", err)
	}
	ip := p.Status.PodIP
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || ip == "" {
		return nil, fmt.Errorf("the leading operator pod %s is not running", leader)
	}
	resp, err := scrapeOperator(ctx, ip)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	series := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(line, l)
		}
		if !match {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return nil, fmt.Errorf("parse %q: %w", line, err)
		}
		series[strings.TrimPrefix(strings.Join(f[:len(f)-1], " "), name)] = v
	}
	return series, sc.Err()
}

// etcdPIDs returns the host PIDs of the etcd processes of the cluster with the given UID, found by
// the --initial-cluster-token the operator gives every member, and having every one of args.
func etcdPIDs(uid string, args ...string) ([]int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		cmd := strings.Split(string(b), "\x00")
		match := len(cmd) > 0 && strings.HasSuffix(cmd[0], "/etcd") && containsArg(cmd, "--initial-cluster-token="+uid)
		for _, a := range args {
			match = match && containsArg(cmd, a)
		}
		if match {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

// reloadingClientTLS is what a client that mounts the users' client Secret of cluster namespace/name
// and reads its files on every handshake dials with: it trusts the CA certificates and presents the
// certificate the Secret holds at that moment.
func reloadingClientTLS(namespace, name string) *tls.Config {
	load := func() (*tls.Config, error) { return clusterClientTLS(context.Background(), namespace, name) }
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, //nolint:gosec // verified by VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			cfg, err := load()
			if err != nil {
				return err
			}
			return cfg.VerifyConnection(cs)
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cfg, err := load()
			if err != nil {
				return nil, err
			}
			return &cfg.Certificates[0], nil
		},
	}
}

// statusSamples is what sampleStatus saw: each moment a quorum was not available (fewer than 2 ready
// or Available not True), and each change of what step said, with the time since sampling began.
type statusSamples struct{ unavailable, steps []string }

// sampleStatus reads cluster c every 500 ms until the returned function is called, which returns what
// it saw; step names what the cluster is doing in a status ("" to record nothing).
func sampleStatus(c *etcdv1beta1.EtcdCluster, step func(*etcdv1beta1.EtcdCluster) string) func() statusSamples {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan statusSamples, 1)
	start := time.Now()
	go func() {
		var s statusSamples
		last := ""
		for ctx.Err() == nil {
			if got, err := getCluster(ctx, c); err == nil {
				if got.Status.ReadyReplicas < 2 || !meta.IsStatusConditionTrue(got.Status.Conditions, etcdv1beta1.ConditionAvailable) {
					s.unavailable = append(s.unavailable, fmt.Sprintf("%s: %d/3 ready, phase %s", time.Now().Format(time.TimeOnly), got.Status.ReadyReplicas, got.Status.Phase))
				}
				if now := step(got); now != "" && now != last {
					s.steps, last = append(s.steps, fmt.Sprintf("%s at %s", now, time.Since(start).Round(time.Second))), now
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
		done <- s
	}()
	return func() statusSamples {
		cancel()
		return <-done
	}
}

// availableWatch records, through a watch of cluster c (so that no status write is missed, however
// soon the next one replaced it), every status whose Available condition was not True.
type availableWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu          sync.Mutex
	seen        int // statuses seen, the first included
	unavailable []string
	// stalled are the statuses whose Progressing condition was False for another reason than
	// Reconciled: the operator said it had nothing to do while something was not done
	stalled []string
	// degraded are the statuses of phase Degraded: a rolling update reads as Upgrading until its last
	// member serves
	degraded []string
	// down are the statuses whose Degraded condition calls a member down: one that a rolling update
	// restarts is "restarting onto the current spec"
	down []string
	err  error
}

// watchAvailable starts recording the Available condition of cluster c, which must be Available now.
func watchAvailable(t testing.TB, c *etcdv1beta1.EtcdCluster) *availableWatch {
	t.Helper()
	wc, err := client.NewWithWatch(config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &etcdv1beta1.EtcdClusterList{}, client.InNamespace(c.Namespace), client.MatchingFields{"metadata.name": c.Name})
	if err != nil {
		cancel()
		t.Fatalf("watch cluster %s: %v", c.Name, err)
	}
	aw := &availableWatch{cancel: cancel, done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(aw.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					aw.mu.Lock()
					aw.err = errors.New("the watch ended early")
					aw.mu.Unlock()
					return
				}
				got, ok := ev.Object.(*etcdv1beta1.EtcdCluster)
				if !ok {
					continue
				}
				aw.mu.Lock()
				aw.seen++
				if cond := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionAvailable); cond == nil || cond.Status != metav1.ConditionTrue {
					aw.unavailable = append(aw.unavailable, fmt.Sprintf("at %s: %+v", time.Since(start).Round(10*time.Millisecond), cond))
				}
				if got.Status.Phase == etcdv1beta1.PhaseDegraded {
					aw.degraded = append(aw.degraded, fmt.Sprintf("at %s: %s", time.Since(start).Round(10*time.Millisecond), degradedMessage(got)))
				}
				if msg := degradedMessage(got); strings.Contains(msg, " is down since ") {
					aw.down = append(aw.down, fmt.Sprintf("at %s: %s", time.Since(start).Round(10*time.Millisecond), msg))
				}
				if cond := meta.FindStatusCondition(got.Status.Conditions, etcdv1beta1.ConditionProgressing); cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason != etcdv1beta1.ReasonReconciled {
					aw.stalled = append(aw.stalled, fmt.Sprintf("at %s: %s: %s", time.Since(start).Round(10*time.Millisecond), cond.Reason, cond.Message))
				}
				aw.mu.Unlock()
			}
		}
	}()
	return aw
}

// assertNeverUnavailable stops the watch and fails the test if cluster c was ever reported not
// Available, or if the watch saw no status change at all (it would have proven nothing).
func (aw *availableWatch) assertNeverUnavailable(t testing.TB, what string) {
	t.Helper()
	aw.cancel()
	<-aw.done
	aw.mu.Lock()
	defer aw.mu.Unlock()
	if aw.err != nil {
		t.Errorf("%s: %v", what, aw.err)
	}
	if aw.seen < 2 {
		t.Errorf("%s: the watch saw %d status, no change: it proves nothing", what, aw.seen)
	}
	for _, u := range aw.unavailable {
		t.Errorf("%s: the cluster was reported not Available %s", what, u)
	}
	t.Logf("%s: %d statuses seen, Available in every one: %v", what, aw.seen, len(aw.unavailable) == 0)
}

// degradedMessage is the message of c's Degraded condition, "" without one.
func degradedMessage(c *etcdv1beta1.EtcdCluster) string {
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionDegraded); cond != nil {
		return cond.Message
	}
	return ""
}

// assertNeverDegraded fails the test if, in the statuses assertNeverUnavailable looked at, the phase
// was ever Degraded, or the Degraded condition called a member down: a rolling update restarts each
// member on purpose, reads as Upgrading until its last member serves again, and says of the member it
// restarts that it is restarting onto the current spec. Call it after assertNeverUnavailable.
func (aw *availableWatch) assertNeverDegraded(t testing.TB, what string) {
	t.Helper()
	aw.fail(t, &aw.degraded, what+": the phase was Degraded ")
	aw.fail(t, &aw.down, what+": Degraded called a member down, not restarting ")
}

// fail fails the test for each entry of seen, one of aw's lists, with prefix before it.
func (aw *availableWatch) fail(t testing.TB, seen *[]string, prefix string) {
	t.Helper()
	aw.mu.Lock()
	defer aw.mu.Unlock()
	for _, s := range *seen {
		t.Error(prefix + s)
	}
}

// assertNeverStalled fails the test if, in the statuses assertNeverUnavailable looked at, the Progressing
// condition was ever False for another reason than Reconciled: a change the operator carries out (a
// rollout) must read as progressing until it is done, so that `kubectl wait
// --for=condition=Progressing=False` returns at its end. Call it after assertNeverUnavailable.
func (aw *availableWatch) assertNeverStalled(t testing.TB, what string) {
	t.Helper()
	aw.fail(t, &aw.stalled, what+": Progressing was False before the end ")
}
