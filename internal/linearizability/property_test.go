package linearizability

import (
	"fmt"
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
	"pgregory.net/rapid"
)

// neverWritten is a value no generated history writes.
const neverWritten = "never-written"

// linearizableHistory draws a history that is linearizable by construction: operations are applied
// one after the other to a map, the i-th at the linearization point 100·i, and each is given an
// interval around its point (so that neighbours overlap) with the result the map gave. Some writes
// have an unknown outcome: applied all the same, returning at math.MaxInt64.
func linearizableHistory(rt *rapid.T) []porcupine.Operation {
	keys := rapid.IntRange(1, 3).Draw(rt, "keys")
	n := rapid.IntRange(1, 60).Draw(rt, "operations")
	store := map[string]string{}
	var ops []porcupine.Operation
	for i := range n {
		key := fmt.Sprintf("k%d", rapid.IntRange(0, keys-1).Draw(rt, "key"))
		point := int64(100 * i)
		op := porcupine.Operation{
			ClientId: i % 4,
			Call:     point - rapid.Int64Range(0, 150).Draw(rt, "before"),
			Return:   point + rapid.Int64Range(0, 150).Draw(rt, "after"),
		}
		in, out := Input{Key: key, Value: fmt.Sprintf("v%d", i)}, Output{}
		switch rapid.IntRange(0, 2).Draw(rt, "kind") {
		case 0:
			in.Kind, in.Value, out.Value = Get, "", store[key]
		case 1:
			in.Kind = Put
			store[key] = in.Value
		default:
			in.Kind = CAS
			// Expect the current value, an absent key or an older value, so that CASes both
			// succeed and fail.
			in.Expected = rapid.SampledFrom([]string{store[key], "", fmt.Sprintf("v%d", max(i-1, 0))}).Draw(rt, "expected")
			out.Succeeded = store[key] == in.Expected
			if out.Succeeded {
				store[key] = in.Value
			}
		}
		if in.Kind != Get && rapid.IntRange(0, 9).Draw(rt, "unknown") == 0 {
			out, op.Return = Output{Unknown: true}, math.MaxInt64
		}
		op.Input, op.Output = in, out
		ops = append(ops, op)
	}
	return ops
}

// TestLinearizableByConstruction: Check says Ok of every history built by applying operations to a
// map in turn, whatever their overlaps and unknown outcomes; and Illegal once one read of it is made
// to return a value no operation wrote.
func TestLinearizableByConstruction(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ops := linearizableHistory(rt)
		res, err := Check(ops, checkTimeout)
		if err != nil {
			rt.Fatalf("Check: %v", err)
		}
		if res.Verdict != porcupine.Ok {
			rt.Fatalf("a history linearizable by construction: %s", res)
		}

		var reads []int
		for i, op := range ops {
			if op.Input.(Input).Kind == Get {
				reads = append(reads, i)
			}
		}
		if len(reads) == 0 {
			return
		}
		i := rapid.SampledFrom(reads).Draw(rt, "mutated read")
		mutated := append([]porcupine.Operation(nil), ops...)
		mutated[i].Output = Output{Value: neverWritten}
		res, err = Check(mutated, checkTimeout)
		if err != nil {
			rt.Fatalf("Check: %v", err)
		}
		if res.Verdict != porcupine.Illegal {
			rt.Fatalf("read %d returns %q, which was never written: %s", i, neverWritten, res)
		}
	})
}
