// Package version holds etcd's upgrade policy as pure functions: which version changes a running
// cluster may make, per https://etcd.io/docs/v3.6/upgrades/ ("patch upgrade" and "minor upgrade, one
// minor at a time") and the v3.5 → v3.6 checklist (every member on 3.5.26 or later first).
package version

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Version is an etcd server version major.minor.patch.
type Version struct {
	Major, Minor, Patch int
}

// String returns "major.minor.patch".
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// MinorString returns "major.minor".
func (v Version) MinorString() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Compare returns -1, 0 or 1 as v is older than, equal to or newer than w.
func (v Version) Compare(w Version) int {
	for _, d := range [3]int{v.Major - w.Major, v.Minor - w.Minor, v.Patch - w.Patch} {
		if d < 0 {
			return -1
		}
		if d > 0 {
			return 1
		}
	}
	return 0
}

// Parse reads "3.6.16" (a leading "v" is accepted, as etcd's version endpoint and image tags use it).
// It returns an error naming the expected shape for anything else.
func Parse(s string) (Version, error) {
	parts := strings.Split(strings.TrimPrefix(s, "v"), ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("version %q is not of the form major.minor.patch, such as 3.6.16", s)
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 || (len(p) > 1 && p[0] == '0') {
			return Version{}, fmt.Errorf("version %q is not of the form major.minor.patch, such as 3.6.16", s)
		}
		n[i] = x
	}
	return Version{n[0], n[1], n[2]}, nil
}

// Supported are the etcd minors the operator runs, oldest first.
var Supported = []string{"3.5", "3.6"}

// minimumBefore is, for a minor upgrade to the key minor, the oldest patch of the previous minor that
// may start it. etcd's v3.6 upgrade checklist: "make sure that all of your 3.5 members are updated to
// 3.5.26 or later" (3.5.24–3.5.26 fix upgrade blockers such as "too many learner members").
var minimumBefore = map[string]Version{"3.6": {3, 5, 26}}

// ErrDowngrade, ErrSkippedMinor, ErrUnsupported and ErrPatchTooOld classify a refused change.
var (
	ErrDowngrade    = errors.New("downgrade")
	ErrSkippedMinor = errors.New("skipped minor")
	ErrUnsupported  = errors.New("unsupported version")
	ErrPatchTooOld  = errors.New("patch too old to upgrade from")
)

// IsSupported reports whether v's minor is one the operator runs.
func IsSupported(v Version) bool {
	for _, m := range Supported {
		if v.MinorString() == m {
			return true
		}
	}
	return false
}

// CheckUpgrade returns nil when a cluster running from may be changed to run to, and otherwise an
// error that wraps ErrDowngrade, ErrSkippedMinor, ErrUnsupported or ErrPatchTooOld and whose message
// names the allowed path. from is what the members run now (the oldest member's version); equal
// versions are allowed.
func CheckUpgrade(from, to string) error {
	f, err := Parse(from)
	if err != nil {
		return err
	}
	t, err := Parse(to)
	if err != nil {
		return err
	}
	if !IsSupported(t) {
		return fmt.Errorf("%w: etcd %s is not supported; supported minors are %s", ErrUnsupported, t, strings.Join(Supported, ", "))
	}
	switch c := t.Compare(f); {
	case c == 0:
		return nil
	case c < 0:
		return fmt.Errorf("%w: the members run etcd %s and etcd cannot be downgraded to %s in place; "+
			"allowed: a newer %s patch or the next minor; to go back, restore a backup into a new cluster",
			ErrDowngrade, f, t, f.MinorString())
	case t.Major != f.Major || t.Minor > f.Minor+1:
		next := Version{f.Major, f.Minor + 1, 0}
		return fmt.Errorf("%w: etcd upgrades one minor at a time; the members run %s, so upgrade to a %s release first, then to %s",
			ErrSkippedMinor, f, next.MinorString(), t)
	case t.Minor == f.Minor+1:
		if min, ok := minimumBefore[t.MinorString()]; ok && f.Compare(min) < 0 {
			return fmt.Errorf("%w: upgrading to %s needs every member on %s or later first (etcd's upgrade checklist); "+
				"the members run %s, so upgrade to %s.x (x ≥ %d) first", ErrPatchTooOld, t.MinorString(), min, f, min.MinorString(), min.Patch)
		}
	}
	return nil
}

// CheckRestore returns nil when a cluster running clusterVersion may restore a snapshot taken from
// etcd snapshotVersion: the same minor (any patch), or the next minor, as for an upgrade. An older
// minor would have to read a newer storage format: refused with an error wrapping ErrDowngrade. An
// empty snapshotVersion (unknown) is allowed.
func CheckRestore(snapshotVersion, clusterVersion string) error {
	if snapshotVersion == "" {
		return nil
	}
	sv, err := Parse(snapshotVersion)
	if err != nil {
		return err
	}
	cv, err := Parse(clusterVersion)
	if err != nil {
		return err
	}
	if sv.Major == cv.Major && sv.Minor == cv.Minor {
		return nil
	}
	if err := CheckUpgrade(snapshotVersion, clusterVersion); err != nil {
		return fmt.Errorf("the snapshot was taken from etcd %s and cannot be restored by %s: %w", snapshotVersion, clusterVersion, err)
	}
	return nil
}

// Less reports whether version a is older than version b, comparing major, minor and patch as numbers
// ("3.6.9" is older than "3.6.16"); a version Parse refuses is compared as a string, after every
// version it accepts.
func Less(a, b string) bool {
	va, errA := Parse(a)
	vb, errB := Parse(b)
	switch {
	case errA == nil && errB == nil:
		return va.Compare(vb) < 0
	case errA == nil || errB == nil:
		return errA == nil
	default:
		return a < b
	}
}
