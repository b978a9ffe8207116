package linearizability

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
)

// Result is what Check found.
type Result struct {
	// Verdict is porcupine.Ok when the history is linearizable, porcupine.Illegal when it is not,
	// porcupine.Unknown when the timeout ended the search first.
	Verdict porcupine.CheckResult
	// Operations is how many operations the history has.
	Operations int
	// Unknown is how many of them have an unknown outcome.
	Unknown int
	// Keys is how many keys (porcupine partitions) the history touches.
	Keys int
	// Duration is how long porcupine's search took (the first one, without the visualization's).
	Duration time.Duration
	// Visualization is the path of the HTML visualization Check wrote, "" when it wrote none.
	Visualization string
}

// String summarises the result in one line, e.g. "Ok: 812 operations (9 of unknown outcome) on 5
// keys, checked in 41ms".
func (r Result) String() string {
	s := fmt.Sprintf("%s: %d operations (%d of unknown outcome) on %d keys, checked in %s",
		r.Verdict, r.Operations, r.Unknown, r.Keys, r.Duration.Round(time.Millisecond))
	if r.Visualization != "" {
		s += "; visualization in " + r.Visualization
	}
	return s
}

// CheckOption changes what Check does besides deciding.
type CheckOption func(*checkOptions)

// checkOptions is what the CheckOptions of one Check set.
type checkOptions struct {
	visualization string
}

// WithVisualization makes Check write porcupine's HTML visualization of an Illegal history (its
// longest partial linearizations and where they fail) to path, creating or truncating the file.
func WithVisualization(path string) CheckOption {
	return func(o *checkOptions) { o.visualization = path }
}

// Check decides whether ops, a history of this package's operations (as Recorder.Operations returns
// them, or built by hand), is linearizable under Model. The timeout bounds porcupine's search (0
// means none): when it runs out, Result.Verdict is porcupine.Unknown. The error is that of an
// operation whose Input or Output is not this package's (nothing is checked then), or of writing the
// visualization (the Result is still valid). With WithVisualization, an Illegal history is searched a
// second time, with the same timeout, to collect what the visualization shows.
func Check(ops []porcupine.Operation, timeout time.Duration, opts ...CheckOption) (Result, error) {
	var o checkOptions
	for _, opt := range opts {
		opt(&o)
	}
	res := Result{Operations: len(ops)}
	keys := map[string]bool{}
	for i, op := range ops {
		in, okIn := op.Input.(Input)
		out, okOut := op.Output.(Output)
		if !okIn || !okOut {
			return res, fmt.Errorf("linearizability: operation %d has input %T and output %T, want Input and Output", i, op.Input, op.Output)
		}
		if op.Return < op.Call {
			return res, fmt.Errorf("linearizability: operation %d (%s) returns at %d before its call at %d", i, DescribeOperation(in, out), op.Return, op.Call)
		}
		keys[in.Key] = true
		if out.Unknown {
			res.Unknown++
		}
	}
	res.Keys = len(keys)
	model := Model()
	start := time.Now()
	res.Verdict = porcupine.CheckOperationsTimeout(model, ops, timeout)
	res.Duration = time.Since(start)
	if res.Verdict != porcupine.Illegal || o.visualization == "" {
		return res, nil
	}
	_, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	if err := porcupine.VisualizePath(model, info, o.visualization); err != nil {
		return res, fmt.Errorf("linearizability: write the visualization of the illegal history to %s: %w", o.visualization, err)
	}
	res.Visualization = o.visualization
	return res, nil
}
