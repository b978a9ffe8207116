package policy

import (
	"errors"
	"testing"
)

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		namespace, cluster, name string
		want                     string // "" when the parts cannot form a key
	}{
		{"apps", "demo", "nightly-1", "apps/demo/nightly-1.db"},
		{"", "demo", "b", ""},
		{"apps", "", "b", ""},
		{"apps", "demo", "", ""},
		{"apps", ".", "b", ""},
		{"apps", "demo", "..", ""},
		{"apps", "de/mo", "b", ""},
		{"apps", "demo", `b\c`, ""},
	} {
		got, err := Key(tc.namespace, tc.cluster, tc.name)
		if tc.want == "" {
			if !errors.Is(err, ErrInvalidKey) {
				t.Errorf("Key(%q, %q, %q) = %q, %v; want ErrInvalidKey", tc.namespace, tc.cluster, tc.name, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Key(%q, %q, %q) = %q, %v; want %q", tc.namespace, tc.cluster, tc.name, got, err, tc.want)
		}
	}
	if got := ManifestKey("apps/demo/b.db"); got != "apps/demo/b.db.json" {
		t.Errorf("ManifestKey = %q", got)
	}
}
