// Package benchresult holds what `make bench` measures side by side (the floor, a static StatefulSet
// applied by hand, and this operator's clusters, in one run), writes it as JSON, and renders it as the
// README's measured table, so that the table is generated from the measurement and never typed.
package benchresult

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Result is one `make bench` run.
type Result struct {
	// Date is when the run ended (RFC 3339, UTC).
	Date string `json:"date"`
	// Machine describes where it ran (cores, Kubernetes version, storage).
	Machine string `json:"machine"`
	// EtcdImage is the image both sides ran.
	EtcdImage string `json:"etcdImage"`
	// Runs is how many times each side took each operation.
	Runs int `json:"runs"`
	// Predicate says when an operation counts as done, the same for both sides.
	Predicate string `json:"predicate"`
	// Operations are the measured operations, in the order they were taken.
	Operations []*Operation `json:"operations"`
	// OperatorMiB is the operator's resident memory at the end of the run, in MiB (0: not read).
	OperatorMiB float64 `json:"operatorMiB,omitempty"`
	// IdleAPIWritesPerMinute is how many API writes the operator sent in a minute while its only
	// cluster was healthy and its spec unchanged (leader election's lease renewals apart); nil: not
	// measured.
	IdleAPIWritesPerMinute *float64 `json:"idleAPIWritesPerMinute,omitempty"`
	// ManyClusters is the run with many one-member clusters applied at once; nil: not measured.
	ManyClusters *ManyClusters `json:"manyClusters,omitempty"`
}

// ManyClusters is what applying many one-member clusters at once measured.
type ManyClusters struct {
	// Clusters is how many one-member EtcdClusters were applied at once.
	Clusters int `json:"clusters"`
	// AvailableSeconds is the time from the first apply until every one was Available, in seconds.
	AvailableSeconds float64 `json:"availableSeconds"`
	// PodsCreatedSeconds is the time from the first apply until the operator had created every member
	// pod, and PodsRunningSeconds until every one ran (the kubelet's share), in seconds; 0: not measured.
	PodsCreatedSeconds float64 `json:"podsCreatedSeconds,omitempty"`
	PodsRunningSeconds float64 `json:"podsRunningSeconds,omitempty"`
	// FloorReadySeconds is the floor: the time from the first create until as many bare etcd pods (one
	// member each, the same image, requests and readiness probe, no operator) were all Ready, in
	// seconds; 0: not measured.
	FloorReadySeconds float64 `json:"floorReadySeconds,omitempty"`
	// OperatorMiB is the operator's resident memory once every one was Available, in MiB.
	OperatorMiB float64 `json:"operatorMiB"`
	// OperatorHeapMiB is the operator's Go heap in use then (go_memstats_heap_inuse_bytes), in MiB;
	// the rest of OperatorMiB is mostly the binary's pages the kernel mapped; 0: not measured.
	OperatorHeapMiB float64 `json:"operatorHeapMiB,omitempty"`
	// Passes is how many reconcile passes of an EtcdCluster the operator made from the first apply until
	// every one was Available; QueueWaitSeconds is how long a cluster waited, on average, in the
	// operator's work queue for each of them (with every worker busy, a cluster that has work waits
	// behind those that have none); OperatorCPUSeconds is the operator's CPU time then, and APIWrites
	// its API requests other than GET (creates, patches, updates, deletes; events included);
	// PassSeconds is how long a pass took on average, in seconds (with QueueWaitSeconds: whether the
	// workers were busy working or waiting on the API server and etcd). 0: not measured.
	Passes             float64 `json:"passes,omitempty"`
	PassSeconds        float64 `json:"passSeconds,omitempty"`
	QueueWaitSeconds   float64 `json:"queueWaitSeconds,omitempty"`
	OperatorCPUSeconds float64 `json:"operatorCPUSeconds,omitempty"`
	APIWrites          float64 `json:"apiWrites,omitempty"`
	// Target is the goal for both figures.
	Target string `json:"target,omitempty"`
}

// Operation is the durations of one operation, in seconds, one per run and side.
type Operation struct {
	// Name identifies the operation (for example "bootstrap3").
	Name string `json:"name"`
	// Title says what was done and what was waited for.
	Title string `json:"title"`
	// Target is the goal for this project's figure (for example "≤ 0.6 × floor" or "≤ 8 s").
	Target string `json:"target,omitempty"`
	// Floor holds the floor's durations; empty when a static StatefulSet cannot do the operation.
	Floor []float64 `json:"floor,omitempty"`
	// Operator holds this operator's durations.
	Operator []float64 `json:"operator"`
	// FloorWriteGap and OperatorWriteGap hold, per run, the longest time in seconds between two writes
	// a continuous writer had acknowledged during the operation (until its first write after the
	// operation was done); empty when no writer ran (a cluster that does not exist yet).
	FloorWriteGap    []float64 `json:"floorWriteGap,omitempty"`
	OperatorWriteGap []float64 `json:"operatorWriteGap,omitempty"`
}

// Op returns the operation of that name, adding it (with title and target) the first time.
func (r *Result) Op(name, title, target string) *Operation {
	for _, o := range r.Operations {
		if o.Name == name {
			return o
		}
	}
	o := &Operation{Name: name, Title: title, Target: target}
	r.Operations = append(r.Operations, o)
	return o
}

// Stats are the minimum, median and maximum of a set of durations, in seconds.
type Stats struct{ Min, Median, Max float64 }

// Summarize returns the Stats of xs; ok is false when xs is empty.
func Summarize(xs []float64) (s Stats, ok bool) {
	if len(xs) == 0 {
		return Stats{}, false
	}
	sorted := slices.Clone(xs)
	slices.Sort(sorted)
	mid := len(sorted) / 2
	median := sorted[mid]
	if len(sorted)%2 == 0 {
		median = (sorted[mid-1] + sorted[mid]) / 2
	}
	return Stats{Min: sorted[0], Median: median, Max: sorted[len(sorted)-1]}, true
}

// String formats s as "min / median / max" in seconds with one decimal.
func (s Stats) String() string {
	return fmt.Sprintf("%.1f / %.1f / %.1f", s.Min, s.Median, s.Max)
}

// Ratio returns the operator's median over the floor's, false when the floor has no figure.
func (o *Operation) Ratio() (float64, bool) {
	f, okF := Summarize(o.Floor)
	p, okP := Summarize(o.Operator)
	if !okF || !okP || f.Median == 0 {
		return 0, false
	}
	return p.Median / f.Median, true
}

// Table renders r as a Markdown table: per operation, the floor's and the operator's min / median /
// max, the ratio of the medians, and the target; then a line saying where and how it was measured.
func (r *Result) Table() string {
	var b strings.Builder
	b.WriteString("| operation | floor: static StatefulSet, s (min / median / max) | this operator, s (min / median / max) | operator ÷ floor (medians) | target | longest write gap, s (max of runs): floor / operator |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- |\n")
	for _, o := range r.Operations {
		floor, ratio := "—", "—"
		if s, ok := Summarize(o.Floor); ok {
			floor = s.String()
		}
		if x, ok := o.Ratio(); ok {
			ratio = fmt.Sprintf("%.2f", x)
		}
		op := "—"
		if s, ok := Summarize(o.Operator); ok {
			op = s.String()
		}
		target := o.Target
		if target == "" {
			target = "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s / %s |\n", o.Title, floor, op, ratio, target, maxOf(o.FloorWriteGap), maxOf(o.OperatorWriteGap))
	}
	fmt.Fprintf(&b, "\n%d runs of each side, alternating, on %s, %s, %s. Done when: %s.",
		r.Runs, r.Machine, r.EtcdImage, r.Date, r.Predicate)
	if r.OperatorMiB > 0 {
		fmt.Fprintf(&b, " Operator memory (RSS) at the end: %.1f MiB.", r.OperatorMiB)
	}
	if m := r.ManyClusters; m != nil {
		fmt.Fprintf(&b, " %d one-member clusters applied at once: all Available in %.1f s", m.Clusters, m.AvailableSeconds)
		if m.PodsCreatedSeconds > 0 && m.PodsRunningSeconds > 0 {
			fmt.Fprintf(&b, " (every member pod created by %.1f s, all running by %.1f s)", m.PodsCreatedSeconds, m.PodsRunningSeconds)
		}
		if m.FloorReadySeconds > 0 {
			fmt.Fprintf(&b, "; the floor, %d bare etcd pods of the same image and requests created at once, all Ready in %.1f s (operator ÷ floor %.2f)",
				m.Clusters, m.FloorReadySeconds, m.AvailableSeconds/m.FloorReadySeconds)
		}
		fmt.Fprintf(&b, ", operator memory (RSS) then %.1f MiB", m.OperatorMiB)
		if m.OperatorHeapMiB > 0 {
			fmt.Fprintf(&b, ", its Go heap in use %.1f MiB", m.OperatorHeapMiB)
		}
		fmt.Fprintf(&b, " (target: %s)", m.Target)
		if m.Passes > 0 {
			fmt.Fprintf(&b, "; meanwhile the operator made %.1f passes per cluster, each waiting %.2f s in its work queue on average", m.Passes/float64(m.Clusters), m.QueueWaitSeconds)
			if m.PassSeconds > 0 {
				fmt.Fprintf(&b, " and taking %.2f s", m.PassSeconds)
			}
			fmt.Fprintf(&b, ", used %.1f s of CPU and made %.1f API writes per cluster", m.OperatorCPUSeconds, m.APIWrites/float64(m.Clusters))
		}
		b.WriteString(".")
	}
	if r.IdleAPIWritesPerMinute != nil {
		fmt.Fprintf(&b, " API writes of the operator per minute with its cluster idle: %.0f.", *r.IdleAPIWritesPerMinute)
	}
	b.WriteString("\n")
	return b.String()
}

// maxOf formats the largest of xs with one decimal, "—" when xs is empty.
func maxOf(xs []float64) string {
	if len(xs) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", slices.Max(xs))
}

// Write writes r to path as indented JSON.
func (r *Result) Write(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// Read reads a Result written by Write.
func Read(path string) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Result{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Markers delimit the generated table in a Markdown file.
const (
	BeginMarker = "<!-- bench-table:begin (generated by `make bench` from docs/bench/sidebyside.json; do not edit) -->"
	EndMarker   = "<!-- bench-table:end -->"
)

// Splice returns doc with the text between BeginMarker and EndMarker replaced by table; it fails when
// the markers are missing or out of order.
func Splice(doc, table string) (string, error) {
	i := strings.Index(doc, BeginMarker)
	j := strings.Index(doc, EndMarker)
	if i < 0 || j < i {
		return "", fmt.Errorf("the markers %q and %q are missing or out of order", BeginMarker, EndMarker)
	}
	return doc[:i+len(BeginMarker)] + "\n" + table + doc[j:], nil
}
