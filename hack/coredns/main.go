//go:build ignore

// A trimmed CoreDNS for the local cluster: only the plugins a cluster DNS needs, so the build skips the
// cloud SDKs (route53, azure, clouddns, ...). Same approach as CoreDNS's own coredns.go, which imports
// core/plugin.
//
// The `ignore` constraint keeps this file out of the etcd-operator module (its imports are not in our
// go.mod); hack/build-images.sh copies it without that line into a wrapper module that requires
// github.com/coredns/coredns at $COREDNS_VERSION and builds it there.
package main

import (
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/rewrite"
	_ "github.com/coredns/coredns/plugin/template"
	_ "github.com/coredns/coredns/plugin/whoami"

	"github.com/coredns/coredns/coremain"
)

func main() { coremain.Run() }
