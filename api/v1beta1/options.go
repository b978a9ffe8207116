package v1beta1

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// reasonTLS is why the TLS flags are refused: a member with TLS settings of its own would not match
// the URL scheme and the certificates its peers, its clients and the operator's probes expect.
const reasonTLS = "the operator manages TLS: use spec.tls"

// reservedFlags are etcd flags the operator sets itself, with what to use instead, and flags that are
// refused because they put the cluster at risk, with why. A member started with another value of one of
// the first would not match its peer URL, its data directory or its TLS files.
var reservedFlags = map[string]string{
	"name":                        "the operator names each member after its pod",
	"data-dir":                    "the operator mounts each member's volume at its data directory",
	"wal-dir":                     "the WAL stays in the member's data directory, on its volume",
	"initial-cluster":             "the operator decides the initial cluster of each member",
	"initial-cluster-state":       "the operator decides the initial cluster state of each member",
	"initial-cluster-token":       "the operator uses the EtcdCluster's UID",
	"initial-advertise-peer-urls": "peer URLs follow the member's DNS name",
	"advertise-client-urls":       "client URLs follow the member's DNS name",
	"listen-peer-urls":            "the operator owns the listeners",
	"listen-client-urls":          "the operator owns the listeners",
	"listen-client-http-urls":     "the operator owns the listeners",
	"listen-metrics-urls":         "the operator's probes use the metrics listener",
	"discovery":                   "members are bootstrapped by the operator, not by discovery",
	"discovery-srv":               "members are bootstrapped by the operator, not by discovery",
	"force-new-cluster":           "it discards the membership; restore a backup instead",
	"cert-file":                   reasonTLS,
	"key-file":                    reasonTLS,
	"trusted-ca-file":             reasonTLS,
	"client-cert-auth":            reasonTLS,
	"peer-cert-file":              reasonTLS,
	"peer-key-file":               reasonTLS,
	"peer-trusted-ca-file":        reasonTLS,
	"peer-client-cert-auth":       reasonTLS,
	"auto-tls":                    reasonTLS,
	"peer-auto-tls":               reasonTLS,
	"config-file":                 "all flags come from the EtcdCluster",
	"unsafe-no-fsync":             "without fsync a crash or power loss can lose acknowledged writes",
	"strict-reconfig-check":       "membership changes must never be accepted without a quorum of started members",
	"quota-backend-bytes":         "use spec.options.quotaBackendBytes",
	"auto-compaction-mode":        "use spec.options.autoCompactionMode",
	"auto-compaction-retention":   "use spec.options.autoCompactionRetention",
	"snapshot-count":              "use spec.options.snapshotCount",
	"heartbeat-interval":          "use spec.options.heartbeatIntervalMillis",
	"election-timeout":            "use spec.options.electionTimeoutMillis",
	"max-request-bytes":           "use spec.options.maxRequestBytes",

	// Not set by the operator, but refused: they put the cluster or its data at risk.
	"max-learners":             "the operator adds members one learner at a time, which etcd's default of 1 enforces",
	"enable-pprof":             "it serves /debug/pprof on the client port, unauthenticated, to every client that reaches it",
	"log-outputs":              "etcd logs to stderr, where kubectl logs and the operator's diagnosis of a failing member read it",
	"enable-log-rotation":      "log rotation needs a log file, and etcd logs to stderr (log-outputs is refused)",
	"log-rotation-config-json": "log rotation needs a log file, and etcd logs to stderr (log-outputs is refused)",
	"proxy":                    "it runs etcd 3.5 as a proxy instead of a member",
	"version":                  "etcd prints its version and exits instead of running the member",
	// The operator relies on etcd's default simple tokens (spec.auth): they need no key files, and
	// its clients authenticate again when a restarted member no longer knows their token. A jwt token
	// needs key files the member pods do not mount, so the members would not start.
	"auth-token": "spec.auth relies on etcd's default simple tokens; a jwt token needs key files the member pods do not mount",

	// The TLS flags besides those above: the operator owns every one of them.
	"client-crl-file":                                reasonTLS,
	"peer-crl-file":                                  reasonTLS,
	"client-cert-file":                               reasonTLS,
	"client-key-file":                                reasonTLS,
	"peer-client-cert-file":                          reasonTLS,
	"peer-client-key-file":                           reasonTLS,
	"self-signed-cert-validity":                      reasonTLS,
	"tls-min-version":                                reasonTLS,
	"tls-max-version":                                reasonTLS,
	"cipher-suites":                                  reasonTLS,
	"peer-cert-allowed-cn":                           reasonTLS,
	"peer-cert-allowed-hostname":                     reasonTLS,
	"client-cert-allowed-hostname":                   reasonTLS,
	"peer-skip-client-san-verification":              reasonTLS,
	"experimental-peer-skip-client-san-verification": reasonTLS,
}

// reservedPrefixes are families of etcd flags, by the start of their names, refused like reservedFlags.
var reservedPrefixes = []struct{ prefix, reason string }{
	{"discovery-", "members are bootstrapped by the operator, not by discovery"},
}

// ReservedFlag reports whether the etcd flag name (without "--") may not be set through
// spec.options.extraArgs, and why.
func ReservedFlag(name string) (reason string, reserved bool) {
	name = strings.TrimLeft(name, "-")
	if reason, reserved = reservedFlags[name]; reserved {
		return reason, true
	}
	for _, f := range reservedPrefixes {
		if strings.HasPrefix(name, f.prefix) {
			return f.reason, true
		}
	}
	return "", false
}

// flagName is an etcd flag name without the leading "--", as the CRD's schema requires of the keys of
// spec.options.extraArgs.
var flagName = regexp.MustCompile(`^[a-z]([a-z0-9-]*[a-z0-9])?$`)

// ExtraArgKeyProblem says what is wrong with key as a key of spec.options.extraArgs; "" when it is an
// etcd flag name.
func ExtraArgKeyProblem(key string) string {
	if flagName.MatchString(key) {
		return ""
	}
	return `must be an etcd flag name without the leading "--" and without "=": lower case letters, digits and '-', such as "log-level" (the value goes on the right of the ':')`
}

// ExtraArgValueProblem says what is wrong with value as a value of spec.options.extraArgs; "" when
// nothing is.
func ExtraArgValueProblem(value string) string {
	for i, r := range value {
		if unicode.IsControl(r) {
			return fmt.Sprintf("contains the control character %s at byte %d: etcd gets the value verbatim in one command-line argument (--flag=value), where a newline, tab or other control character is never meant and etcd may refuse it, so the member would not start; write the value on one line without control characters",
				strconv.QuoteRune(r), i)
		}
	}
	return ""
}

// ValidateExtraArgs returns one message per entry of args that cannot be passed to etcd: a flag that
// ReservedFlag refuses, a key that is not a flag name, a value with a control character. They are
// sorted; none when every flag may be passed through.
func ValidateExtraArgs(args map[string]string) []string {
	var msgs []string
	for k, v := range args {
		if why, ok := ReservedFlag(k); ok {
			msgs = append(msgs, fmt.Sprintf("spec.options.extraArgs[%q] cannot be set through extraArgs: %s", k, why))
			continue
		}
		if problem := ExtraArgKeyProblem(k); problem != "" {
			msgs = append(msgs, fmt.Sprintf("spec.options.extraArgs key %q %s", k, problem))
		}
		if problem := ExtraArgValueProblem(v); problem != "" {
			msgs = append(msgs, fmt.Sprintf("spec.options.extraArgs[%q] %s", k, problem))
		}
	}
	sort.Strings(msgs)
	return msgs
}
