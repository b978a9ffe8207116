//go:build e2e

package e2e

import "sync/atomic"

// BenchmarkSideBySide (sidebyside_test.go) measures operations on a real cluster, the floor and this
// operator side by side, and writes them for the README's table. Run it with `make bench`
// (-benchtime=1x: each iteration is every run of every operation).

// benchRuns numbers the clusters of the benchmarks: the testing package may call a benchmark function
// more than once (b.N = 1 first, then the -benchtime count), and a namespace of the call before may
// still be terminating.
var benchRuns atomic.Int32
