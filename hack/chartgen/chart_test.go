package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// root is the repository's root, absolute.
var root = func() string {
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return r
}()

// helm runs the chart's helm (hack/tools/helm/go.mod) with args and returns its standard output.
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	return command(t, "go", append([]string{"tool", "-modfile=" + filepath.Join(root, "hack/tools/helm/go.mod"), "helm"}, args...)...)
}

// command runs name with args in the repository's root and returns its standard output.
func command(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// render returns the objects of the chart rendered by helm template in namespace ns with the CRDs and
// the --set values sets.
func render(t *testing.T, chart, ns string, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "etcd-operator", chart, "--namespace", ns, "--include-crds"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	objs, err := DecodeObjects(bytes.NewReader(helm(t, args...)))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// key names an object: kind, namespace and name.
func key(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// compare fails t unless the chart's objects are those of the install file (less its Namespace, which
// `helm install --create-namespace` creates), each equal in everything but its labels; and every
// chart object carries the label that selects the operator's objects.
func compare(t *testing.T, chart, install []*unstructured.Unstructured) {
	t.Helper()
	want := map[string]*unstructured.Unstructured{}
	for _, o := range install {
		if o.GetKind() != "Namespace" {
			want[key(o)] = o
		}
	}
	got := map[string]*unstructured.Unstructured{}
	for _, o := range chart {
		if _, dup := got[key(o)]; dup {
			t.Errorf("the chart renders %s twice", key(o))
		}
		got[key(o)] = o
		if o.GetKind() != "CustomResourceDefinition" && o.GetLabels()["app.kubernetes.io/name"] != "etcd-operator" {
			t.Errorf("%s has no label app.kubernetes.io/name=etcd-operator", key(o))
		}
	}
	for _, k := range sortedKeys(want) {
		g, ok := got[k]
		if !ok {
			t.Errorf("the chart does not render %s", k)
			continue
		}
		if d := diff(unlabelled(want[k]), unlabelled(g)); d != "" {
			t.Errorf("%s differs between the install file and the chart:\n%s", k, d)
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			t.Errorf("the chart renders %s, which the install file does not hold", k)
		}
	}
}

// unlabelled returns o's content without its labels.
func unlabelled(o *unstructured.Unstructured) map[string]any {
	c := o.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "labels")
	return c.Object
}

// diff returns "" when a and b are equal, else both in YAML.
func diff(a, b map[string]any) string {
	if reflect.DeepEqual(a, b) {
		return ""
	}
	ya, _ := yaml.Marshal(a)
	yb, _ := yaml.Marshal(b)
	al, bl := strings.Split(string(ya), "\n"), strings.Split(string(yb), "\n")
	var out []string
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("line %d:\n  install: %s\n  chart:   %s", i+1, x, y))
		}
		if len(out) == 5 {
			break
		}
	}
	return strings.Join(out, "\n")
}

func sortedKeys(m map[string]*unstructured.Unstructured) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func readInstall(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := ReadObjects(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestChartMatchesInstallFiles: the chart rendered with its defaults installs what dist/install.yaml
// installs; with namespaced=true what dist/install-namespaced.yaml does, and for a list of namespaces
// what hack/install-namespaced.sh renders; with webhook.certProvisioner=certManager what
// config/certmanager does: the same objects, equal but for their labels (CRDs, roles' rules,
// bindings, webhooks, the Deployment's args, ports, probes and everything else).
func TestChartMatchesInstallFiles(t *testing.T) {
	chart := filepath.Join("charts", "etcd-operator")
	const ns = "etcd-operator-system"
	t.Run("default", func(t *testing.T) {
		compare(t, render(t, chart, ns), readInstall(t, "dist/install.yaml"))
	})
	t.Run("namespaced", func(t *testing.T) {
		compare(t, render(t, chart, ns, "namespaced=true"), readInstall(t, "dist/install-namespaced.yaml"))
	})
	t.Run("namespaced list", func(t *testing.T) {
		want, err := DecodeObjects(bytes.NewReader(command(t, "bash", "hack/install-namespaced.sh", "--namespace", "ops", "--watch", "apps,db")))
		if err != nil {
			t.Fatal(err)
		}
		compare(t, render(t, chart, "ops", "namespaced=true", "watchNamespaces={apps,db}"), want)
	})
	t.Run("cert-manager", func(t *testing.T) {
		want, err := DecodeObjects(bytes.NewReader(command(t, "go", "tool", "-modfile=hack/tools/go.mod", "kustomize", "build", "config/certmanager")))
		if err != nil {
			t.Fatal(err)
		}
		compare(t, render(t, chart, ns, "webhook.certProvisioner=certManager"), want)
	})
}

// TestGeneratedParts: the chart's CRDs are byte copies of config/crd/bases, and its generated
// templates are those of the install files (make manifests writes both).
func TestGeneratedParts(t *testing.T) {
	src, err := filepath.Glob(filepath.Join(root, "config/crd/bases/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dst, err := filepath.Glob(filepath.Join(root, chartDir, "crds/*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(src) == 0 || len(src) != len(dst) {
		t.Errorf("%d CRDs in config/crd/bases, %d in the chart", len(src), len(dst))
	}
	for _, f := range src {
		a, _ := os.ReadFile(f)
		b, err := os.ReadFile(filepath.Join(root, chartDir, "crds", filepath.Base(f)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("the chart's copy of %s differs (%v): run make manifests", f, err)
		}
	}
	var objs []*unstructured.Unstructured
	for _, f := range installFiles {
		objs = append(objs, readInstall(t, f)...)
	}
	want, err := Templates(objs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, chartDir, "templates/_generated.tpl"))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("templates/_generated.tpl is stale (%v): run make manifests", err)
	}
}

// TestPrometheusRule: metrics.prometheusRule.enabled renders nothing without files/alerts.yaml (a copy
// of the chart without it), the repository's alerts as it is, and a PrometheusRule of a file's groups.
func TestPrometheusRule(t *testing.T) {
	chart := filepath.Join(root, chartDir)
	var shipped bool
	for _, o := range render(t, chart, "x", "metrics.prometheusRule.enabled=true") {
		shipped = shipped || o.GetKind() == "PrometheusRule"
	}
	if !shipped {
		t.Error("the chart as it is renders no PrometheusRule: files/alerts.yaml is missing or empty")
	}
	bare := filepath.Join(t.TempDir(), "etcd-operator")
	command(t, "cp", "-r", chart, bare)
	if err := os.Remove(filepath.Join(bare, "files/alerts.yaml")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, o := range render(t, bare, "x", "metrics.prometheusRule.enabled=true") {
		if o.GetKind() == "PrometheusRule" {
			t.Errorf("a PrometheusRule without files/alerts.yaml")
		}
	}
	// A copy of the chart with an alerts file, as a Prometheus rule file.
	tmp := filepath.Join(t.TempDir(), "etcd-operator")
	command(t, "cp", "-r", chart, tmp)
	rules := "groups:\n- name: etcd-operator\n  rules:\n  - alert: Test\n    expr: up == 0\n    annotations: {summary: '{{ $labels.pod }} is down'}\n"
	if err := os.WriteFile(filepath.Join(tmp, "files/alerts.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, o := range render(t, tmp, "x", "metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=kps") {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		found = true
		g, _, _ := unstructured.NestedSlice(o.Object, "spec", "groups")
		b, _ := yaml.Marshal(g)
		if !strings.Contains(string(b), "alert: Test") || !strings.Contains(string(b), "{{ $labels.pod }} is down") {
			t.Errorf("the PrometheusRule's groups are not the file's:\n%s", b)
		}
		if o.GetLabels()["release"] != "kps" {
			t.Errorf("labels %v: want release=kps added", o.GetLabels())
		}
	}
	if !found {
		t.Error("no PrometheusRule with files/alerts.yaml")
	}
}

// TestValuesDocumented: every value of values.yaml is named in the chart's README table.
func TestValuesDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllSubmatch(readme, -1) {
		documented[string(m[1])] = true
	}
	for _, k := range leaves("", values) {
		if !documented[k] {
			t.Errorf("value %s is not in the README's table", k)
		}
		delete(documented, k)
	}
	for k := range documented {
		t.Errorf("the README's table names %s, which values.yaml does not have", k)
	}
}

// whole are the values documented as one, though maps.
var whole = map[string]bool{"resources": true}

// leaves returns the dotted paths of the values of m that are not maps with keys.
func leaves(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !whole[prefix+k] {
			out = append(out, leaves(prefix+k+".", sub)...)
			continue
		}
		out = append(out, prefix+k)
	}
	sort.Strings(out)
	return out
}
