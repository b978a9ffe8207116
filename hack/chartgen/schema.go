package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// The chart's values.schema.json is generated from values.yaml: its keys give the properties, their
// defaults the types, their comments the descriptions. Helm checks the values of every install,
// upgrade, template and lint against it, so a mistyped value (replicas: two) or a key the chart does
// not have (replcas: 3) fails instead of being ignored. What values.yaml cannot say is in
// valueRules: the values a string may take, the least of a number, and the shape of the values whose
// default is an empty map or list.

// schemaDraft is the JSON Schema dialect of the schema; Helm validates draft 7 schemas.
const schemaDraft = "http://json-schema.org/draft-07/schema#"

// A rule adds to or replaces the schema inferred for one value of values.yaml (by its dotted path). A
// rule with a "type" or "anyOf" replaces what the default would give, and the value's keys are then
// not walked: it is the whole schema of the value, but for the description, which is always the
// value's comment. Other rules add their keywords ("enum", "minimum", ...) to the inferred schema.
type rule map[string]any

// stringMap is a map of free keys with string values: labels, annotations, a node selector.
func stringMap() rule {
	return rule{"type": "object", "additionalProperties": map[string]any{"type": "string"}}
}

// freeObject is an object of Kubernetes' own (an affinity, an authorization) that the chart passes on
// as it is; the API server checks it.
func freeObject() rule { return rule{"type": "object"} }

// objectList is a list of Kubernetes objects the chart passes on as they are.
func objectList() rule { return rule{"type": "array", "items": map[string]any{"type": "object"}} }

// labelsRule is the rule of the labels added to an object of the chart.
var labelsRule = stringMap()

// valueRules are the values whose schema values.yaml's defaults do not tell, or tell only in part.
var valueRules = map[string]rule{
	"image.pullPolicy": {"enum": []any{"", "Always", "IfNotPresent", "Never"}},
	"imagePullSecrets": {"type": "array", "items": map[string]any{
		"type":                 "object",
		"required":             []any{"name"},
		"additionalProperties": false,
		"properties": map[string]any{
			"name": map[string]any{"type": "string", "minLength": 1,
				"description": "name of a Secret of type kubernetes.io/dockerconfigjson in the release's namespace."},
		},
	}},
	"replicas":        {"minimum": 1},
	"watchNamespaces": {"type": "array", "uniqueItems": true, "items": map[string]any{"type": "string", "pattern": `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`}},
	"extraArgs":       {"type": "array", "items": map[string]any{"type": "string", "pattern": `^-`}},
	"resources":       freeObject(),
	// A number of replicas, or a percentage of them.
	"podDisruptionBudget.minAvailable": {"anyOf": []any{
		map[string]any{"type": "integer", "minimum": 0},
		map[string]any{"type": "string", "pattern": `^[0-9]+%$`},
	}},
	"affinity":                  freeObject(),
	"nodeSelector":              stringMap(),
	"tolerations":               objectList(),
	"topologySpreadConstraints": objectList(),
	"podLabels":                 stringMap(),
	"podAnnotations":            stringMap(),
	"webhook.certProvisioner":   {"enum": []any{"self", "certManager"}},
	"webhook.certManager.issuerRef": {
		"type":                 "object",
		"additionalProperties": false,
		"properties": map[string]any{
			"name":  map[string]any{"type": "string", "minLength": 1, "description": "name of the issuer."},
			"kind":  map[string]any{"type": "string", "description": "kind of the issuer: Issuer (in the release's namespace, the default) or ClusterIssuer, or an external issuer's kind."},
			"group": map[string]any{"type": "string", "description": "API group of the issuer; empty: cert-manager.io."},
		},
		// kind and group say nothing without the issuer's name.
		"dependencies": map[string]any{"kind": []any{"name"}, "group": []any{"name"}},
	},
	"metrics.serviceMonitor.labels":    labelsRule,
	"metrics.podMonitor.labels":        labelsRule,
	"metrics.podMonitor.authorization": freeObject(),
	"metrics.prometheusRule.labels":    labelsRule,
	"leaderElection.leaseDuration":     durationRule,
	"leaderElection.renewDeadline":     durationRule,
	"leaderElection.retryPeriod":       durationRule,
	"metrics.serviceMonitor.interval":  intervalRule,
	"metrics.podMonitor.interval":      intervalRule,
	"image.repository":                 {"minLength": 1},
	// GOMEMLIMIT's syntax: the Go runtime refuses to start on anything else.
	"goMemLimit": {"pattern": `^$|^off$|^[0-9]+(B|KiB|MiB|GiB|TiB)?$`},
}

var (
	// durationRule: a Go duration (the operator's flags), or empty for the operator's default.
	durationRule = rule{"pattern": `^$|^([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$`}
	// intervalRule: a Prometheus duration, or empty for Prometheus' default.
	intervalRule = rule{"pattern": `^$|^([0-9]+(ms|s|m|h|d|w|y))+$`}
)

// Schema returns values.schema.json for the chart's values.yaml.
func Schema(values []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(values, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("values.yaml is not a map")
	}
	used := map[string]bool{}
	props, err := properties("", doc.Content[0], used)
	if err != nil {
		return nil, err
	}
	var unused []string
	for p := range valueRules {
		if !used[p] {
			unused = append(unused, p)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		return nil, fmt.Errorf("hack/chartgen has schema rules for %s, which values.yaml does not have", strings.Join(unused, ", "))
	}
	// A parent chart passes its global values to the chart.
	props["global"] = map[string]any{"type": "object", "description": "Helm's global values, which a parent chart shares with its dependencies; the chart does not use them."}
	s := map[string]any{
		"$schema":              schemaDraft,
		"title":                "Values of the etcd-operator chart",
		"description":          "Generated by hack/chartgen (make manifests) from values.yaml, its keys, defaults and comments. Do not edit.",
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// properties returns the schemas of the keys of the map m, whose values are at prefix, and marks the
// rules used.
func properties(prefix string, m *yaml.Node, used map[string]bool) (map[string]any, error) {
	props := map[string]any{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		path := prefix + k.Value
		desc := comment(k.HeadComment)
		if desc == "" {
			return nil, fmt.Errorf("values.yaml: %s has no comment to describe it", path)
		}
		s, err := valueSchema(path, v, used)
		if err != nil {
			return nil, err
		}
		s["description"] = desc
		props[k.Value] = s
	}
	return props, nil
}

// valueSchema returns the schema of the value v at path: its rule's, or the one its default shows with
// its rule's keywords added.
func valueSchema(path string, v *yaml.Node, used map[string]bool) (map[string]any, error) {
	r, ok := valueRules[path]
	used[path] = ok
	s := map[string]any{}
	if _, whole := r["type"]; whole || r["anyOf"] != nil {
		for k, x := range r {
			s[k] = x
		}
		return s, nil
	}
	switch {
	case v.Kind == yaml.MappingNode && len(v.Content) > 0:
		props, err := properties(path+".", v, used)
		if err != nil {
			return nil, err
		}
		s["type"], s["properties"], s["additionalProperties"] = "object", props, false
	case v.Kind == yaml.ScalarNode && v.Tag == "!!str":
		s["type"] = "string"
	case v.Kind == yaml.ScalarNode && v.Tag == "!!bool":
		s["type"] = "boolean"
	case v.Kind == yaml.ScalarNode && v.Tag == "!!int":
		s["type"] = "integer"
	default:
		return nil, fmt.Errorf("values.yaml: the default of %s does not tell its type: give it a rule with a type in hack/chartgen's valueRules", path)
	}
	for k, x := range r {
		s[k] = x
	}
	return s, nil
}

var commentMark = regexp.MustCompile(`(?m)^[ \t]*#[ \t]?`)

// comment returns the text of a key's head comment on one line: its last paragraph (the file's own
// comment, above a blank line, belongs to no key), without the #s.
func comment(head string) string {
	head = strings.TrimSpace(head)
	if i := strings.LastIndex(head, "\n\n"); i >= 0 {
		head = head[i+2:]
	}
	return strings.Join(strings.Fields(commentMark.ReplaceAllString(head, "")), " ")
}
