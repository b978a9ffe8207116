package observe

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcdkit/etcd-operator/internal/etcd"
)

// TestClock: Last returns what Done recorded for a cluster, nothing for another or after Forget.
func TestClock(t *testing.T) {
	var c Clock
	if _, _, ran := c.Last("a"); ran {
		t.Fatal("a zero Clock says a check ran")
	}
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	c.Done("a", at, "a-0=x")
	if got, covered, ran := c.Last("a"); !ran || !got.Equal(at) || covered != "a-0=x" {
		t.Errorf("Last(a) = %s, %q, %v; want %s, %q, true", got, covered, ran, at, "a-0=x")
	}
	if _, _, ran := c.Last("b"); ran {
		t.Error("Last(b) says a check of b ran")
	}
	c.Forget("a")
	if _, _, ran := c.Last("a"); ran {
		t.Error("Last(a) after Forget says a check ran")
	}
}

// hashStub answers HashKV by endpoint: "slow" until the call's context ends, "broken" with an error at
// once, any other with a hash.
type hashStub struct{ etcd.Client }

func (hashStub) HashKV(ctx context.Context, endpoint string, rev int64) (etcd.KVHash, error) {
	switch endpoint {
	case "slow":
		<-ctx.Done()
		return etcd.KVHash{}, ctx.Err()
	case "broken":
		return etcd.KVHash{}, errors.New("connection refused")
	}
	return etcd.KVHash{Hash: 7, HashRevision: rev}, nil
}

// TestHashesTimedOut: Hashes returns the members that answered, and says whether a call ran out of
// time (a store too large to hash in time), which a failing member does not.
func TestHashesTimedOut(t *testing.T) {
	for _, tc := range []struct {
		name      string
		endpoints map[string]string
		timedOut  bool
	}{
		{"all answer", map[string]string{"a-0": "a", "a-1": "b"}, false},
		{"one fails at once", map[string]string{"a-0": "a", "a-1": "broken"}, false},
		{"one runs out of time", map[string]string{"a-0": "a", "a-1": "slow"}, true},
	} {
		hashes, timedOut := Hashes(context.Background(), hashStub{}, 5, tc.endpoints, 50*time.Millisecond)
		if timedOut != tc.timedOut {
			t.Errorf("%s: timedOut %v, want %v", tc.name, timedOut, tc.timedOut)
		}
		if _, ok := hashes["a-0"]; !ok || len(hashes) != 1 && tc.name != "all answer" {
			t.Errorf("%s: hashes %v, want a-0's (and a-1's only when it answers)", tc.name, hashes)
		}
	}
}
