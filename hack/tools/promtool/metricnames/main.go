// Command metricnames reads a JSON list of PromQL expressions on standard input and writes, for each,
// the metric names its selectors name, with Prometheus's own parser (promql/parser): a JSON list of
// {"expr", "metrics", "error"} in the same order. It exits 0 even when an expression does not parse
// (its "error" says why), 1 when the input is not a JSON list of strings. internal/metrics's tests
// use it to check that the alerts and the dashboard query only metrics that exist.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

type result struct {
	Expr    string   `json:"expr"`
	Metrics []string `json:"metrics"`
	Error   string   `json:"error,omitempty"`
}

func main() {
	var exprs []string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		fmt.Fprintln(os.Stderr, "metricnames: standard input is not a JSON list of strings:", err)
		os.Exit(1)
	}
	p := parser.NewParser(parser.Options{})
	out := make([]result, 0, len(exprs))
	for _, e := range exprs {
		r := result{Expr: e, Metrics: []string{}}
		expr, err := p.ParseExpr(e)
		if err != nil {
			r.Error = err.Error()
			out = append(out, r)
			continue
		}
		names := map[string]bool{}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				names[selectorName(vs)] = true
			}
			return nil
		})
		for n := range names {
			r.Metrics = append(r.Metrics, n)
		}
		sort.Strings(r.Metrics)
		out = append(out, r)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "metricnames:", err)
		os.Exit(1)
	}
}

// selectorName is the metric name a selector names: its name, or an equality matcher on __name__;
// "" when it names none (a selector by other labels only, or a regular expression on __name__).
func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}
