package observe

import (
	"testing"
	"time"
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
