package version

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckUpgrade(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     error // nil: allowed
		mention  string
	}{
		{"3.6.16", "3.6.16", nil, ""},
		{"3.6.15", "3.6.16", nil, ""},
		{"3.5.35", "3.6.16", nil, ""},
		{"3.5.26", "3.6.0", nil, ""},
		{"v3.5.26", "3.6.0", nil, ""},
		{"3.5.25", "3.6.16", ErrPatchTooOld, "3.5.26"},
		{"3.6.16", "3.6.15", ErrDowngrade, "cannot be downgraded"},
		{"3.6.16", "3.5.35", ErrDowngrade, "restore a backup"}, // C09 downgrade
		{"3.4.30", "3.6.16", ErrSkippedMinor, "upgrade to a 3.5 release first"},
		{"3.5.35", "3.7.0", ErrUnsupported, "supported minors are 3.5, 3.6"},
		{"3.6.0", "4.0.0", ErrUnsupported, ""},
		{"3.6.x", "3.6.1", nil, "major.minor.patch"},
		{"3.6.1", "3.06.1", nil, "major.minor.patch"},
	} {
		err := CheckUpgrade(tc.from, tc.to)
		switch {
		case tc.want == nil && tc.mention == "":
			if err != nil {
				t.Errorf("%s -> %s: %v, want allowed", tc.from, tc.to, err)
			}
		case tc.want == nil:
			if err == nil || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("%s -> %s: %v, want a parse error mentioning %q", tc.from, tc.to, err, tc.mention)
			}
		default:
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("%s -> %s: %v, want %v mentioning %q", tc.from, tc.to, err, tc.want, tc.mention)
			}
		}
	}
}

func TestCompare(t *testing.T) {
	a, _ := Parse("3.5.35")
	b, _ := Parse("3.6.0")
	if a.Compare(b) != -1 || b.Compare(a) != 1 || a.Compare(a) != 0 {
		t.Fatalf("Compare(%v,%v) wrong", a, b)
	}
}

func TestCheckRestore(t *testing.T) {
	for _, tc := range []struct {
		snap, cluster string
		ok            bool
	}{
		{"3.6.16", "3.6.16", true},
		{"3.6.16", "3.6.10", true}, // same minor, older patch: same storage format
		{"3.5.35", "3.6.16", true},
		{"", "3.6.16", true},
		{"3.6.16", "3.5.35", false},
		{"3.4.30", "3.6.16", false},
	} {
		if err := CheckRestore(tc.snap, tc.cluster); (err == nil) != tc.ok {
			t.Errorf("CheckRestore(%q, %q) = %v, want ok=%v", tc.snap, tc.cluster, err, tc.ok)
		}
	}
}

// TestLess: versions compare by number, not by text; what Parse refuses sorts after what it accepts.
func TestLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		less bool
	}{
		{"3.5.21", "3.6.0", true},
		{"3.6.9", "3.6.16", true},
		{"3.6.16", "3.6.9", false},
		{"3.6.16", "3.6.16", false},
		{"v3.6.1", "3.6.2", true},
		{"3.6.16", "garbage", true},
		{"garbage", "3.6.16", false},
		{"a", "b", true},
	} {
		if got := Less(tc.a, tc.b); got != tc.less {
			t.Errorf("Less(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.less)
		}
	}
}
