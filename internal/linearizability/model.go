// Package linearizability records histories of concurrent etcd client operations (puts, linearizable
// reads and compare-and-swap transactions) and checks them for linearizability with porcupine: a
// Recorder wraps the calls and timestamps them, RunClients drives a random workload through several
// clients, Model is the sequential specification of a key-value store partitioned by key, and Check
// decides whether a history is linearizable. It is the oracle of the chaos tests, which inject faults
// into a cluster while clients write.
//
// An operation whose outcome is unknown (the call returned an error after the request may have been
// sent: a timeout, a broken connection, a refusal) is kept in the history with its return time at the
// end of time (math.MaxInt64) and an Output whose Unknown is set: the checker may then place it
// anywhere after its call, including after every other operation, which is the same as never having
// taken effect. Reads that returned an error are not recorded, as they changed nothing.
package linearizability

import (
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/anishathalye/porcupine"
)

// Kind is the kind of an operation.
type Kind uint8

const (
	// Put writes Input.Value to Input.Key.
	Put Kind = iota + 1
	// Get reads Input.Key with a linearizable read; Output.Value is the value read, "" when the key
	// is absent.
	Get
	// CAS writes Input.Value to Input.Key in one transaction if the key's value is Input.Expected
	// ("" meaning the key is absent); Output.Succeeded says whether it did.
	CAS
)

// String is the kind's name in lower case.
func (k Kind) String() string {
	switch k {
	case Put:
		return "put"
	case Get:
		return "get"
	case CAS:
		return "cas"
	default:
		return "kind(" + strconv.Itoa(int(k)) + ")"
	}
}

// Input is the Input of a porcupine.Operation of this package: what the client asked for.
type Input struct {
	Kind Kind
	Key  string
	// Value is the value a Put or CAS writes; never "", which stands for an absent key.
	Value string
	// Expected is the value a CAS compares with; "" means that the key must be absent.
	Expected string
}

// Output is the Output of a porcupine.Operation of this package: what the client was told.
type Output struct {
	// Value is the value a Get read, "" when the key was absent.
	Value string
	// Succeeded says whether a CAS's comparison held and its write was applied.
	Succeeded bool
	// Unknown says that the call returned an error after the request may have reached the cluster,
	// so it may or may not have taken effect; the operation's Return is then math.MaxInt64.
	Unknown bool
}

// Model returns the porcupine model of an etcd key space: a history is split into one partition per
// key, the state of a partition is the key's value ("" when absent), and an operation of unknown
// outcome is accepted with whichever result its place in the order gives. Its operations' Input and
// Output must be this package's Input and Output (Check verifies that first).
func Model() porcupine.Model {
	return porcupine.Model{
		Partition:         partition,
		PartitionEvent:    partitionEvents,
		Init:              func() any { return "" },
		Step:              step,
		Equal:             func(a, b any) bool { return a.(string) == b.(string) },
		Hash:              hashState,
		DescribeOperation: DescribeOperation,
		DescribeState:     DescribeState,
	}
}

// step applies in to the key's value state and says whether out is what a store in that state could
// have answered, with the value that follows.
func step(state, input, output any) (bool, any) {
	value, in, out := state.(string), input.(Input), output.(Output)
	switch in.Kind {
	case Put:
		return true, in.Value
	case Get:
		return out.Unknown || out.Value == value, value
	case CAS:
		holds := value == in.Expected
		if !out.Unknown && out.Succeeded != holds {
			return false, value
		}
		if holds {
			return true, in.Value
		}
		return true, value
	default:
		return false, value
	}
}

// partition splits a history of operations into one history per key, in the order of their first
// operation.
func partition(history []porcupine.Operation) [][]porcupine.Operation {
	index := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range history {
		key := op.Input.(Input).Key
		i, ok := index[key]
		if !ok {
			i = len(parts)
			index[key] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

// partitionEvents is partition for a history of call and return events: a return event goes with
// the key of the call event of the same Id.
func partitionEvents(history []porcupine.Event) [][]porcupine.Event {
	keyOf := map[int]string{}
	for _, ev := range history {
		if ev.Kind == porcupine.CallEvent {
			keyOf[ev.Id] = ev.Value.(Input).Key
		}
	}
	index := map[string]int{}
	var parts [][]porcupine.Event
	for _, ev := range history {
		key := keyOf[ev.Id]
		i, ok := index[key]
		if !ok {
			i = len(parts)
			index[key] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], ev)
	}
	return parts
}

// hashState is the FNV-1a hash of a key's value.
func hashState(state any) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(state.(string)))
	return h.Sum64()
}

// DescribeOperation describes an operation for porcupine's visualization, e.g. `get k1 → "c0-3"`,
// `cas k1 "c0-3"→"c1-7" → ok` or `put k1 "c2-1" → ?` when its outcome is unknown.
func DescribeOperation(input, output any) string {
	in, out := input.(Input), output.(Output)
	var desc string
	switch in.Kind {
	case Get:
		desc = fmt.Sprintf("get %s", in.Key)
	case Put:
		desc = fmt.Sprintf("put %s %q", in.Key, in.Value)
	case CAS:
		desc = fmt.Sprintf("cas %s %s→%q", in.Key, describeValue(in.Expected), in.Value)
	default:
		desc = fmt.Sprintf("%s %s", in.Kind, in.Key)
	}
	switch {
	case out.Unknown:
		return desc + " → ?"
	case in.Kind == Get:
		return desc + " → " + describeValue(out.Value)
	case in.Kind == CAS && out.Succeeded:
		return desc + " → ok"
	case in.Kind == CAS:
		return desc + " → failed"
	default:
		return desc + " → ok"
	}
}

// DescribeState describes a key's value for porcupine's visualization: the quoted value, or
// "(absent)".
func DescribeState(state any) string {
	return describeValue(state.(string))
}

// describeValue quotes a value, or says "(absent)" for "".
func describeValue(v string) string {
	if v == "" {
		return "(absent)"
	}
	return strconv.Quote(v)
}
