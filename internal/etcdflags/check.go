package etcdflags

import (
	"flag"
	"fmt"
	"io"
	"sync"

	"go.etcd.io/etcd/pkg/v3/flags"
	cconfig "go.etcd.io/etcd/server/v3/config"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// checkMu serializes Check: etcd's flag set binds two flags (raft-read-timeout, raft-write-timeout)
// to package variables of its rafthttp package, which registering and parsing the flags writes.
var checkMu sync.Mutex

// Check parses args, etcd command-line flags ("--name=value" each), with the flag set of the etcd
// release the operator is built against (embed.Config.AddFlags of go.etcd.io/etcd/server/v3, plus the
// flags etcdmain adds: v2-deprecation and initial-cluster-state with the values etcdmain accepts, the
// others taken as strings) and validates the configuration they give, every other flag at
// etcd's default, as etcd does before it starts (embed.Config.Validate, which also checks the log
// level and format). It returns etcd's error: a value a flag's type does not parse ("invalid value
// \"x\" for flag -snapshot-count: parse error"), a value etcd refuses ("unrecognized level:
// \"verbose\""), or a combination it refuses (a heartbeat interval above a fifth of the election
// timeout). It returns nil when etcd accepts them, and when minor ("3.6") is not the minor of that
// release: another minor's flags and rules differ. Values etcd reads only as it starts serving (the
// retention of auto-compaction, TLS files, URLs it binds) are not checked.
func Check(minor string, args []string) (err error) {
	if minor != generatedMinor {
		return nil
	}
	checkMu.Lock()
	defer checkMu.Unlock()
	cfg := embed.NewConfig()
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.AddFlags(fs)
	// etcdmain's own flags that take a value from a set (server/etcdmain/config.go, newConfig)
	fs.Var(flags.NewSelectiveStringsValue(string(cconfig.V2Depr1WriteOnly), string(cconfig.V2Depr1WriteOnlySkipCheck),
		string(cconfig.V2Depr1WriteOnlyDrop), string(cconfig.V2Depr2Gone)), "v2-deprecation", "")
	fs.Var(flags.NewSelectiveStringValue(embed.ClusterStateFlagNew, embed.ClusterStateFlagExisting), "initial-cluster-state", "")
	for name := range generated {
		if fs.Lookup(name) == nil {
			fs.String(name, "", "") // etcdmain's own flags, and the etcd 2 flags it ignores
		}
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%q is not a flag", fs.Arg(0))
	}
	fs.Visit(func(f *flag.Flag) { cfg.FlagsExplicitlySet[f.Name] = true })
	// etcd's logger would write Validate's warnings to the operator's log
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	defer func() {
		// etcd panics on a log level it does not know (logutil.ConvertToZapLevel)
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return cfg.Validate()
}
