package v1alpha1

import (
	"fmt"
	"sort"
	"strings"
)

// reservedFlags are etcd flags the operator sets itself, with what to use instead. A member started with
// another value of one of these would not match its peer URL, its data directory or its TLS files.
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
	"cert-file":                   "TLS files are managed by the operator",
	"key-file":                    "TLS files are managed by the operator",
	"trusted-ca-file":             "TLS files are managed by the operator",
	"client-cert-auth":            "TLS settings are managed by the operator",
	"peer-cert-file":              "TLS files are managed by the operator",
	"peer-key-file":               "TLS files are managed by the operator",
	"peer-trusted-ca-file":        "TLS files are managed by the operator",
	"peer-client-cert-auth":       "TLS settings are managed by the operator",
	"auto-tls":                    "TLS settings are managed by the operator",
	"peer-auto-tls":               "TLS settings are managed by the operator",
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
}

// ReservedFlag reports whether the etcd flag name (without "--") may not be set through
// spec.options.extraArgs, and why.
func ReservedFlag(name string) (reason string, reserved bool) {
	reason, reserved = reservedFlags[strings.TrimLeft(name, "-")]
	return reason, reserved
}

// ValidateExtraArgs returns one message per flag of args the operator sets itself, sorted by flag name;
// none when every flag may be passed through.
func ValidateExtraArgs(args map[string]string) []string {
	var msgs []string
	for k := range args {
		if why, ok := ReservedFlag(k); ok {
			msgs = append(msgs, fmt.Sprintf("spec.options.extraArgs[%q] is set by the operator and cannot be overridden: %s", k, why))
		}
	}
	sort.Strings(msgs)
	return msgs
}
