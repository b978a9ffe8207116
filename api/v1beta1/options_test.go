package v1beta1_test

import (
	"slices"
	"testing"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
)

// TestValidateExtraArgs: what the operator refuses to pass to etcd even when the webhook did not see
// the object (the controller reports it instead of rolling a member that would not start): reserved
// flags, keys that are not flag names, values with control characters; one message each, sorted.
func TestValidateExtraArgs(t *testing.T) {
	got := etcdv1beta1.ValidateExtraArgs(map[string]string{
		"log-level":        "debug\n",
		"log level":        "debug",
		"enable-pprof":     "true",
		"max-wals":         "5",
		"auto-compaction":  "ok",
		"discovery-token":  "t\x7f",
		"experimental-foo": "\u0085",
	})
	want := []string{
		`spec.options.extraArgs key "log level" must be an etcd flag name without the leading "--" and without "=": lower case letters, digits and '-', such as "log-level" (the value goes on the right of the ':')`,
		`spec.options.extraArgs["discovery-token"] cannot be set through extraArgs: members are bootstrapped by the operator, not by discovery`,
		`spec.options.extraArgs["enable-pprof"] cannot be set through extraArgs: it serves /debug/pprof on the client port, unauthenticated, to every client that reaches it`,
		`spec.options.extraArgs["experimental-foo"] contains the control character '\u0085' at byte 0: etcd gets the value verbatim in one command-line argument (--flag=value), where a newline, tab or other control character is never meant and etcd may refuse it, so the member would not start; write the value on one line without control characters`,
		`spec.options.extraArgs["log-level"] contains the control character '\n' at byte 5: etcd gets the value verbatim in one command-line argument (--flag=value), where a newline, tab or other control character is never meant and etcd may refuse it, so the member would not start; write the value on one line without control characters`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("ValidateExtraArgs =\n%q\nwant\n%q", got, want)
	}
	if got := etcdv1beta1.ValidateExtraArgs(map[string]string{"log-level": "debug", "max-wals": "5"}); len(got) != 0 {
		t.Errorf("valid flags refused: %q", got)
	}
}
