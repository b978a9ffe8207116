package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
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

// helmBinary is the chart's helm (hack/tools/helm/go.mod), built once: go tool takes seconds to find
// it again on every call.
var helmBinary = sync.OnceValues(func() (string, error) {
	cmd := exec.Command("go", "tool", "-n", "-modfile="+filepath.Join(root, "hack/tools/helm/go.mod"), "helm")
	cmd.Dir = root
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
})

// helmPath returns helmBinary's path, or fails t.
func helmPath(t *testing.T) string {
	t.Helper()
	p, err := helmBinary()
	if err != nil || p == "" {
		t.Fatalf("go tool -n helm: %q, %v", p, err)
	}
	return p
}

// helm runs the chart's helm with args and returns its standard output.
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	return command(t, helmPath(t), args...)
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

// unlabelled returns o's content without its labels and, for a CRD, without the namespace of its
// conversion webhook's Service: Helm installs CRDs as they are (etcd-operator-system), and the
// operator points them at the Service of its own namespace when it starts.
func unlabelled(o *unstructured.Unstructured) map[string]any {
	c := o.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "labels")
	if c.GetKind() == "CustomResourceDefinition" {
		unstructured.RemoveNestedField(c.Object, "spec", "conversion", "webhook", "clientConfig", "service", "namespace")
	}
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
	values, err := os.ReadFile(filepath.Join(root, chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	wantSchema, err := Schema(values)
	if err != nil {
		t.Fatal(err)
	}
	gotSchema, err := os.ReadFile(filepath.Join(root, chartDir, "values.schema.json"))
	if err != nil || !bytes.Equal(gotSchema, wantSchema) {
		t.Errorf("values.schema.json is stale (%v): run make manifests", err)
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
	values := chartValues(t)
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

// helmFails runs helm with args, fails t unless helm fails, and returns what helm wrote to its error
// output.
func helmFails(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(helmPath(t), args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Errorf("helm %s succeeded; want it to fail", strings.Join(args, " "))
	}
	return stderr.String()
}

// schemaKeys returns the dotted paths of the properties of schema s (a JSON object), below prefix;
// properties whose schema has no properties of its own are leaves.
func schemaKeys(prefix string, s map[string]any) []string {
	var out []string
	props, _ := s["properties"].(map[string]any)
	for k, v := range props {
		out = append(out, prefix+k)
		if sub, ok := v.(map[string]any); ok && prefix+k != "webhook.certManager.issuerRef" {
			out = append(out, schemaKeys(prefix+k+".", sub)...)
		}
	}
	sort.Strings(out)
	return out
}

// valueKeys returns the dotted paths of every key of values.yaml's map m, below prefix.
func valueKeys(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		out = append(out, prefix+k)
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !whole[prefix+k] {
			out = append(out, valueKeys(prefix+k+".", sub)...)
		}
	}
	sort.Strings(out)
	return out
}

// TestValuesSchema: values.schema.json describes every key of values.yaml and no other (but Helm's
// global), each with a description; Helm accepts the defaults and other valid values, and refuses
// a value of the wrong type, a misspelled key and a value outside its set, naming it.
func TestValuesSchema(t *testing.T) {
	chart := filepath.Join("charts", "etcd-operator")
	values := chartValues(t)
	b, err := os.ReadFile(filepath.Join(root, chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	schema := map[string]any{}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	if schema["$schema"] != schemaDraft || schema["additionalProperties"] != false {
		t.Errorf("schema %v, additionalProperties %v: want draft 7 and no keys but the chart's", schema["$schema"], schema["additionalProperties"])
	}
	inSchema := map[string]bool{}
	for _, k := range schemaKeys("", schema) {
		inSchema[k] = true
	}
	delete(inSchema, "global")
	for _, k := range valueKeys("", values) {
		if !inSchema[k] {
			t.Errorf("values.yaml has %s, which values.schema.json does not describe: run make manifests", k)
		}
		delete(inSchema, k)
	}
	for k := range inSchema {
		if !strings.HasPrefix(k, "webhook.certManager.issuerRef.") {
			t.Errorf("values.schema.json describes %s, which values.yaml does not have: run make manifests", k)
		}
	}
	var undescribed func(string, map[string]any)
	undescribed = func(prefix string, s map[string]any) {
		props, _ := s["properties"].(map[string]any)
		for k, v := range props {
			sub, _ := v.(map[string]any)
			if d, _ := sub["description"].(string); d == "" {
				t.Errorf("%s%s has no description", prefix, k)
			}
			undescribed(prefix+k+".", sub)
		}
	}
	undescribed("", schema)

	t.Run("accepted", func(t *testing.T) {
		helm(t, "lint", "--strict", chart)
		for _, sets := range [][]string{
			nil,
			{"replicas=3", "podDisruptionBudget.minAvailable=50%", "image.pullPolicy=Always", "goMemLimit=1GiB"},
			{"webhook.certProvisioner=certManager", "webhook.certManager.issuerRef.name=ca", "webhook.certManager.issuerRef.kind=ClusterIssuer"},
			{"namespaced=true", "watchNamespaces={apps,db}", "extraArgs={--health-check-interval=30s}", "leaderElection.leaseDuration=30s"},
			{"podLabels.team=db", "nodeSelector.disk=ssd", "tolerations[0].key=dedicated", "tolerations[0].operator=Exists",
				"resources.limits.cpu=1", "metrics.podMonitor.enabled=true", "metrics.podMonitor.interval=30s", "metrics.podMonitor.authorization.type=Bearer"},
		} {
			render(t, chart, "x", sets...)
		}
	})
	for _, tc := range []struct {
		name string
		set  string
		want []string // what helm's message must say
	}{
		{"wrong type", "replicas=two", []string{"/replicas", "got string, want integer"}},
		{"misspelled top-level key", "replcas=3", []string{"additional properties 'replcas' not allowed"}},
		{"misspelled nested key", "image.tga=v1", []string{"/image", "additional properties 'tga' not allowed"}},
		{"value outside its set", "webhook.certProvisioner=vault", []string{"/webhook/certProvisioner", "must be one of 'self', 'certManager'"}},
		{"pull policy outside its set", "image.pullPolicy=Sometimes", []string{"/image/pullPolicy", "must be one of"}},
		{"no replica", "replicas=0", []string{"/replicas", "minimum"}},
		{"neither a number nor a percentage", "podDisruptionBudget.minAvailable=half", []string{"/podDisruptionBudget/minAvailable", "'half'"}},
		{"GOMEMLIMIT of Kubernetes' syntax", "goMemLimit=200Mi", []string{"/goMemLimit", "'200Mi'"}},
		{"a label that is not a string", "podLabels.tier=1", []string{"/podLabels/tier", "want string"}},
		{"a flag without its dashes", "extraArgs={health-check-interval=30s}", []string{"/extraArgs/0", "'health-check-interval=30s'"}},
		{"issuer kind without a name", "webhook.certManager.issuerRef.kind=ClusterIssuer", []string{"/webhook/certManager/issuerRef", "'name' required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := helmFails(t, "template", "etcd-operator", chart, "--set", tc.set)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("helm template --set %s failed without saying %q:\n%s", tc.set, w, msg)
				}
			}
		})
	}
}

// TestSchemaNeedsEveryKey: chartgen refuses a values.yaml key without a comment to describe it, an
// empty default without a rule that gives its type, and a rule for a key values.yaml no longer has;
// a new key with a comment and a typed default gets a schema of its own.
func TestSchemaNeedsEveryKey(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, values, want string
	}{
		{"no comment", string(raw) + "\nnewCount: 1\n", "newCount has no comment"},
		{"empty default without a rule", string(raw) + "\n# newMap of something.\nnewMap: {}\n", "newMap does not tell its type"},
		{"rule without a key", strings.Replace(string(raw), "\ngoMemLimit: 200MiB\n", "\n", 1), "rules for goMemLimit, which values.yaml does not have"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Schema([]byte(tc.values))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Schema: %v; want an error saying %q", err, tc.want)
			}
		})
	}
	s, err := Schema(append(raw, "\n# newCount of something.\nnewCount: 1\n"...))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Properties map[string]struct {
			Type        string `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(s, &got); err != nil {
		t.Fatal(err)
	}
	if p := got.Properties["newCount"]; p.Type != "integer" || p.Description != "newCount of something." {
		t.Errorf("newCount: %+v; want an integer described by its comment", p)
	}
}

// chartValues returns the chart's values.yaml, decoded.
func chartValues(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	return values
}
