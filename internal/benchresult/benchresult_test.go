package benchresult

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want Stats
	}{
		{[]float64{3, 1, 2}, Stats{1, 2, 3}},
		{[]float64{4, 1, 3, 2}, Stats{1, 2.5, 4}},
		{[]float64{7}, Stats{7, 7, 7}},
	} {
		got, ok := Summarize(tc.in)
		if !ok || got != tc.want {
			t.Errorf("Summarize(%v) = %v, %v; want %v", tc.in, got, ok, tc.want)
		}
	}
	if _, ok := Summarize(nil); ok {
		t.Error("Summarize(nil) reported a figure")
	}
}

func TestTableAndSplice(t *testing.T) {
	r := &Result{Date: "2026-12-03T00:00:00Z", Machine: "2 cores", EtcdImage: "etcd:v3.6.16", Runs: 3, Predicate: "n members answer"}
	boot := r.Op("bootstrap3", "apply → 3 healthy voters", "≤ 0.6 × floor")
	boot.Floor, boot.Operator = []float64{10, 8, 12}, []float64{6, 5, 4}
	up := r.Op("scale3to5", "scale 3 → 5", "≤ 8 s")
	up.Operator = []float64{9, 7, 8}
	up.OperatorWriteGap = []float64{0.2, 0.31, 0.1}
	idle := 0.0
	r.IdleAPIWritesPerMinute = &idle
	r.ManyClusters = &ManyClusters{Clusters: 100, AvailableSeconds: 25.04, FloorReadySeconds: 20.03, OperatorMiB: 60.2, OperatorHeapMiB: 12.34, Target: "≤ 30 s, ≤ 64 MiB",
		Passes: 850, QueueWaitSeconds: 0.123, OperatorCPUSeconds: 9.5, APIWrites: 2010}
	if r.Op("bootstrap3", "ignored", "") != boot {
		t.Fatal("Op added an operation twice")
	}
	table := r.Table()
	for _, want := range []string{
		"| apply → 3 healthy voters | 8.0 / 10.0 / 12.0 | 4.0 / 5.0 / 6.0 | 0.50 | ≤ 0.6 × floor | — / — |",
		"| scale 3 → 5 | — | 7.0 / 8.0 / 9.0 | — | ≤ 8 s | — / 0.3 |",
		"3 runs of each side",
		"API writes of the operator per minute with its cluster idle: 0.",
		"100 one-member clusters applied at once: all Available in 25.0 s; the floor, 100 bare etcd pods of the same image and requests created at once, all Ready in 20.0 s (operator ÷ floor 1.25), operator memory (RSS) then 60.2 MiB, its Go heap in use 12.3 MiB (target: ≤ 30 s, ≤ 64 MiB); meanwhile the operator made 8.5 passes per cluster, each waiting 0.12 s in its work queue on average, used 9.5 s of CPU and made 20.1 API writes per cluster.",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}

	doc := "intro\n" + BeginMarker + "\nold table\n" + EndMarker + "\nrest\n"
	got, err := Splice(doc, table)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "intro\n"+BeginMarker+"\n| operation") || !strings.HasSuffix(got, EndMarker+"\nrest\n") || strings.Contains(got, "old table") {
		t.Errorf("spliced:\n%s", got)
	}
	if _, err := Splice("no markers", table); err == nil {
		t.Error("Splice without markers did not fail")
	}

	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Table() != table {
		t.Errorf("the table of the JSON read back differs:\n%s\nwant\n%s", back.Table(), table)
	}
}
