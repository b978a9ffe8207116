package etcdflags

import (
	"strings"
	"testing"
)

// TestKnown: flags of etcd's server, etcdmain's own and the etcd 2 flags it ignores are known to 3.6;
// a typo is not; another minor is not checked.
func TestKnown(t *testing.T) {
	for name, want := range map[string]bool{
		"log-level": true, "experimental-compact-hash-check-enabled": true, "feature-gates": true,
		"initial-cluster-state": true, "config-file": true, "version": true, "peer-election-timeout": true,
		"log-levle": false, "proxy-dial-timeout": false, "": false,
	} {
		known, checked := Known("3.6", name)
		if known != want || !checked {
			t.Errorf("Known(3.6, %q) = %v, %v; want %v, true", name, known, checked, want)
		}
	}
	if known, checked := Known("3.5", "log-levle"); !known || checked {
		t.Errorf("Known(3.5, log-levle) = %v, %v; want true, false: no list of 3.5's flags", known, checked)
	}
	if Minor() != "3.6" {
		t.Errorf("Minor() = %q, want 3.6 (go.mod's go.etcd.io/etcd/server/v3)", Minor())
	}
}

// TestCheck: etcd's own flag set and validation refuse a value a flag's type does not parse, a log
// level or format etcd does not know, and a heartbeat interval above a fifth of the election timeout;
// they accept valid values, etcdmain's own flags, and anything for another minor.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // a part of the error, "" for none
	}{
		{[]string{"--log-level=debug", "--snapshot-count=5000", "--experimental-compact-hash-check-enabled=true"}, ""},
		{[]string{"--heartbeat-interval=100", "--election-timeout=1000"}, ""},
		{[]string{"--v2-deprecation=write-only"}, ""},
		{[]string{"--log-level=verbose"}, `unrecognized level: "verbose"`},
		{[]string{"--log-format=xml"}, "xml"},
		{[]string{"--snapshot-count=many"}, `invalid value "many" for flag -snapshot-count`},
		{[]string{"--max-txn-ops=-1"}, `invalid value "-1" for flag -max-txn-ops`},
		{[]string{"--heartbeat-interval=500"}, "should be at least as 5 times as --heartbeat-interval"},
		{[]string{"--auto-compaction-mode=hourly"}, `unknown auto-compaction-mode "hourly"`},
		{[]string{"--feature-gates=NoSuchGate=true"}, "NoSuchGate"},
		{[]string{"--log-levle=debug"}, "flag provided but not defined: -log-levle"},
		{[]string{"stray"}, `"stray" is not a flag`},
		{[]string{"--v2-deprecation=bogus"}, `invalid value "bogus" for flag -v2-deprecation`},
		{[]string{"--v2-deprecation=not-yet"}, `invalid value "not-yet" for flag -v2-deprecation`},
		{[]string{"--v2-deprecation=write-only-drop-data"}, ""},
	} {
		err := Check("3.6", tc.args)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Check(3.6, %q) = %v, want nil", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Check(3.6, %q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	if err := Check("3.5", []string{"--log-level=verbose"}); err != nil {
		t.Errorf("Check(3.5, …) = %v, want nil: another minor is not checked", err)
	}
}
