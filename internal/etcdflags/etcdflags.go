// Package etcdflags tells whether a name is a command-line flag of etcd's server, from the flag set of
// the etcd release the operator is built against (zz_generated.flags.go, written by hack/etcdflags
// from go.etcd.io/etcd/server/v3's embed.Config.AddFlags and etcdmain's own flags).
package etcdflags

// Minor is the etcd minor ("3.6") whose flags the package holds.
func Minor() string { return generatedMinor }

// Known reports whether name (without the leading "--") is a flag the etcd server of minor ("3.6")
// accepts. checked is false when the package holds no list for that minor (etcd 3.5), and then known
// is true: the caller cannot tell.
func Known(minor, name string) (known, checked bool) {
	if minor != generatedMinor {
		return true, false
	}
	return generated[name], true
}

// Ignored are the flags of etcd 2 that etcdmain (server/etcdmain/config.go, newConfig) still accepts
// and ignores: it logs that it ignores them, so a flag set through one of them has no effect.
var Ignored = []string{
	"cluster-active-size", "cluster-remove-delay", "cluster-sync-interval", "config", "force",
	"max-result-buffer", "max-retry-attempts", "peer-heartbeat-interval", "peer-election-timeout",
	"retry-interval", "snapshot", "v", "vv",
}
