package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/testutil"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// The monitoring files, and their copies in the Helm chart, which must be the same bytes.
var monitoringCopies = map[string]string{
	"config/prometheus/alerts.yaml":              "charts/etcd-operator/files/alerts.yaml",
	"config/grafana/etcd-cluster-dashboard.json": "charts/etcd-operator/files/etcd-cluster-dashboard.json",
}

// etcdMetrics are the metrics of etcd itself that the alerts and the dashboard may query: each must be
// in a real etcd's /metrics (TestQueriedMetricsExist scrapes one). grpc_server_handling_seconds is
// there only with --metrics=extensive (spec.options.extraArgs), which the dashboard's panel says.
var etcdMetrics = []string{
	"etcd_server_has_leader",
	"etcd_server_leader_changes_seen_total",
	"etcd_server_proposals_committed_total",
	"etcd_server_proposals_applied_total",
	"etcd_server_proposals_failed_total",
	"etcd_server_proposals_pending",
	"etcd_disk_wal_fsync_duration_seconds_bucket",
	"etcd_disk_backend_commit_duration_seconds_bucket",
	"grpc_server_handled_total",
	"grpc_server_handling_seconds_bucket",
}

// TestMonitoringCopiesIdentical: the chart ships the same alerts and dashboard as config/.
func TestMonitoringCopiesIdentical(t *testing.T) {
	for orig, cp := range monitoringCopies {
		a, err := os.ReadFile(filepath.Join(root, orig))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(root, cp))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s: cp %s %s", cp, orig, orig, cp)
		}
	}
}

type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestPrometheusRuleMatchesAlerts: the PrometheusRule wraps exactly the groups of alerts.yaml, and
// every alert has a severity, a summary, a description and a runbook_url into docs/monitoring.md whose
// anchor is a heading there.
func TestPrometheusRuleMatchesAlerts(t *testing.T) {
	var plain ruleGroups
	readYAML(t, "config/prometheus/alerts.yaml", &plain)
	var wrapped struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   any    `json:"metadata"`
		Spec       ruleGroups
	}
	readYAML(t, "config/prometheus/prometheusrule.yaml", &wrapped)
	if wrapped.Kind != "PrometheusRule" || !reflect.DeepEqual(plain, wrapped.Spec) {
		t.Errorf("prometheusrule.yaml (kind %s) does not wrap alerts.yaml's groups", wrapped.Kind)
	}
	docs, err := os.ReadFile(filepath.Join(root, "docs/monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, h := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(docs), -1) {
		anchors[strings.ToLower(strings.ReplaceAll(h[1], " ", "-"))] = true
	}
	const prefix = "https://github.com/etcdkit/etcd-operator/blob/main/docs/monitoring.md#"
	n := 0
	for _, g := range plain.Groups {
		for _, r := range g.Rules {
			n++
			a := r.Annotations
			if r.Labels["severity"] == "" || a["summary"] == "" || a["description"] == "" {
				t.Errorf("alert %s lacks a severity, summary or description", r.Alert)
			}
			anchor, ok := strings.CutPrefix(a["runbook_url"], prefix)
			if !ok || anchor != strings.ToLower(r.Alert) || !anchors[anchor] {
				t.Errorf("alert %s: runbook_url %q is not %s%s with a heading %q in docs/monitoring.md", r.Alert, a["runbook_url"], prefix, strings.ToLower(r.Alert), r.Alert)
			}
		}
	}
	if n < 10 {
		t.Errorf("%d alerts", n)
	}
}

// TestAlertRules runs promtool (hack/tools/promtool, built once per machine) over the alerts' unit
// tests, config/prometheus/rules_test.yaml: each alert fires on its synthetic series and stays quiet
// on the others.
func TestAlertRules(t *testing.T) {
	out, err := goTool(t, "config/prometheus", "promtool", "test", "rules", "rules_test.yaml")
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	out, err = goTool(t, "charts/etcd-operator/files", "promtool", "check", "rules", "alerts.yaml")
	if err != nil {
		t.Fatalf("promtool check rules (chart): %v\n%s", err, out)
	}
}

// goTool runs a tool of hack/tools/promtool/go.mod in dir (relative to the repository's root).
func goTool(t *testing.T, dir string, args ...string) ([]byte, error) {
	t.Helper()
	modfile, err := filepath.Abs(filepath.Join(root, "hack/tools/promtool/go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"tool", "-modfile=" + modfile}, args...)...)
	cmd.Dir = filepath.Join(root, dir)
	return cmd.CombinedOutput()
}

// queriedExprs returns the PromQL expressions of the alerts and of the dashboard (its panels'
// targets and the metric selectors of its label_values variables), with Grafana's variables replaced
// by values PromQL parses.
func queriedExprs(t *testing.T) []string {
	t.Helper()
	var rules ruleGroups
	readYAML(t, "config/prometheus/alerts.yaml", &rules)
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	b, err := os.ReadFile(filepath.Join(root, "config/grafana/etcd-cluster-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+), *[a-z_]+\)$`)
	for _, v := range dash.Templating.List {
		if m := labelValues.FindStringSubmatch(v.Definition); m != nil {
			exprs = append(exprs, m[1])
		}
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$namespace", "ns", "$cluster", "c")
	for i := range exprs {
		exprs[i] = vars.Replace(exprs[i])
	}
	return exprs
}

// metricNames parses exprs with Prometheus's parser (hack/tools/promtool/metricnames) and returns the
// metric names each selects.
func metricNames(t *testing.T, exprs []string) map[string][]string {
	t.Helper()
	in, _ := json.Marshal(exprs)
	cmd := exec.Command("go", "run", "./metricnames")
	cmd.Dir = filepath.Join(root, "hack/tools/promtool")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("metricnames: %v\n%s", err, stderr.String())
	}
	var results []struct {
		Expr    string   `json:"expr"`
		Metrics []string `json:"metrics"`
		Error   string   `json:"error"`
	}
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("metricnames: %v", err)
	}
	byExpr := map[string][]string{}
	for _, r := range results {
		if r.Error != "" || len(r.Metrics) == 0 || slices.Contains(r.Metrics, "") {
			t.Errorf("query %q: parse error %q, or it selects no metric by name (%q)", r.Expr, r.Error, r.Metrics)
		}
		byExpr[r.Expr] = r.Metrics
	}
	return byExpr
}

// TestQueriedMetricsExist: every metric the alerts and the dashboard query is one the operator
// registers (read back from controller-runtime's registry, controller-runtime's own reconcile
// metrics included) or one of etcdMetrics, each of which a real etcd member serves on its metrics
// port.
func TestQueriedMetricsExist(t *testing.T) {
	byExpr := metricNames(t, queriedExprs(t))
	operator := operatorMetricNames(t)
	served := scrapeEtcd(t)
	for _, m := range etcdMetrics {
		if !served[m] {
			t.Errorf("etcd metric %s is not in a real etcd's /metrics", m)
		}
	}
	used := map[string]bool{}
	for expr, names := range byExpr {
		for _, n := range names {
			used[n] = true
			if !operator[n] && !slices.Contains(etcdMetrics, n) {
				t.Errorf("query %q: %s is neither an operator metric nor a checked etcd metric", expr, n)
			}
		}
	}
	for _, want := range []string{"etcd_operator_cluster_healthy_voters", "etcd_disk_wal_fsync_duration_seconds_bucket", "controller_runtime_reconcile_errors_total"} {
		if !used[want] {
			t.Errorf("no query uses %s: the parse found %d metrics", want, len(used))
		}
	}
}

// operatorMetricNames fills every series of the operator's metrics (a pass over a model with a member
// down and an alarm, a rollout step, a backup, a certificate, a membership call, a controller started)
// and returns the names controller-runtime's registry then serves (histograms as _bucket, _sum, _count).
func operatorMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	c := testutil.EtcdCluster("names", testutil.InNamespace("ns-names"))
	c.Status.Conditions = []metav1.Condition{{Type: etcdv1beta1.ConditionAvailable, Status: metav1.ConditionTrue}}
	e := observed("names", 3, 1, map[uint64]bool{3: true}, etcd.Alarm{MemberID: 1, Type: etcd.AlarmNoSpace})
	RecordPass(model.Build(model.Input{Cluster: c, Etcd: e}), verdict.Acting(etcdv1beta1.ReasonRollingUpdate, "restart"))
	defer ForgetCluster("ns-names", "names")
	BackupDuration.WithLabelValues("ns-names", "names").Observe(1)
	BackupSize.WithLabelValues("ns-names", "names").Set(1)
	BackupLastSuccess.WithLabelValues("ns-names", "names").Set(1)
	BackupFailures.WithLabelValues("ns-names", "names").Add(0)
	CertificateNotAfter.WithLabelValues("ns-names", "names", "ca").Set(1)
	CountMembership("ns-names", "names", "add_learner", nil, false)
	QuorumRestores.WithLabelValues("started").Add(0)
	APIWrites.WithLabelValues("create", "Pod", "ns-names").Add(0)

	// a started controller has its reconcile metrics
	ctl, err := controller.NewUnmanaged("metricnames", controller.Options{SkipNameValidation: ptr(true),
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	}()

	names := map[string]bool{}
	testutil.Eventually(t, 10*time.Second, "controller-runtime's reconcile metrics", func(context.Context) error {
		families, err := crmetrics.Registry.Gather()
		if err != nil {
			return err
		}
		for _, f := range families {
			n := f.GetName()
			names[n] = true
			if f.GetType().String() == "HISTOGRAM" {
				names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
			}
		}
		if !names["controller_runtime_reconcile_errors_total"] {
			return errors.New("not registered yet")
		}
		return nil
	})
	return names
}

func ptr[T any](v T) *T { return &v }

// scrapeEtcd starts a real etcd member (in this process, --metrics=extensive, its metrics on their own
// listener as on a member pod's port 2381) and returns the sample names of its /metrics.
func scrapeEtcd(t *testing.T) map[string]bool {
	t.Helper()
	const host = "127.0.3.21"
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "scrape", t.TempDir()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true
	cfg.Metrics = "extensive"
	peer, _ := url.Parse("http://" + host + ":2380")
	cli, _ := url.Parse("http://" + host + ":2379")
	mu, _ := url.Parse("http://" + host + ":2381")
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cli}, []url.URL{*cli}
	cfg.ListenMetricsUrls = []url.URL{*mu}
	cfg.InitialCluster = "scrape=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready within 30s")
	}
	// the gRPC server's series appear with its first request: serve one, as a member always has
	kv, err := clientv3.New(clientv3.Config{Endpoints: []string{cli.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kv.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := kv.Put(ctx, "scraped", "yes"); err != nil {
		t.Fatalf("put: %v", err)
	}
	var names map[string]bool
	testutil.Eventually(t, 10*time.Second, "etcd's gRPC series", func(context.Context) error {
		var err error
		if names, err = scrapeNames(mu.String() + "/metrics"); err != nil {
			return err
		}
		if !names["grpc_server_handled_total"] {
			return errors.New("no grpc_server_handled_total yet")
		}
		return nil
	})
	if len(names) < 50 {
		keys := make([]string, 0, len(names))
		for k := range names {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Fatalf("etcd served only %d metrics: %v", len(names), keys)
	}
	return names
}

// scrapeNames returns the sample names that url's Prometheus text serves.
func scrapeNames(url string) (map[string]bool, error) {
	resp, err := http.Get(url) //nolint:gosec,noctx // a test's own loopback listener
	if err != nil {
		return nil, fmt.Errorf("scrape etcd: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape etcd: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape etcd: %s", resp.Status)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names, nil
}
