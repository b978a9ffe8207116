// Command chartgen keeps the generated parts of the Helm chart (charts/etcd-operator) equal to their
// sources, so that the chart installs what dist/install.yaml and dist/install-namespaced.yaml install:
//
//   - crds/: byte copies of config/crd/bases (controller-gen's CRDs);
//   - values.schema.json: the schema Helm checks the values against, from values.yaml's keys, defaults
//     and comments (schema.go);
//   - templates/_generated.tpl: the rules of every Role and ClusterRole of both install files, and the
//     webhooks of both webhook configurations (without their Service's namespace, which the chart
//     sets), each as a named template the chart's templates include.
//
// Run it after dist/ is rendered:
//
//	go run ./hack/chartgen   (make manifests runs it)
//
// The chart's hand-written templates (the Deployment, the Service, the bindings) are checked against
// the install files by hack/chartgen's test, which make verify runs.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart, relative to the repository's root.
const chartDir = "charts/etcd-operator"

// installFiles are the rendered install files whose roles and webhooks the chart includes.
var installFiles = []string{"dist/install.yaml", "dist/install-namespaced.yaml"}

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	if err := run(root); err != nil {
		fmt.Fprintln(os.Stderr, "chartgen:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	if err := copyCRDs(filepath.Join(root, "config", "crd", "bases"), filepath.Join(root, chartDir, "crds")); err != nil {
		return err
	}
	values, err := os.ReadFile(filepath.Join(root, chartDir, "values.yaml"))
	if err != nil {
		return err
	}
	schema, err := Schema(values)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, chartDir, "values.schema.json"), schema, 0o644); err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, f := range installFiles {
		o, err := ReadObjects(filepath.Join(root, f))
		if err != nil {
			return err
		}
		objs = append(objs, o...)
	}
	tpl, err := Templates(objs)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, chartDir, "templates", "_generated.tpl"), tpl, 0o644)
}

// copyCRDs makes dst hold a byte copy of every .yaml file of src, and nothing else.
func copyCRDs(src, dst string) error {
	files, err := filepath.Glob(filepath.Join(src, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in %s", src)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dst, "*"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ReadObjects returns the objects of a multi-document YAML file, in order; empty documents are
// skipped.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return DecodeObjects(f)
}

// DecodeObjects is ReadObjects of a stream.
func DecodeObjects(r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for {
		m := map[string]any{}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// RulesTemplate is the name of the template that holds the rules of the Role or ClusterRole kind/name.
func RulesTemplate(kind, name string) string {
	return "etcd-operator.generated.rules." + kind + "." + name
}

// WebhooksTemplate is the name of the template that holds the webhooks of the configuration of kind.
func WebhooksTemplate(kind string) string {
	return "etcd-operator.generated.webhooks." + kind
}

// Templates returns templates/_generated.tpl for objs: one named template per distinct Role and
// ClusterRole (by kind and name) with its rules, and one per webhook configuration kind with its
// webhooks, their Service's namespace left out. Two objects of one kind and name must agree.
func Templates(objs []*unstructured.Unstructured) ([]byte, error) {
	blocks := map[string]any{}
	for _, o := range objs {
		var name string
		var body any
		switch o.GetKind() {
		case "Role", "ClusterRole":
			name, body = RulesTemplate(o.GetKind(), o.GetName()), o.Object["rules"]
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			hooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
			if err != nil {
				return nil, err
			}
			for _, h := range hooks {
				unstructured.RemoveNestedField(h.(map[string]any), "clientConfig", "service", "namespace")
				unstructured.RemoveNestedField(h.(map[string]any), "namespaceSelector") // the chart's own
			}
			name, body = WebhooksTemplate(o.GetKind()), hooks
		default:
			continue
		}
		b, err := yaml.Marshal(body)
		if err != nil {
			return nil, err
		}
		if prev, ok := blocks[name]; ok && !bytes.Equal(prev.([]byte), b) {
			return nil, fmt.Errorf("two %s %s differ between the install files", o.GetKind(), o.GetName())
		}
		if bytes.Contains(b, []byte("{{")) {
			return nil, fmt.Errorf("%s %s holds {{, which the chart would read as a template", o.GetKind(), o.GetName())
		}
		blocks[name] = b
	}
	names := make([]string, 0, len(blocks))
	for n := range blocks {
		names = append(names, n)
	}
	sort.Strings(names)
	var out strings.Builder
	out.WriteString("{{/*\nGenerated by hack/chartgen (make manifests) from dist/install.yaml and\n" +
		"dist/install-namespaced.yaml: the rules of the operator's roles and its webhooks. Do not edit.\n*/}}\n")
	for _, n := range names {
		fmt.Fprintf(&out, "\n{{- define %q }}\n%s{{- end }}\n", n, blocks[n])
	}
	return []byte(out.String()), nil
}
