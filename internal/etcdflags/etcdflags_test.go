package etcdflags

import "testing"

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
