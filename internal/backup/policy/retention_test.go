package policy

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)

// ago is a completion time d before t0.
func ago(d time.Duration) time.Time { return t0.Add(-d) }

func TestPrune(t *testing.T) {
	h := time.Hour
	ok := func(name string, d time.Duration) BackupInfo {
		return BackupInfo{Name: name, CompletionTime: ago(d), Succeeded: true}
	}
	fail := func(name string, d time.Duration) BackupInfo { return BackupInfo{Name: name, CompletionTime: ago(d)} }
	running := func(name string) BackupInfo { return BackupInfo{Name: name} }

	cases := []struct {
		name    string
		backups []BackupInfo
		policy  Retention
		want    string // names deleted, oldest first
	}{
		{"no policy keeps everything", []BackupInfo{ok("a", 100*h), fail("b", 50*h), ok("c", h)}, Retention{}, ""},
		{"nothing to prune", nil, Retention{MaxCount: 1, MaxAge: h}, ""},
		{"count keeps the newest", []BackupInfo{ok("a", 4*h), ok("b", 3*h), ok("c", 2*h), ok("d", h)}, Retention{MaxCount: 2}, "a,b"},
		{"count 1", []BackupInfo{ok("a", 4*h), ok("b", 3*h)}, Retention{MaxCount: 1}, "a"},
		{"input order does not matter", []BackupInfo{ok("d", h), ok("a", 4*h), ok("c", 2*h), ok("b", 3*h)}, Retention{MaxCount: 2}, "a,b"},
		{"age", []BackupInfo{ok("a", 30*h), ok("b", 25*h), ok("c", 23*h), ok("d", h)}, Retention{MaxAge: 24 * h}, "a,b"},
		{"exactly max age is kept", []BackupInfo{ok("a", 24*h), ok("b", h)}, Retention{MaxAge: 24 * h}, ""},
		{"newest success survives age", []BackupInfo{ok("a", 72*h), ok("b", 48*h)}, Retention{MaxAge: 24 * h}, "a"},
		{"newest success survives age, failures after it do not", []BackupInfo{ok("a", 72*h), fail("b", 48*h), fail("c", 30*h)}, Retention{MaxAge: 24 * h}, "b,c"},
		{"failures are counted apart", []BackupInfo{ok("a", 5*h), fail("b", 4*h), fail("c", 3*h), fail("d", 2*h), ok("e", h)}, Retention{MaxCount: 2}, "b"},
		{"failures never protect", []BackupInfo{fail("a", 3*h), fail("b", 2*h)}, Retention{MaxCount: 1}, "a"},
		{"only failures, all too old", []BackupInfo{fail("a", 30*h), fail("b", 25*h)}, Retention{MaxAge: 24 * h}, "a,b"},
		{"in progress is never deleted or counted", []BackupInfo{running("r"), ok("a", 3*h), ok("b", 2*h), running("s")}, Retention{MaxCount: 1, MaxAge: time.Minute}, "a"},
		{"both limits", []BackupInfo{ok("a", 50*h), ok("b", 20*h), ok("c", 10*h), ok("d", 5*h), ok("e", h)}, Retention{MaxCount: 3, MaxAge: 24 * h}, "a,b"},
		{"equal times: name decides", []BackupInfo{ok("b", h), ok("a", h), ok("c", h)}, Retention{MaxCount: 1}, "a,b"},
		{"completed in the future (clock skew) is newest", []BackupInfo{ok("a", h), ok("f", -h)}, Retention{MaxCount: 1}, "a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := strings.Join(Prune(c.backups, c.policy, t0), ",")
			if got != c.want {
				t.Errorf("Prune = %q, want %q", got, c.want)
			}
		})
	}
}

func genBackups(t *rapid.T) []BackupInfo {
	n := rapid.IntRange(0, 30).Draw(t, "n")
	out := make([]BackupInfo, n)
	for i := range out {
		b := BackupInfo{Name: fmt.Sprintf("b%02d", i)}
		if !rapid.Bool().Draw(t, "inProgress") || i%5 != 0 {
			// minutes before t0, coarse so that ties happen
			b.CompletionTime = ago(time.Duration(rapid.IntRange(-10, 200).Draw(t, "age")) * 10 * time.Minute)
			b.Succeeded = rapid.Bool().Draw(t, "succeeded")
		}
		out[i] = b
	}
	return out
}

func TestPruneProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		backups := genBackups(t)
		p := Retention{
			MaxCount: rapid.IntRange(0, 6).Draw(t, "maxCount"),
			MaxAge:   time.Duration(rapid.IntRange(0, 40).Draw(t, "maxAgeHours")) * time.Hour / 2,
		}
		del := Prune(backups, p, t0)
		deleted := map[string]bool{}
		for _, n := range del {
			if deleted[n] {
				t.Fatalf("%s deleted twice", n)
			}
			deleted[n] = true
		}
		byName := map[string]BackupInfo{}
		for _, b := range backups {
			byName[b.Name] = b
		}
		var newest *BackupInfo
		for i, b := range backups {
			if b.Succeeded && (newest == nil || b.CompletionTime.After(newest.CompletionTime) ||
				(b.CompletionTime.Equal(newest.CompletionTime) && b.Name > newest.Name)) {
				newest = &backups[i]
			}
		}
		for _, n := range del {
			b, ok := byName[n]
			if !ok {
				t.Fatalf("deleted %s, which does not exist", n)
			}
			if b.CompletionTime.IsZero() {
				t.Fatalf("deleted %s, which is in progress", n)
			}
		}
		if newest != nil && deleted[newest.Name] {
			t.Fatalf("deleted the newest successful backup %s", newest.Name)
		}
		if p.MaxCount == 0 && p.MaxAge == 0 && len(del) > 0 {
			t.Fatalf("no policy, yet deleted %v", del)
		}
		// oldest first
		for i := 1; i < len(del); i++ {
			if byName[del[i]].CompletionTime.Before(byName[del[i-1]].CompletionTime) {
				t.Fatalf("not oldest first: %v", del)
			}
		}
		var kept []BackupInfo
		var keptOK, keptFailed int
		for _, b := range backups {
			if deleted[b.Name] {
				continue
			}
			kept = append(kept, b)
			if b.CompletionTime.IsZero() {
				continue
			}
			if b.Succeeded {
				keptOK++
			} else {
				keptFailed++
			}
			if p.MaxAge > 0 && t0.Sub(b.CompletionTime) > p.MaxAge && (newest == nil || b.Name != newest.Name) {
				t.Fatalf("kept %s, older than %s", b.Name, p.MaxAge)
			}
		}
		if p.MaxCount > 0 && (keptOK > p.MaxCount || keptFailed > p.MaxCount) {
			t.Fatalf("kept %d successful and %d failed backups, max %d", keptOK, keptFailed, p.MaxCount)
		}
		// Minimal: a deleted backup would have been within both limits had it been kept.
		for _, n := range del {
			b := byName[n]
			tooOld := p.MaxAge > 0 && t0.Sub(b.CompletionTime) > p.MaxAge
			newer := 0
			for _, o := range backups {
				if o.Succeeded == b.Succeeded && !o.CompletionTime.IsZero() &&
					(o.CompletionTime.After(b.CompletionTime) || (o.CompletionTime.Equal(b.CompletionTime) && o.Name > b.Name)) {
					newer++
				}
			}
			if !tooOld && (p.MaxCount <= 0 || newer < p.MaxCount) {
				t.Fatalf("deleted %s although it is within both limits (%d newer of its kind)", n, newer)
			}
		}
		// Idempotent.
		if again := Prune(kept, p, t0); len(again) > 0 {
			t.Fatalf("pruning what was kept deletes %v", again)
		}
		// Order of the input does not matter.
		rev := slices.Clone(backups)
		slices.Reverse(rev)
		if got := Prune(rev, p, t0); !slices.Equal(got, del) {
			t.Fatalf("reversed input: %v, want %v", got, del)
		}
	})
}
