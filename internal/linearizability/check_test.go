package linearizability

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// checkTimeout bounds the checks of the hand-built histories, which take microseconds.
const checkTimeout = 10 * time.Second

func opPut(client int, key, val string, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: Input{Kind: Put, Key: key, Value: val}, Call: call, Output: Output{}, Return: ret}
}

func opPutUnknown(client int, key, val string, call int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: Input{Kind: Put, Key: key, Value: val}, Call: call, Output: Output{Unknown: true}, Return: math.MaxInt64}
}

func opGet(client int, key, val string, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: Input{Kind: Get, Key: key}, Call: call, Output: Output{Value: val}, Return: ret}
}

func opCAS(client int, key, expected, val string, ok bool, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: Input{Kind: CAS, Key: key, Value: val, Expected: expected}, Call: call, Output: Output{Succeeded: ok}, Return: ret}
}

func opCASUnknown(client int, key, expected, val string, call int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: Input{Kind: CAS, Key: key, Value: val, Expected: expected}, Call: call, Output: Output{Unknown: true}, Return: math.MaxInt64}
}

// TestCheckHandBuiltHistories: Check tells linearizable histories from histories no order of the
// operations within their intervals can explain, and counts their operations, unknown outcomes and
// keys.
func TestCheckHandBuiltHistories(t *testing.T) {
	tests := []struct {
		name        string
		ops         []porcupine.Operation
		want        porcupine.CheckResult
		wantUnknown int
	}{{
		name: "stale read: a get returns the old value after the put of a newer one returned",
		ops: []porcupine.Operation{
			opPut(0, "x", "a", 0, 10), opPut(0, "x", "b", 20, 30), opGet(1, "x", "a", 40, 50),
		},
		want: porcupine.Illegal,
	}, {
		name: "the same get concurrent with the newer put may be ordered before it",
		ops: []porcupine.Operation{
			opPut(0, "x", "a", 0, 10), opPut(0, "x", "b", 20, 30), opGet(1, "x", "a", 25, 50),
		},
		want: porcupine.Ok,
	}, {
		name: "a CAS succeeds against a value that was already overwritten",
		ops: []porcupine.Operation{
			opPut(0, "x", "a", 0, 10), opPut(0, "x", "b", 20, 30), opCAS(1, "x", "a", "c", true, 40, 50),
		},
		want: porcupine.Illegal,
	}, {
		name: "a CAS fails although the value it expects is there",
		ops: []porcupine.Operation{
			opPut(0, "x", "a", 0, 10), opCAS(1, "x", "a", "c", false, 20, 30), opGet(0, "x", "a", 40, 50),
		},
		want: porcupine.Illegal,
	}, {
		name: "a CAS on an absent key succeeds, another expecting absence then fails",
		ops: []porcupine.Operation{
			opCAS(0, "x", "", "a", true, 0, 10), opCAS(1, "x", "", "b", false, 20, 30), opGet(1, "x", "a", 40, 50),
		},
		want: porcupine.Ok,
	}, {
		name: "a write lost after it was acknowledged",
		ops: []porcupine.Operation{
			opPut(0, "x", "a", 0, 10), opGet(1, "x", "", 20, 30),
		},
		want: porcupine.Illegal,
	}, {
		name: "a put of unknown outcome whose value is read later took effect",
		ops: []porcupine.Operation{
			opPutUnknown(0, "x", "a", 0), opGet(1, "x", "", 5, 15), opGet(1, "x", "a", 20, 30), opGet(2, "x", "a", 40, 50),
		},
		want: porcupine.Ok, wantUnknown: 1,
	}, {
		name: "a put of unknown outcome whose value is never read did not",
		ops: []porcupine.Operation{
			opPutUnknown(0, "x", "a", 0), opGet(1, "x", "", 20, 30), opPut(2, "x", "b", 40, 50), opGet(1, "x", "b", 60, 70),
		},
		want: porcupine.Ok, wantUnknown: 1,
	}, {
		name: "a put of unknown outcome cannot be read and then be undone",
		ops: []porcupine.Operation{
			opPutUnknown(0, "x", "a", 0), opGet(1, "x", "a", 20, 30), opGet(1, "x", "", 40, 50),
		},
		want: porcupine.Illegal, wantUnknown: 1,
	}, {
		name: "a put of unknown outcome cannot take effect before it was called",
		ops: []porcupine.Operation{
			opGet(1, "x", "a", 0, 10), opPutUnknown(0, "x", "a", 20),
		},
		want: porcupine.Illegal, wantUnknown: 1,
	}, {
		name: "a CAS of unknown outcome may have succeeded",
		ops: []porcupine.Operation{
			opPut(0, "x", "a", 0, 10), opCASUnknown(1, "x", "a", "b", 20), opGet(2, "x", "b", 40, 50),
		},
		want: porcupine.Ok, wantUnknown: 1,
	}, {
		name: "a CAS of unknown outcome cannot succeed against a value that is not there",
		ops: []porcupine.Operation{
			opPut(0, "x", "a", 0, 10), opCASUnknown(1, "x", "z", "b", 20), opGet(2, "x", "b", 40, 50),
		},
		want: porcupine.Illegal, wantUnknown: 1,
	}, {
		name: "keys are independent: each key's history is linearizable",
		ops: []porcupine.Operation{
			opPut(0, "x", "a", 0, 10), opPut(1, "y", "b", 0, 10), opGet(2, "x", "a", 20, 30), opGet(2, "y", "b", 20, 30),
		},
		want: porcupine.Ok,
	}, {
		name: "one key's illegal history makes the whole history illegal",
		ops: []porcupine.Operation{
			opPut(0, "x", "a", 0, 10), opPut(1, "y", "b", 0, 10), opGet(2, "x", "a", 20, 30), opGet(2, "y", "a", 20, 30),
		},
		want: porcupine.Illegal,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Check(tt.ops, checkTimeout)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if res.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s (%s)", res.Verdict, tt.want, res)
			}
			if res.Operations != len(tt.ops) || res.Unknown != tt.wantUnknown {
				t.Fatalf("counted %d operations, %d unknown; want %d, %d", res.Operations, res.Unknown, len(tt.ops), tt.wantUnknown)
			}
		})
	}
}

// TestCheckWritesVisualizationOfIllegalHistory: with WithVisualization, Check writes porcupine's HTML
// page, naming the operations in this package's words, for an illegal history and nothing for a
// linearizable one.
func TestCheckWritesVisualizationOfIllegalHistory(t *testing.T) {
	dir := t.TempDir()
	illegal := filepath.Join(dir, "illegal.html")
	res, err := Check([]porcupine.Operation{
		opPut(0, "x", "a", 0, 10), opPut(0, "x", "b", 20, 30), opGet(1, "x", "a", 40, 50),
	}, checkTimeout, WithVisualization(illegal))
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if res.Verdict != porcupine.Illegal || res.Visualization != illegal {
		t.Fatalf("got %s, want Illegal with the visualization in %s", res, illegal)
	}
	page, err := os.ReadFile(illegal)
	if err != nil {
		t.Fatalf("read the visualization: %v", err)
	}
	if !strings.Contains(string(page), `get x → \"a\"`) {
		t.Fatalf("the visualization (%d bytes) does not describe the stale get", len(page))
	}

	ok := filepath.Join(dir, "ok.html")
	res, err = Check([]porcupine.Operation{opPut(0, "x", "a", 0, 10), opGet(1, "x", "a", 20, 30)}, checkTimeout, WithVisualization(ok))
	if err != nil || res.Verdict != porcupine.Ok || res.Visualization != "" {
		t.Fatalf("got %s, %v; want Ok without a visualization", res, err)
	}
	if _, err := os.Stat(ok); !os.IsNotExist(err) {
		t.Fatalf("a visualization was written for a linearizable history: %v", err)
	}
}

// TestCheckRejectsForeignOperations: Check refuses, with an error and without a verdict, a history
// whose operations are not this package's or return before their call.
func TestCheckRejectsForeignOperations(t *testing.T) {
	for name, op := range map[string]porcupine.Operation{
		"foreign input":          {Input: "put x a", Output: Output{}, Call: 0, Return: 1},
		"foreign output":         {Input: Input{Kind: Get, Key: "x"}, Output: "a", Call: 0, Return: 1},
		"return before the call": opGet(0, "x", "", 10, 5),
	} {
		t.Run(name, func(t *testing.T) {
			res, err := Check([]porcupine.Operation{opPut(0, "x", "a", 0, 1), op}, checkTimeout)
			if err == nil || res.Verdict != "" {
				t.Fatalf("got %s, %v; want an error and no verdict", res, err)
			}
		})
	}
}

// TestCheckTimeoutIsUnknown: when the timeout ends porcupine's search first, the verdict is Unknown,
// and Check returns soon after the timeout. The history (many concurrent puts and a read of a value
// none wrote) makes porcupine try every order of the puts.
func TestCheckTimeoutIsUnknown(t *testing.T) {
	var ops []porcupine.Operation
	for i := range 40 {
		ops = append(ops, opPut(i, "x", "v"+strings.Repeat("i", i+1), 0, 1000))
	}
	ops = append(ops, opGet(40, "x", "never written", 0, 1000))
	const timeout = 200 * time.Millisecond
	start := time.Now()
	res, err := Check(ops, timeout)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if res.Verdict != porcupine.Unknown {
		t.Fatalf("verdict %s, want Unknown (%s)", res.Verdict, res)
	}
	if took := time.Since(start); took > timeout+5*time.Second {
		t.Fatalf("Check returned %s after its timeout of %s", took-timeout, timeout)
	}
}

// TestDescribe: the visualization's descriptions of operations and states.
func TestDescribe(t *testing.T) {
	for _, tt := range []struct {
		in   Input
		out  Output
		want string
	}{
		{Input{Kind: Put, Key: "k", Value: "c0-1"}, Output{}, `put k "c0-1" → ok`},
		{Input{Kind: Put, Key: "k", Value: "c0-1"}, Output{Unknown: true}, `put k "c0-1" → ?`},
		{Input{Kind: Get, Key: "k"}, Output{Value: "c0-1"}, `get k → "c0-1"`},
		{Input{Kind: Get, Key: "k"}, Output{}, `get k → (absent)`},
		{Input{Kind: CAS, Key: "k", Expected: "c0-1", Value: "c1-1"}, Output{Succeeded: true}, `cas k "c0-1"→"c1-1" → ok`},
		{Input{Kind: CAS, Key: "k", Value: "c1-1"}, Output{}, `cas k (absent)→"c1-1" → failed`},
	} {
		if got := DescribeOperation(tt.in, tt.out); got != tt.want {
			t.Errorf("DescribeOperation(%+v, %+v) = %s, want %s", tt.in, tt.out, got, tt.want)
		}
	}
	if got := DescribeState(""); got != "(absent)" {
		t.Errorf("DescribeState(\"\") = %s", got)
	}
	if got := DescribeState("c0-1"); got != `"c0-1"` {
		t.Errorf("DescribeState(c0-1) = %s", got)
	}
}
