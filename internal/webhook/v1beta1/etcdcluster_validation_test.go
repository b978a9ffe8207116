package v1beta1

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// cluster returns a valid cluster demo/ns1 (3 members, etcd 3.6.16, 1Gi claims) with opts applied.
func cluster(opts ...testutil.ClusterOption) *etcdv1beta1.EtcdCluster {
	valid := []testutil.ClusterOption{
		testutil.InNamespace("ns1"),
		testutil.WithReplicas(3),
		testutil.WithVersion("3.6.16"),
		testutil.WithStorageSize("1Gi"),
		testutil.WithRetainPolicy(etcdv1beta1.RetainPolicyDelete),
	}
	return testutil.EtcdCluster("demo", append(valid, opts...)...)
}

// extraArgs sets spec.options.extraArgs from key, value pairs.
func extraArgs(kv ...string) testutil.ClusterOption {
	return testutil.WithOptions(func(o *etcdv1beta1.EtcdOptions) {
		o.ExtraArgs = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			o.ExtraArgs[kv[i]] = kv[i+1]
		}
	})
}

// emptyDirLimit gives the members emptyDir volumes with this sizeLimit.
func emptyDirLimit(q string) testutil.ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		testutil.WithEmptyDir()(c)
		c.Spec.Storage.EmptyDir.SizeLimit = ptr.To(resource.MustParse(q))
	}
}

// podLabels sets spec.podTemplate.labels from key, value pairs.
func podLabels(kv ...string) testutil.ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Labels: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			c.Spec.PodTemplate.Labels[kv[i]] = kv[i+1]
		}
	}
}

// podAnnotations sets spec.podTemplate.annotations to the key-value pairs kv.
func podAnnotations(kv ...string) testutil.ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Annotations: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			c.Spec.PodTemplate.Annotations[kv[i]] = kv[i+1]
		}
	}
}

// noSpread sets spec.podTemplate.topologySpreadConstraints to [] (no constraint, where an absent list
// gives the default spread).
func noSpread(c *etcdv1beta1.EtcdCluster) {
	c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{}}
}

// withMemoryLimit sets spec.podTemplate.resources.limits.memory to q.
func withMemoryLimit(q string) testutil.ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Resources: &corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}}}
	}
}

// TestMemoryLimitWarning: a memory limit below 256Mi is admitted with a warning, on create and when it
// changes; one at or above it, or one kept as it was, is not warned about.
func TestMemoryLimitWarning(t *testing.T) {
	want := "spec.podTemplate.resources.limits.memory 64Mi is below 256Mi: etcd uses tens of MiB before it serves a request"
	_, w := ValidateCreate(cluster(withMemoryLimit("64Mi")))
	checkWarnings(t, w, []string{want})
	_, w = ValidateCreate(cluster(withMemoryLimit("256Mi")))
	checkWarnings(t, w, nil)
	_, w = ValidateUpdate(cluster(withMemoryLimit("1Gi")), cluster(withMemoryLimit("64Mi")))
	checkWarnings(t, w, []string{"changing spec.podTemplate rolls", want})
	_, w = ValidateUpdate(cluster(withMemoryLimit("64Mi")), cluster(withMemoryLimit("64Mi"), testutil.WithReplicas(5)))
	checkWarnings(t, w, nil)
}

// dbSizes sets status.members, demo-0 first, with these database sizes.
func dbSizes(sizes ...int64) testutil.ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Status.Members = nil
		for i, s := range sizes {
			c.Status.Members = append(c.Status.Members, etcdv1beta1.MemberStatus{Name: "demo-" + string(rune('0'+i)), DBSizeBytes: s})
		}
	}
}

// problem is an expected field error: its path and part of its detail.
type problem struct{ path, mention string }

// checkErrors fails t unless errs are exactly want, in order, by path and detail.
func checkErrors(t *testing.T, errs field.ErrorList, want []problem) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors %v, want %d: %v", len(errs), errs, len(want), want)
	}
	for i, w := range want {
		if errs[i].Field != w.path || !strings.Contains(errs[i].Detail, w.mention) {
			t.Errorf("error %d is %q, want on %s mentioning %q", i, errs[i].Error(), w.path, w.mention)
		}
	}
}

// checkWarnings fails t unless there is one warning per entry of want, each mentioning it, in order.
func checkWarnings(t *testing.T, got []string, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got warnings %q, want %d mentioning %q", got, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("warning %d is %q, want it to mention %q", i, got[i], w)
		}
	}
}

func TestValidateCreate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		c        *etcdv1beta1.EtcdCluster
		errs     []problem
		warnings []string
	}{
		{"defaults", cluster(), nil, nil},
		{"pod labels of the user's own", cluster(podLabels("team", "a", "example.com/tier", "db")), nil, nil},
		{"pod label the operator sets", cluster(podLabels("app.kubernetes.io/name", "store", "team", "a")), []problem{{"spec.podTemplate.labels[app.kubernetes.io/name]",
			"is set by the operator on every member pod"}}, nil},
		{"pod label of the operator's prefix", cluster(podLabels("etcd.etcdkit.dev/cluster", "other")), []problem{{"spec.podTemplate.labels[etcd.etcdkit.dev/cluster]",
			"it would be overwritten; use a label key of your own"}}, nil},
		{"pod annotation of the operator's prefix", cluster(podAnnotations("etcd.etcdkit.dev/spec-hash", "0123456789")), []problem{{"spec.podTemplate.annotations[etcd.etcdkit.dev/spec-hash]",
			"is the operator's own record on the member pods"}}, nil},
		{"pod annotation of another prefix", cluster(podAnnotations("example.com/etcd.etcdkit.dev", "x")), nil, nil},
		{"3.5 patch", cluster(testutil.WithVersion("3.5.35")), nil, nil},
		{"emptyDir", cluster(testutil.WithEmptyDir()), nil, nil},
		{"allowed extra flag", cluster(extraArgs("log-level", "debug")), nil, nil},
		// values etcd's own flag parsing and validation refuse (etcdflags.Check)
		{"extra flag with a log level etcd does not know", cluster(extraArgs("log-level", "verbose")), []problem{{"spec.options.extraArgs[log-level]",
			`etcd 3.6 refuses it as it starts (unrecognized level: "verbose"), so every member restarted with it would crash-loop`}}, nil},
		{"extra flag with a value its type does not parse", cluster(extraArgs("max-wals", "five", "log-level", "debug")), []problem{{"spec.options.extraArgs[max-wals]",
			`invalid value "five" for flag -max-wals`}}, nil},
		{"extra flags etcd refuses together", cluster(extraArgs("log-format", "json", "experimental-compact-hash-check-enabled", "yes")), []problem{{"spec.options.extraArgs[experimental-compact-hash-check-enabled]",
			`invalid boolean value "yes"`}}, nil},
		{"typed heartbeat above a fifth of etcd's default election timeout", cluster(testutil.WithOptions(func(o *etcdv1beta1.EtcdOptions) { o.HeartbeatIntervalMillis = ptr.To[int32](500) })),
			[]problem{{"spec.options", "--election-timeout[1000ms] should be at least as 5 times as --heartbeat-interval[500ms]"}}, nil},
		{"etcdmain's flag with a value it does not take", cluster(extraArgs("v2-deprecation", "bogus")), []problem{{"spec.options.extraArgs[v2-deprecation]",
			`invalid value "bogus" for flag -v2-deprecation`}}, nil},
		{"extra flag with a 3.5 cluster: not checked", cluster(testutil.WithVersion("3.5.35"), extraArgs("log-level", "verbose")), nil, nil},
		{"image with a registry port", cluster(testutil.WithImage("registry.example:5000/mirror/etcd:v3.6.16")), nil, nil},
		{"image by digest", cluster(testutil.WithImage("registry.example/etcd@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")), nil, nil},
		{"image tagged as another release than the default version", cluster(testutil.WithVersion(""), testutil.WithImage("registry.example/etcd:v3.5.35")), []problem{{"spec.version",
			`spec.image registry.example/etcd:v3.5.35 is tagged as etcd 3.5.35, and spec.version (unset, it is 3.6.16) says 3.6.16: set spec.version: "3.5.35" with it`}}, nil},
		{"image tagged as another release than spec.version", cluster(testutil.WithVersion("3.6.16"), testutil.WithImage("etcd:3.6.15")), []problem{{"spec.version", "is tagged as etcd 3.6.15"}}, nil},
		{"image tagged as spec.version", cluster(testutil.WithVersion("3.5.35"), testutil.WithImage("registry.example/etcd:v3.5.35")), nil, nil},
		{"image tag that names no release", cluster(testutil.WithImage("registry.example/etcd:latest")), nil, nil},
		{"image of a registry port without a tag", cluster(testutil.WithImage("registry.example:5000/etcd")), nil, nil},
		{"image tag with a suffix, of another release", cluster(testutil.WithVersion(""), testutil.WithImage("registry.k8s.io/etcd:3.5.21-0")), []problem{{"spec.version",
			`spec.image registry.k8s.io/etcd:3.5.21-0 is tagged as etcd 3.5.21, and spec.version (unset, it is 3.6.16) says 3.6.16: set spec.version: "3.5.21" with it, or use an image of etcd 3.6.16`}}, nil},
		{"image tag with a suffix, of spec.version", cluster(testutil.WithImage("registry.example/etcd:v3.6.16-amd64")), nil, nil},
		{"image tagged and pinned by digest, of another release", cluster(testutil.WithVersion("3.5.35"), testutil.WithImage("registry.example/etcd:v3.6.16@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")),
			[]problem{{"spec.version", "is tagged as etcd 3.6.16, and spec.version says 3.5.35"}}, nil},
		{"image without a registry", cluster(testutil.WithImage("etcd")), nil, nil},
		{"image in upper case", cluster(testutil.WithImage("Mirror.example/Etcd:v3.6.16")), []problem{{"spec.image",
			`is not an image reference: write [registry[:port]/]repository[:tag][@sha256:digest], with the repository in lower case and without spaces or a URL scheme, such as "registry.example/etcd:v3.6.16", or remove spec.image to run the operator's etcd image of spec.version`}}, nil},
		{"image with a newline", cluster(testutil.WithImage("registry.example/etcd:v3.6.16\n")), []problem{{"spec.image", "is not an image reference"}}, nil},
		{"image with a space", cluster(testutil.WithImage("registry.example/etcd v3.6.16")), []problem{{"spec.image", "is not an image reference"}}, nil},
		{"image with an empty tag", cluster(testutil.WithImage("registry.example/etcd:")), []problem{{"spec.image", "is not an image reference"}}, nil},
		{"image with a URL scheme", cluster(testutil.WithImage("https://registry.example/etcd:v3.6.16")), []problem{{"spec.image", "is not an image reference"}}, nil},
		{"image with a short digest", cluster(testutil.WithImage("registry.example/etcd@sha256:abc")), []problem{{"spec.image", "is not an image reference"}}, nil},
		{"quota below storage.size", cluster(testutil.WithStorageSize("10Gi"), testutil.WithQuota("8Gi")), nil, nil},
		{"quota below the default size", cluster(testutil.WithStorageSize(""), testutil.WithQuota("512Mi")), nil, nil},
		{"quota above storage.size", cluster(testutil.WithStorageSize("4Gi"), testutil.WithQuota("8Gi")), []problem{{"spec.options.quotaBackendBytes",
			"must be below storage.size (4Gi): the volume would fill up before the database reached its quota, and a full volume crashes etcd, where the quota would have raised NOSPACE (writes refused, reads served); lower quotaBackendBytes or grow storage.size, keeping room for the write-ahead log and snapshots"}}, nil},
		{"quota equal to storage.size", cluster(testutil.WithStorageSize("2Gi"), testutil.WithQuota("2048Mi")), []problem{{"spec.options.quotaBackendBytes", "must be below storage.size (2Gi)"}}, nil},
		{"quota above the default size", cluster(testutil.WithStorageSize(""), testutil.WithQuota("2Gi")), []problem{{"spec.options.quotaBackendBytes",
			"must be below the members' volume size, 1Gi (storage.size is unset: the default)"}}, nil},
		{"default quota above storage.size: etcd's default, as before", cluster(testutil.WithStorageSize("1Gi")), nil, nil},
		{"emptyDir without a sizeLimit", cluster(testutil.WithEmptyDir(), testutil.WithQuota("8Gi")), nil, nil},
		{"quota below the emptyDir sizeLimit", cluster(emptyDirLimit("4Gi"), testutil.WithQuota("2Gi")), nil, nil},
		{"quota above the emptyDir sizeLimit", cluster(emptyDirLimit("1Gi"), testutil.WithQuota("2Gi")), []problem{{"spec.options.quotaBackendBytes",
			"must be below storage.emptyDir.sizeLimit (1Gi): the kubelet evicts a member whose emptyDir grows past its sizeLimit, and the member's data goes with its pod; the members hold the same data, so they would be evicted at about the same time and the cluster would lose its data, where the quota would have raised NOSPACE (writes refused, reads served); lower quotaBackendBytes or raise sizeLimit, keeping room for the write-ahead log and snapshots"}}, nil},
		{"emptyDir sizeLimit below etcd's default quota", cluster(emptyDirLimit("1Gi")), []problem{{"spec.storage.emptyDir.sizeLimit",
			"must be above etcd's default backend quota of 2Gi, since spec.options.quotaBackendBytes is unset: the kubelet evicts a member"}}, nil},
		{"emptyDir sizeLimit above etcd's default quota", cluster(emptyDirLimit("3Gi")), nil, nil},
		{"emptyDir sizeLimit below 64Mi", cluster(emptyDirLimit("1Mi"), testutil.WithQuota("16Mi")), []problem{{"spec.storage.emptyDir.sizeLimit",
			"must be at least 64Mi, such as 1Gi: etcd preallocates its write-ahead log in 64MB files, so a member with less cannot start, or is evicted as soon as it does"}}, nil},
		{"extra flag value with spaces and non-ASCII letters", cluster(extraArgs("distributed-tracing-service-name", "etcd für prod")), nil, nil},
		{"extra flag value with a newline", cluster(extraArgs("log-level", "debug\n--force-new-cluster")), []problem{{"spec.options.extraArgs[log-level]",
			`contains the control character '\n' at byte 5: etcd gets the value verbatim in one command-line argument (--flag=value), where a newline, tab or other control character is never meant and etcd may refuse it, so the member would not start; write the value on one line without control characters`}}, nil},
		{"extra flag value with a tab", cluster(extraArgs("log-level", "\tdebug")), []problem{{"spec.options.extraArgs[log-level]", `contains the control character '\t' at byte 0`}}, nil},
		{"extra flag value with a carriage return", cluster(extraArgs("log-level", "debug\r")), []problem{{"spec.options.extraArgs[log-level]", `control character '\r'`}}, nil},
		{"extra flag value with NUL", cluster(extraArgs("log-level", "de\x00bug")), []problem{{"spec.options.extraArgs[log-level]", `control character '\x00'`}}, nil},
		{"extra flag value with a C1 control", cluster(extraArgs("log-level", "debug\u0085")), []problem{{"spec.options.extraArgs[log-level]", `control character '\u0085'`}}, nil},
		{"extra flag key with =", cluster(extraArgs("log-level=debug", "")), []problem{{"spec.options.extraArgs[log-level=debug]",
			`the key must be an etcd flag name without the leading "--" and without "=": lower case letters, digits and '-', such as "log-level" (the value goes on the right of the ':')`}}, nil},
		{"extra flag key with a space", cluster(extraArgs("log level", "debug")), []problem{{"spec.options.extraArgs[log level]", "the key must be an etcd flag name"}}, nil},
		{"extra flag key with dashes", cluster(extraArgs("--log-level", "debug")), []problem{{"spec.options.extraArgs[--log-level]", `without the leading "--"`}}, nil},
		{"extra flag key in upper case", cluster(extraArgs("Log-Level", "debug")), []problem{{"spec.options.extraArgs[Log-Level]", "lower case letters"}}, nil},
		{"reserved flag with a bad value: one error", cluster(extraArgs("name", "x\n")), []problem{{"spec.options.extraArgs[name]", "cannot be set through extraArgs"}}, nil},
		{"one member warns", cluster(testutil.WithReplicas(1)), nil, []string{"no fault tolerance"}},
		{"C09 3.4.x", cluster(testutil.WithVersion("3.4.30")), []problem{{"spec.version", "etcd 3.4 is not supported: supported minors are 3.5, 3.6"}}, nil},
		{"C09 3.7.x", cluster(testutil.WithVersion("3.7.0")), []problem{{"spec.version", "etcd 3.7 is not supported"}}, nil},
		{"not a version", cluster(testutil.WithVersion("3.6")), []problem{{"spec.version", "major.minor.patch, such as 3.6.16"}}, nil},
		{"C10 replicas 0", cluster(testutil.WithReplicas(0)), []problem{{"spec.replicas", "must be 1, 3, 5, 7 or 9: a cluster has at least one member"}}, nil},
		{"C10 replicas 2", cluster(testutil.WithReplicas(2)), []problem{{"spec.replicas", "must be odd (1, 3, 5, 7 or 9): 2 members tolerate no more failures than 1 (a quorum of 2 is 2)"}}, nil},
		{"C10 replicas 4", cluster(testutil.WithReplicas(4)), []problem{{"spec.replicas", "a quorum of 4 is 3"}}, nil},
		{"C10 replicas 11", cluster(testutil.WithReplicas(11)), []problem{{"spec.replicas", "must be 1, 3, 5, 7 or 9: more than 9 members"}}, nil},
		{"C11 size 0", cluster(testutil.WithStorageSize("0")), []problem{{"spec.storage.size", "must be at least 64Mi, such as 1Gi"}}, nil},
		{"C11 size -1Gi", cluster(testutil.WithStorageSize("-1Gi")), []problem{{"spec.storage.size", "must be at least 64Mi"}}, nil},
		{"C11 size below 64Mi", cluster(testutil.WithStorageSize("63Mi")), []problem{{"spec.storage.size", "must be at least 64Mi"}}, nil},
		{"size 64Mi", cluster(testutil.WithStorageSize("64Mi")), nil, nil},
		{"size 64Ti", cluster(testutil.WithStorageSize("64Ti")), nil, nil},
		{"size 1000000Ei", cluster(testutil.WithStorageSize("1000000Ei")), []problem{{"spec.storage.size",
			"must be at most 64Ti, such as 10Gi: no common storage provisions a larger volume, so the members' claims would stay pending, and etcd uses at most its backend quota (spec.options.quotaBackendBytes, at most 100Gi) plus its WAL and snapshots"}}, nil},
		{"size just above 64Ti", cluster(testutil.WithStorageSize("70368744177665")), []problem{{"spec.storage.size", "must be at most 64Ti"}}, nil},
		{"emptyDir with a size", cluster(testutil.WithEmptyDir(), testutil.WithStorageSize("1Gi")), []problem{{"spec.storage.emptyDir", "cannot be combined with storage.size"}}, nil},
		{"emptyDir with a class", cluster(testutil.WithEmptyDir(), testutil.WithStorageClass("fast")), []problem{{"spec.storage.emptyDir", "cannot be combined"}}, nil},
		{"every problem at once", cluster(testutil.WithReplicas(4), testutil.WithVersion("3.4.0"), testutil.WithStorageSize("0"), extraArgs("name", "x", "data-dir", "/d")), []problem{
			{"spec.replicas", "must be odd"},
			{"spec.version", "not supported"},
			{"spec.storage.size", "at least 64Mi"},
			{"spec.options.extraArgs[data-dir]", "the operator mounts each member's volume"},
			{"spec.options.extraArgs[name]", "the operator names each member after its pod"},
		}, nil},
		{"errors drop warnings", cluster(testutil.WithReplicas(1), testutil.WithVersion("3.4.0")), []problem{{"spec.version", "not supported"}}, nil},

		// Certificates the user keeps (spec.tls.secrets).
		{"TLS Secrets of the user", cluster(testutil.WithTLS(true, true), testutil.WithTLSSecrets("etcd-server", "etcd-peer", "etcd-client")), nil, nil},
		{"peer port only", cluster(testutil.WithTLS(false, true), testutil.WithTLSSecrets("", "etcd-peer", "")), nil, nil},
		{"TLS Secrets missing for the ports", cluster(testutil.WithTLS(true, true), testutil.WithTLSSecrets("etcd-server", "", "")), []problem{
			{"spec.tls.secrets.client", "name the Secret of the client certificate: TLS is on on the client port"},
			{"spec.tls.secrets.peer", "name the Secret of the peer certificate"},
		}, nil},
		{"TLS Secret names", cluster(testutil.WithTLS(true, true), testutil.WithTLSSecrets("Etcd_Server", "demo-peer-tls", "demo-ca")), []problem{
			{"spec.tls.secrets.server", "is not a Secret name"},
			{"spec.tls.secrets.client", "is a name the operator uses for the cluster's own Secrets"},
			{"spec.tls.secrets.peer", "is a name the operator uses for the cluster's own Secrets"},
		}, nil},
		{"restore on quorum loss with a schedule", cluster(testutil.WithRestoreOnQuorumLoss(true), backupSpec("@hourly", "", nil)), nil, []string{
			"writes after that copy are lost"}},
		{"restore on quorum loss without a schedule", cluster(testutil.WithRestoreOnQuorumLoss(true)), nil, []string{
			"writes after that copy are lost", "only EtcdBackups created by hand can be restored", "the members that kept their data cannot be copied"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs, warnings := ValidateCreate(tc.c)
			checkErrors(t, errs, tc.errs)
			checkWarnings(t, warnings, tc.warnings)
		})
	}
}

// TestUnknownFlagsRefused: a flag etcd 3.6 does not have (a typo, a flag of etcd 3.5's removed proxy)
// is refused on a 3.6 cluster, since etcd would refuse to start with it, and so is a flag etcd accepts
// only to ignore it, on any version; flags of etcd 3.5 are not
// checked (the operator holds no list of them), until the cluster moves to 3.6: then every flag kept
// from before is checked again.
func TestUnknownFlagsRefused(t *testing.T) {
	for _, flag := range []string{"log-levle", "discoveryx", "proxy-dial-timeout"} {
		errs, _ := ValidateCreate(cluster(extraArgs(flag, "x")))
		checkErrors(t, errs, []problem{{"spec.options.extraArgs[" + flag + "]", "etcd 3.6 has no flag --" + flag + " and would refuse to start with it"}})
		if errs, _ := ValidateCreate(cluster(testutil.WithVersion("3.5.35"), extraArgs(flag, "x"))); len(errs) != 0 {
			t.Errorf("%s refused on etcd 3.5, whose flags are not checked: %v", flag, errs)
		}
	}
	// one-letter keys are flag names too, which etcd may not have
	errs, _ := ValidateCreate(cluster(extraArgs("h", "true")))
	checkErrors(t, errs, []problem{{"spec.options.extraArgs[h]", "etcd 3.6 has no flag --h and would refuse to start with it"}})
	// flags of etcd 2 that etcd accepts and ignores, on either minor: the entry would have no effect
	for _, flag := range []string{"v", "vv", "config", "force", "snapshot", "peer-election-timeout"} {
		for _, version := range []string{"3.6.16", "3.5.35"} {
			errs, _ := ValidateCreate(cluster(testutil.WithVersion(version), extraArgs(flag, "x")))
			checkErrors(t, errs, []problem{{"spec.options.extraArgs[" + flag + "]", "etcd accepts --" + flag + " only to ignore it (a flag of etcd 2): it would have no effect"}})
		}
	}
	old := cluster(testutil.WithVersion("3.5.35"), testutil.WithCurrentVersion("3.5.35"), extraArgs("proxy-dial-timeout", "1000"))
	errs, _ = ValidateUpdate(old, cluster(testutil.WithVersion("3.6.16"), extraArgs("proxy-dial-timeout", "1000")))
	checkErrors(t, errs, []problem{{"spec.options.extraArgs[proxy-dial-timeout]", "etcd 3.6 has no flag --proxy-dial-timeout"}})
	if errs, _ := ValidateUpdate(old, cluster(testutil.WithVersion("3.5.35"), testutil.WithReplicas(5), extraArgs("proxy-dial-timeout", "1000"))); len(errs) != 0 {
		t.Errorf("an unchanged flag of a 3.5 cluster refused on another change: %v", errs)
	}
}

// TestValidateCreateReservedFlags: every flag the operator sets, and every risky flag, is refused in
// extraArgs, each with its own reason, with or without leading dashes; others pass through.
func TestValidateCreateReservedFlags(t *testing.T) {
	reserved := []string{
		"name", "data-dir", "wal-dir", "initial-cluster", "initial-cluster-state", "initial-cluster-token",
		"initial-advertise-peer-urls", "advertise-client-urls", "listen-peer-urls", "listen-client-urls",
		"listen-client-http-urls", "listen-metrics-urls", "discovery", "discovery-srv", "force-new-cluster",
		"cert-file", "key-file", "trusted-ca-file", "client-cert-auth", "peer-cert-file", "peer-key-file",
		"peer-trusted-ca-file", "peer-client-cert-auth", "auto-tls", "peer-auto-tls", "config-file",
		"quota-backend-bytes", "auto-compaction-mode", "auto-compaction-retention", "snapshot-count",
		"heartbeat-interval", "election-timeout", "max-request-bytes",
		// risky
		"enable-pprof", "log-outputs", "enable-log-rotation", "log-rotation-config-json", "max-learners", "proxy", "auth-token",
		// the discovery family
		"discovery-srv-name", "discovery-token", "discovery-endpoints", "discovery-insecure-skip-tls-verify",
		// every TLS flag of etcd 3.5 and 3.6
		"client-crl-file", "peer-crl-file", "client-cert-file", "client-key-file", "peer-client-cert-file",
		"peer-client-key-file", "self-signed-cert-validity", "tls-min-version", "tls-max-version", "cipher-suites",
		"peer-cert-allowed-cn", "peer-cert-allowed-hostname", "client-cert-allowed-hostname",
		"peer-skip-client-san-verification", "experimental-peer-skip-client-san-verification",
	}
	for _, flag := range reserved {
		for _, key := range []string{flag, "--" + flag} {
			why, ok := etcdv1beta1.ReservedFlag(flag)
			if !ok {
				t.Fatalf("%s is not reserved", flag)
			}
			errs, _ := ValidateCreate(cluster(extraArgs(key, "x")))
			checkErrors(t, errs, []problem{{"spec.options.extraArgs[" + key + "]", "cannot be set through extraArgs: " + why}})
		}
	}
	for flag, value := range map[string]string{"log-level": "debug", "experimental-compact-hash-check-enabled": "true", "max-wals": "5"} {
		if errs, _ := ValidateCreate(cluster(extraArgs(flag, value))); len(errs) != 0 {
			t.Errorf("%s=%s refused: %v", flag, value, errs)
		}
	}
	// The typed options say what to use instead.
	errs, _ := ValidateCreate(cluster(extraArgs("quota-backend-bytes", "8589934592")))
	checkErrors(t, errs, []problem{{"spec.options.extraArgs[quota-backend-bytes]", "use spec.options.quotaBackendBytes"}})
	// Risky flags say why.
	for flag, why := range map[string]string{
		"enable-pprof":       "it serves /debug/pprof on the client port, unauthenticated",
		"log-outputs":        "etcd logs to stderr, where kubectl logs and the operator's diagnosis of a failing member read it",
		"max-learners":       "the operator adds members one learner at a time",
		"version":            "etcd prints its version and exits instead of running the member",
		"discovery-srv-name": "members are bootstrapped by the operator, not by discovery",
		"tls-min-version":    "the operator manages TLS: use spec.tls",
		"cert-file":          "the operator manages TLS: use spec.tls",
	} {
		errs, _ := ValidateCreate(cluster(extraArgs(flag, "x")))
		checkErrors(t, errs, []problem{{"spec.options.extraArgs[" + flag + "]", "cannot be set through extraArgs: " + why}})
	}
}

// withMemberVersions records in the status one member per version, named demo-0, demo-1, …; "" records
// a member whose version is not known (it does not answer).
func withMemberVersions(versions ...string) testutil.ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		for i, v := range versions {
			c.Status.Members = append(c.Status.Members, etcdv1beta1.MemberStatus{Name: fmt.Sprintf("demo-%d", i), Version: v})
		}
	}
}

// rolloutFailed records that the cluster's rollout was rolled back (Progressing False, RolloutFailed).
func rolloutFailed(c *etcdv1beta1.EtcdCluster) {
	c.Status.Conditions = append(c.Status.Conditions, metav1.Condition{Type: etcdv1beta1.ConditionProgressing, Status: metav1.ConditionFalse,
		Reason: etcdv1beta1.ReasonRolloutFailed, Message: "Rolling update stopped: demo-1 was rolled back"})
}

// pullingImage records that member demo-i's etcd container waits for an image it cannot pull.
func pullingImage(i int) testutil.ClusterOption {
	return func(c *etcdv1beta1.EtcdCluster) {
		c.Status.Members[i].Problem = `etcd container ImagePullBackOff: Back-off pulling image "docker.io/local/etcd:v3.6.99"`
	}
}

func TestValidateUpdate(t *testing.T) {
	roll := "rolls every member one at a time; the leader last"
	// issued is a cluster whose issuer has issued its certificates (the operator then records a trust hash)
	issued := func(c *etcdv1beta1.EtcdCluster) {
		c.Status.TLS = &etcdv1beta1.TLSStatus{ClientSecret: "demo-client-tls", TrustedCAsHash: "83fa239484"}
	}
	// formed is a cluster whose members formed a cluster once (the operator recorded its ID)
	formed := func(c *etcdv1beta1.EtcdCluster) { c.Status.ClusterID = "cdf818194e3a8c32" }
	for _, tc := range []struct {
		name     string
		old, c   *etcdv1beta1.EtcdCluster
		errs     []problem
		warnings []string
	}{
		// Labels and annotations the operator owns: refused when added or changed, kept otherwise.
		{"owned pod label added", cluster(), cluster(podLabels("app.kubernetes.io/instance", "x")),
			[]problem{{"spec.podTemplate.labels[app.kubernetes.io/instance]", "is set by the operator on every member pod"}}, nil},
		{"owned pod label stored before the rule, another label added", cluster(podLabels("app.kubernetes.io/instance", "x")), cluster(podLabels("app.kubernetes.io/instance", "x", "team", "a")),
			nil, []string{"changing spec.podTemplate " + roll}},
		{"owned pod annotation changed", cluster(podAnnotations("etcd.etcdkit.dev/awaits-add", "x")), cluster(podAnnotations("etcd.etcdkit.dev/awaits-add", "y")),
			[]problem{{"spec.podTemplate.annotations[etcd.etcdkit.dev/awaits-add]", "the " + "etcd.etcdkit.dev/ prefix is reserved to it"}}, nil},
		{"image changed to another release's tag", cluster(), cluster(testutil.WithImage("registry.example/etcd:v3.5.35")),
			[]problem{{"spec.version", "is tagged as etcd 3.5.35"}}, nil},
		{"image tag and version changed together", cluster(testutil.WithImage("registry.example/etcd:v3.6.15"), testutil.WithVersion("3.6.15")), cluster(testutil.WithImage("registry.example/etcd:v3.6.16"), testutil.WithVersion("3.6.16")),
			nil, []string{"changing spec.version, spec.image " + roll}},
		// undoing a change that was rolled back restarts nothing: the warning does not say every member rolls
		{"image changed back after a rollback", cluster(testutil.WithImage("registry.example/etcd:no-such-tag"), rolloutFailed), cluster(),
			nil, []string{"changing spec.image rolls, one at a time and the leader last, every member whose pod is not of the new spec: undoing the change that was rolled back restarts only the members on another spec"}},
		// Version path (C09).
		{"C09 minor downgrade", cluster(testutil.WithVersion("3.6.16")), cluster(testutil.WithVersion("3.5.35")),
			[]problem{{"spec.version", "the members run etcd 3.6.16 and etcd cannot be downgraded to 3.5.35 in place; allowed: a newer 3.6 patch or the next minor"}}, nil},
		{"C09 skip to 3.7", cluster(testutil.WithVersion("3.5.35")), cluster(testutil.WithVersion("3.7.0")),
			[]problem{{"spec.version", "etcd 3.7.0 is not supported; supported minors are 3.5, 3.6"}}, nil},
		{"C09 skip a minor from what runs", cluster(testutil.WithVersion("3.5.35"), testutil.WithCurrentVersion("3.4.30")), cluster(testutil.WithVersion("3.6.16")),
			[]problem{{"spec.version", "the members run 3.4.30, so upgrade to a 3.5 release first, then to 3.6.16"}}, nil},
		{"C09 patch too old for 3.6", cluster(testutil.WithVersion("3.5.20")), cluster(testutil.WithVersion("3.6.16")),
			[]problem{{"spec.version", "upgrading to 3.6 needs every member on 3.5.26 or later first"}}, nil},
		{"C09 patch too old, as the members run", cluster(testutil.WithVersion("3.5.35"), testutil.WithCurrentVersion("3.5.20")), cluster(testutil.WithVersion("3.6.16")),
			[]problem{{"spec.version", "the members run 3.5.20, so upgrade to 3.5.x (x ≥ 26) first"}}, nil},
		{"C09 patch downgrade", cluster(testutil.WithVersion("3.6.16"), formed), cluster(testutil.WithVersion("3.6.15")),
			[]problem{{"spec.version", "cannot be downgraded to 3.6.15"}}, nil},
		{"patch downgrade of a cluster that never formed (its first pods wait for an image that does not exist)",
			cluster(testutil.WithVersion("3.6.99")), cluster(testutil.WithVersion("3.6.16")), nil, []string{"spec.version"}},
		{"a change while the cluster is being created says the waiting pods are rebuilt at once",
			cluster(testutil.WithVersion("3.6.99"), func(c *etcdv1beta1.EtcdCluster) { c.Status.Phase = etcdv1beta1.PhaseCreating }), cluster(testutil.WithVersion("3.6.16")),
			nil, []string{"before the cluster has formed: the pods of members whose etcd does not run are recreated with the new spec at once"}},
		{"minor downgrade of a cluster that never formed", cluster(testutil.WithVersion("3.6.16")), cluster(testutil.WithVersion("3.5.35")),
			[]problem{{"spec.version", "cannot be downgraded to 3.5.35"}}, nil},
		{"C09 downgrade from what runs", cluster(testutil.WithVersion("3.5.35"), testutil.WithCurrentVersion("3.6.16")), cluster(testutil.WithVersion("3.5.40")),
			[]problem{{"spec.version", "the members run etcd 3.6.16 and etcd cannot be downgraded to 3.5.40"}}, nil},
		{"C09 back below a change under way", cluster(testutil.WithVersion("3.6.16"), testutil.WithCurrentVersion("3.6.10")), cluster(testutil.WithVersion("3.6.12")),
			[]problem{{"spec.version", "the members (on 3.6.10) are being changed to 3.6.16 already"}}, nil},
		{"back to the version every member runs (a change to a release without an image, cancelled)",
			cluster(testutil.WithVersion("3.6.99"), testutil.WithCurrentVersion("3.6.16"), withMemberVersions("3.6.16", "", "3.6.16"), pullingImage(1)), cluster(testutil.WithVersion("3.6.16")),
			nil, []string{"spec.version"}},
		{"back to the minor every member runs (an upgrade to a 3.6 release without an image, rolled back)",
			cluster(testutil.WithVersion("3.6.99"), testutil.WithCurrentVersion("3.5.35"), withMemberVersions("3.5.35", "3.5.35", "3.5.35")), cluster(testutil.WithVersion("3.5.35")),
			nil, []string{"spec.version"}},
		{"back while a member that does not answer may be restarting onto the change", cluster(testutil.WithVersion("3.6.17"), testutil.WithCurrentVersion("3.6.16"), withMemberVersions("3.6.16", "", "3.6.16")), cluster(testutil.WithVersion("3.6.16")),
			[]problem{{"spec.version", "the members (on 3.6.16) are being changed to 3.6.17 already"}}, nil},
		{"back below a member that took the change", cluster(testutil.WithVersion("3.6.17"), testutil.WithCurrentVersion("3.6.16"), withMemberVersions("3.6.16", "3.6.17", "3.6.16")), cluster(testutil.WithVersion("3.6.16")),
			[]problem{{"spec.version", "the members (on 3.6.16) are being changed to 3.6.17 already"}}, nil},
		{"back to a version no member is recorded running", cluster(testutil.WithVersion("3.6.17"), testutil.WithCurrentVersion("3.6.16"), withMemberVersions("", "", "")), cluster(testutil.WithVersion("3.6.16")),
			[]problem{{"spec.version", "the members (on 3.6.16) are being changed to 3.6.17 already"}}, nil},
		{"3.5.35 to 3.6.16", cluster(testutil.WithVersion("3.5.35"), testutil.WithCurrentVersion("3.5.35")), cluster(testutil.WithVersion("3.6.16")), nil, []string{"changing spec.version " + roll}},
		{"3.5.26 to 3.6.0", cluster(testutil.WithVersion("3.5.26")), cluster(testutil.WithVersion("3.6.0")), nil, []string{"spec.version"}},
		{"patch upgrade", cluster(testutil.WithVersion("3.6.15"), testutil.WithCurrentVersion("3.6.15")), cluster(testutil.WithVersion("3.6.16")), nil, []string{"changing spec.version " + roll}},
		{"unparsable status ignored", cluster(testutil.WithVersion("3.6.15"), testutil.WithCurrentVersion("unknown")), cluster(testutil.WithVersion("3.6.16")), nil, []string{"spec.version"}},
		{"v prefix is the same version", cluster(testutil.WithVersion("3.6.16")), cluster(testutil.WithVersion("v3.6.16")), nil, nil},
		{"version change with an unchanged spec.image", cluster(testutil.WithVersion("3.6.15"), func(c *etcdv1beta1.EtcdCluster) { c.Spec.Image = "mirror/etcd:v3.6.15" }),
			cluster(testutil.WithVersion("3.6.16"), func(c *etcdv1beta1.EtcdCluster) { c.Spec.Image = "mirror/etcd:v3.6.15" }),
			[]problem{{"spec.version", "spec.image (mirror/etcd:v3.6.15) is set and decides what the members run"}}, nil},
		{"image changed to one that is not an image reference", cluster(), cluster(testutil.WithImage("registry.example/Etcd:v3.6.16")),
			[]problem{{"spec.image", "is not an image reference"}}, nil},
		{"image that is not a reference kept as it was", cluster(testutil.WithImage("Etcd")), cluster(testutil.WithImage("Etcd"), testutil.WithReplicas(5)), nil, nil},
		{"shrink from the default size", cluster(func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.Size = nil }), cluster(func(c *etcdv1beta1.EtcdCluster) { q := resource.MustParse("128Mi"); c.Spec.Storage.Size = &q }),
			[]problem{{"spec.storage.size", "it was unset, so the members' claims have the default 1Gi"}}, nil},

		// Size (C10).
		{"C10 3 to 0", cluster(), cluster(testutil.WithReplicas(0)), []problem{{"spec.replicas", "to remove the cluster, delete the EtcdCluster"}}, nil},
		{"C10 3 to 4", cluster(), cluster(testutil.WithReplicas(4)), []problem{{"spec.replicas", "must be odd"}}, nil},
		{"C10 3 to 11", cluster(), cluster(testutil.WithReplicas(11)), []problem{{"spec.replicas", "must be 1, 3, 5, 7 or 9"}}, nil},
		{"3 to 5", cluster(), cluster(testutil.WithReplicas(5)), nil, nil},
		{"3 to 1 warns", cluster(), cluster(testutil.WithReplicas(1)), nil, []string{"spec.replicas is 1: a single member has no fault tolerance"}},
		{"1 to 3", cluster(testutil.WithReplicas(1)), cluster(testutil.WithReplicas(3)), nil, nil},

		// The only copy of a 1-member emptyDir cluster.
		{"1-member emptyDir: a version change would delete the only copy", cluster(testutil.WithReplicas(1), testutil.WithEmptyDir(), testutil.WithVersion("3.6.15")),
			cluster(testutil.WithReplicas(1), testutil.WithEmptyDir(), testutil.WithVersion("3.6.16")),
			[]problem{{"spec", "changing spec.version restarts the only member of this 1-member emptyDir cluster, which deletes the cluster's only copy of its data"}}, nil},
		{"1-member emptyDir: options too", cluster(testutil.WithReplicas(1), testutil.WithEmptyDir()), cluster(testutil.WithReplicas(1), testutil.WithEmptyDir(), testutil.WithQuota("64Mi")),
			[]problem{{"spec", "scale to 3 members first"}}, nil},
		{"1-member emptyDir scaled to 3 with a version change: the data is copied first", cluster(testutil.WithReplicas(1), testutil.WithEmptyDir(), testutil.WithVersion("3.6.15")),
			cluster(testutil.WithReplicas(3), testutil.WithEmptyDir(), testutil.WithVersion("3.6.16")), nil, []string{"changing spec.version " + roll}},
		{"1-member on a claim: the data survives the restart", cluster(testutil.WithReplicas(1), testutil.WithVersion("3.6.15")),
			cluster(testutil.WithReplicas(1), testutil.WithVersion("3.6.16")), nil, []string{"changing spec.version " + roll}},

		// Certificates the user keeps: only with TLS off on both ports can they be added or removed.
		{"TLS Secrets added to a TLS cluster", cluster(testutil.WithTLS(true, true)), cluster(testutil.WithTLS(true, true), testutil.WithTLSSecrets("s", "p", "c")),
			[]problem{{"spec.tls.secrets", "cannot be added while TLS is on: the members trust only the CAs they started with"}}, nil},
		{"TLS Secrets removed", cluster(testutil.WithTLS(true, true), testutil.WithTLSSecrets("s", "p", "c")), cluster(testutil.WithTLS(true, true)),
			[]problem{{"spec.tls.secrets", "cannot be removed while TLS is on"}}, nil},
		{"TLS Secrets added while switching TLS on", cluster(testutil.WithTLS(false, false)), cluster(testutil.WithTLS(true, true), testutil.WithTLSSecrets("s", "p", "c")), nil,
			[]string{"turning TLS on for the client port", "turning TLS on for the peer port", "changing spec.tls.client.enabled, spec.tls.peer.enabled " + roll}},
		{"TLS Secret renamed", cluster(testutil.WithTLS(true, true), testutil.WithTLSSecrets("s", "p", "c")), cluster(testutil.WithTLS(true, true), testutil.WithTLSSecrets("s2", "p", "c")), nil,
			[]string{"changing spec.tls.secrets " + roll}},
		{"TLS switched off on both ports, the Secrets kept", cluster(testutil.WithTLS(true, true), testutil.WithTLSSecrets("s", "p", "c")),
			cluster(testutil.WithTLS(false, false), testutil.WithTLSSecrets("s", "p", "c")), nil,
			[]string{"turning TLS off for the client port", "turning TLS off for the peer port", "changing spec.tls.client.enabled, spec.tls.peer.enabled " + roll}},
		{"TLS Secrets removed once TLS is off", cluster(testutil.WithTLS(false, false), testutil.WithTLSSecrets("s", "p", "c")), cluster(testutil.WithTLS(false, false)), nil, nil},
		{"peer Secret dropped with the switch off of its port", cluster(testutil.WithTLS(true, true), testutil.WithTLSSecrets("s", "p", "c")),
			cluster(testutil.WithTLS(true, false), testutil.WithTLSSecrets("s", "", "c")),
			[]problem{{"spec.tls.secrets.peer", "the members use Secret p until the switch off has finished; remove it afterwards"}}, nil},
		{"peer Secret dropped after its port is off", cluster(testutil.WithTLS(true, false), testutil.WithTLSSecrets("s", "p", "c")),
			cluster(testutil.WithTLS(true, false), testutil.WithTLSSecrets("s", "", "c")), nil, []string{"changing spec.tls.secrets " + roll}},
		{"peer port turned on without its Secret", cluster(testutil.WithTLS(true, false), testutil.WithTLSSecrets("s", "", "c")), cluster(testutil.WithTLS(true, true), testutil.WithTLSSecrets("s", "", "c")),
			[]problem{{"spec.tls.secrets.peer", "name the Secret of the peer certificate"}}, nil},

		// A cert-manager issuer: only with TLS off on both ports can it be added, removed or changed.
		{"issuer added to a TLS cluster", cluster(testutil.WithTLS(true, true)), cluster(testutil.WithTLS(true, true), testutil.WithIssuer("ca", "")),
			[]problem{{"spec.tls.issuerRef", "cannot be added, removed or changed while TLS is on, nor until a switch off has finished"}}, nil},
		{"issuer removed", cluster(testutil.WithTLS(true, false), testutil.WithIssuer("ca", "")), cluster(testutil.WithTLS(true, false)),
			[]problem{{"spec.tls.issuerRef", "switch TLS off first"}}, nil},
		{"issuer changed", cluster(testutil.WithTLS(false, true), testutil.WithIssuer("ca", ""), issued), cluster(testutil.WithTLS(false, true), testutil.WithIssuer("ca", "ClusterIssuer")),
			[]problem{{"spec.tls.issuerRef", "cannot be added, removed or changed while TLS is on"}}, nil},
		{"issuer changed on a cluster with members", cluster(testutil.WithTLS(true, true), testutil.WithIssuer("ca", ""), func(c *etcdv1beta1.EtcdCluster) {
			c.Status.Members = []etcdv1beta1.MemberStatus{{Name: "demo-0"}}
		}), cluster(testutil.WithTLS(true, true), testutil.WithIssuer("other", "")),
			[]problem{{"spec.tls.issuerRef", "cannot be added, removed or changed while TLS is on"}}, nil},
		{"issuer name fixed before any certificate was issued", cluster(testutil.WithTLS(true, true), testutil.WithIssuer("typo", "")),
			cluster(testutil.WithTLS(true, true), testutil.WithIssuer("ca", "")), nil, nil},
		{"issuer's default kind written out", cluster(testutil.WithTLS(true, true), testutil.WithIssuer("ca", "")), cluster(testutil.WithTLS(true, true), testutil.WithIssuer("ca", "Issuer")), nil, nil},
		{"issuer added while switching TLS on", cluster(testutil.WithTLS(false, false)), cluster(testutil.WithTLS(true, true), testutil.WithIssuer("ca", "")), nil,
			[]string{"turning TLS on for the client port", "turning TLS on for the peer port", "changing spec.tls.client.enabled, spec.tls.peer.enabled " + roll}},
		{"issuer changed before a switch off has finished", cluster(testutil.WithTLS(false, false), testutil.WithIssuer("ca", ""), issued), cluster(testutil.WithTLS(false, false), testutil.WithIssuer("other", "")),
			[]problem{{"spec.tls.issuerRef", "nor until a switch off has finished (status.tls is gone then)"}}, nil},
		{"issuer removed once TLS is off", cluster(testutil.WithTLS(false, false), testutil.WithIssuer("ca", "")), cluster(testutil.WithTLS(false, false)), nil, nil},

		// TLS switched for a running cluster: admitted, with what it does.
		{"client TLS turned on", cluster(testutil.WithTLS(false, true)), cluster(testutil.WithTLS(true, true)), nil,
			[]string{"turning TLS on for the client port: every member serves both http:// and https://", "changing spec.tls.client.enabled " + roll}},
		{"peer TLS turned off", cluster(testutil.WithTLS(true, true)), cluster(testutil.WithTLS(true, false)), nil,
			[]string{"turning TLS off for the peer port updates each member's peer URL", "changing spec.tls.peer.enabled " + roll}},
		{"both turned on", cluster(testutil.WithTLS(false, false)), cluster(testutil.WithTLS(true, true)), nil,
			[]string{"turning TLS on for the client port", "turning TLS on for the peer port", "changing spec.tls.client.enabled, spec.tls.peer.enabled " + roll}},
		{"1-member emptyDir: a TLS switch would delete the only copy", cluster(testutil.WithReplicas(1), testutil.WithEmptyDir(), testutil.WithTLS(false, false)),
			cluster(testutil.WithReplicas(1), testutil.WithEmptyDir(), testutil.WithTLS(true, false)),
			[]problem{{"spec", "changing spec.tls.client.enabled restarts the only member of this 1-member emptyDir cluster"}}, nil},

		// Storage (C11).
		{"grow storage", cluster(testutil.WithStorageSize("1Gi")), cluster(testutil.WithStorageSize("2Gi")), nil, nil},
		{"same size written differently", cluster(testutil.WithStorageSize("1Gi")), cluster(testutil.WithStorageSize("1024Mi")), nil, nil},
		{"C11 shrink", cluster(testutil.WithStorageSize("2Gi")), cluster(testutil.WithStorageSize("1Gi")), []problem{{"spec.storage.size", "may only grow: it is 2Gi, and shrinking a volume is not supported"}}, nil},
		{"C11 size removed", cluster(testutil.WithStorageSize("2Gi")), cluster(testutil.WithStorageSize("")), []problem{{"spec.storage.size", "cannot be removed once set (it is 2Gi)"}}, nil},
		{"quota raised above storage.size", cluster(testutil.WithStorageSize("4Gi"), testutil.WithQuota("2Gi")), cluster(testutil.WithStorageSize("4Gi"), testutil.WithQuota("8Gi")),
			[]problem{{"spec.options.quotaBackendBytes", "must be below storage.size (4Gi)"}}, nil},
		{"quota set above the default size", cluster(testutil.WithStorageSize("")), cluster(testutil.WithStorageSize(""), testutil.WithQuota("4Gi")),
			[]problem{{"spec.options.quotaBackendBytes", "must be below the members' volume size, 1Gi"}}, nil},
		{"quota and storage raised together", cluster(testutil.WithStorageSize("4Gi"), testutil.WithQuota("2Gi")), cluster(testutil.WithStorageSize("16Gi"), testutil.WithQuota("8Gi")),
			nil, []string{"changing spec.options " + roll}},
		{"quota above storage.size kept as it was", cluster(testutil.WithStorageSize("1Gi"), testutil.WithQuota("2Gi")), cluster(testutil.WithStorageSize("1Gi"), testutil.WithQuota("2Gi"), testutil.WithReplicas(5)), nil, nil},
		{"emptyDir sizeLimit lowered below the quota", cluster(emptyDirLimit("4Gi"), testutil.WithQuota("2Gi")), cluster(emptyDirLimit("2Gi"), testutil.WithQuota("2Gi")),
			[]problem{{"spec.options.quotaBackendBytes", "must be below storage.emptyDir.sizeLimit (2Gi)"}}, nil},
		{"grown above 64Ti", cluster(testutil.WithStorageSize("1Ti")), cluster(testutil.WithStorageSize("1Pi")), []problem{{"spec.storage.size", "must be at most 64Ti"}}, nil},
		{"C11 size set below 64Mi", cluster(testutil.WithStorageSize("")), cluster(testutil.WithStorageSize("32Mi")), []problem{{"spec.storage.size", "at least 64Mi"}}, nil},
		{"C11 class change", cluster(testutil.WithStorageClass("fast")), cluster(testutil.WithStorageClass("slow")), []problem{{"spec.storage.storageClassName", `is immutable (it is "fast")`}}, nil},
		{"C11 class removal", cluster(testutil.WithStorageClass("fast")), cluster(testutil.WithStorageClass("")), []problem{{"spec.storage.storageClassName", `is immutable (it is "fast")`}}, nil},
		{"C11 class added", cluster(), cluster(testutil.WithStorageClass("fast")), []problem{{"spec.storage.storageClassName", "is immutable (it is the cluster's default class)"}}, nil},
		{"C11 PVC to emptyDir", cluster(), cluster(testutil.WithEmptyDir()), []problem{
			{"spec.storage.size", "cannot be removed once set"},
			{"spec.storage.emptyDir", "cannot be switched between emptyDir and persistent volumes"},
		}, nil},
		{"C11 emptyDir to PVC", cluster(testutil.WithEmptyDir()), cluster(), []problem{{"spec.storage.emptyDir", "cannot be switched"}}, nil},

		// Reserved flags.
		{"reserved flag added", cluster(), cluster(extraArgs("initial-cluster-state", "new")),
			[]problem{{"spec.options.extraArgs[initial-cluster-state]", "the operator decides the initial cluster state of each member"}}, nil},
		{"reserved flag kept as it was", cluster(testutil.WithReplicas(3), extraArgs("name", "x")), cluster(testutil.WithReplicas(5), extraArgs("name", "x")), nil, nil},
		{"reserved flag changed", cluster(extraArgs("name", "x")), cluster(extraArgs("name", "y")),
			[]problem{{"spec.options.extraArgs[name]", "the operator names each member"}}, nil},
		{"newline added to an extra flag", cluster(extraArgs("log-level", "debug")), cluster(extraArgs("log-level", "debug\n")),
			[]problem{{"spec.options.extraArgs[log-level]", `contains the control character '\n' at byte 5`}}, nil},
		{"extra flag with a newline kept as it was", cluster(testutil.WithReplicas(3), extraArgs("log-level", "debug\n")), cluster(testutil.WithReplicas(5), extraArgs("log-level", "debug\n")), nil, nil},

		// What changed is checked, not what was admitted before.
		{"metadata only, spec as admitted", cluster(testutil.WithReplicas(2), extraArgs("name", "x")), cluster(testutil.WithReplicas(2), extraArgs("name", "x"), testutil.WithLabels("a", "b")), nil, nil},
		{"unchanged size below the minimum", cluster(testutil.WithStorageSize("32Mi")), cluster(testutil.WithStorageSize("32Mi"), testutil.WithReplicas(5)), nil, nil},

		// Warnings.
		{"image change rolls", cluster(), cluster(testutil.WithImage("mirror.example/etcd:v3.6.16")), nil, []string{"changing spec.image " + roll}},
		{"podTemplate change rolls", cluster(), cluster(podLabels("team", "a")), nil, []string{"changing spec.podTemplate " + roll}},
		{"options change rolls", cluster(), cluster(extraArgs("log-level", "debug")), nil, []string{"changing spec.options " + roll}},
		// What the pods are built from rolls them, not how the spec spells it.
		{"empty podTemplate rolls nothing", cluster(), cluster(podLabels()), nil, nil},
		{"podTemplate emptied rolls nothing", cluster(podLabels()), cluster(), nil, nil},
		{"empty options roll nothing", cluster(), cluster(extraArgs()), nil, nil},
		{"empty podTemplate on the only emptyDir member", cluster(testutil.WithReplicas(1), testutil.WithEmptyDir()), cluster(testutil.WithReplicas(1), testutil.WithEmptyDir(), podLabels()), nil, nil},
		{"no topology spread rolls", cluster(), cluster(noSpread), nil, []string{"changing spec.podTemplate " + roll}},
		{"no topology spread on the only emptyDir member", cluster(testutil.WithReplicas(1), testutil.WithEmptyDir()), cluster(testutil.WithReplicas(1), testutil.WithEmptyDir(), noSpread),
			[]problem{{"spec", "changing spec.podTemplate restarts the only member"}}, nil},
		{"extra flag value etcd refuses, changed", cluster(extraArgs("log-level", "debug")), cluster(extraArgs("log-level", "verbose")),
			[]problem{{"spec.options.extraArgs[log-level]", `unrecognized level: "verbose"`}}, nil},
		{"extra flag value etcd refuses, kept as admitted", cluster(testutil.WithReplicas(3), extraArgs("log-level", "verbose")), cluster(testutil.WithReplicas(3), extraArgs("log-level", "verbose", "max-wals", "5")),
			nil, []string{"changing spec.options " + roll}},
		{"extra flag value etcd refuses, kept through an upgrade to 3.6", cluster(testutil.WithVersion("3.5.35"), extraArgs("log-level", "verbose")), cluster(testutil.WithVersion("3.6.16"), extraArgs("log-level", "verbose")),
			[]problem{{"spec.options.extraArgs[log-level]", `unrecognized level: "verbose"`}}, nil},
		{"several changes, one warning", cluster(testutil.WithVersion("3.6.15")), cluster(testutil.WithVersion("3.6.16"), testutil.WithImage("mirror.example/etcd:v3.6.16"), podLabels("a", "b"), extraArgs("log-level", "warn")),
			nil, []string{"changing spec.version, spec.image, spec.podTemplate, spec.options " + roll}},
		{"quota below a member's database", cluster(testutil.WithStorageSize("10Gi"), dbSizes(100<<20, 3<<30, 200<<20)), cluster(testutil.WithStorageSize("10Gi"), dbSizes(100<<20, 3<<30, 200<<20), testutil.WithQuota("2Gi")), nil, []string{
			"changing spec.options " + roll,
			"spec.options.quotaBackendBytes 2Gi is below the database size of member demo-1 (3221225472 bytes): etcd will raise NOSPACE and refuse writes",
		}},
		{"quota above every database", cluster(testutil.WithStorageSize("10Gi"), dbSizes(100<<20, 3<<30)), cluster(testutil.WithStorageSize("10Gi"), dbSizes(100<<20, 3<<30), testutil.WithQuota("8Gi")), nil, []string{"changing spec.options"}},
		{"quota unchanged", cluster(testutil.WithQuota("2Gi"), dbSizes(3<<30)), cluster(testutil.WithQuota("2Gi"), dbSizes(3<<30), testutil.WithReplicas(5)), nil, nil},
		{"retain to delete", cluster(testutil.WithRetainPolicy(etcdv1beta1.RetainPolicyRetain)), cluster(testutil.WithRetainPolicy(etcdv1beta1.RetainPolicyDelete)), nil, []string{
			"spec.storage.retainPolicy is now Delete: the claims of removed members, and every claim when the cluster is deleted, are deleted with their data"}},
		{"delete stays delete", cluster(testutil.WithRetainPolicy("")), cluster(testutil.WithRetainPolicy(etcdv1beta1.RetainPolicyDelete)), nil, nil},
		{"delete to retain", cluster(), cluster(testutil.WithRetainPolicy(etcdv1beta1.RetainPolicyRetain)), nil, nil},
		{"restore on quorum loss turned on", cluster(backupSpec("@hourly", "", nil)), cluster(backupSpec("@hourly", "", nil), testutil.WithRestoreOnQuorumLoss(true)), nil, []string{
			"recreates the cluster from the most up-to-date copy, a survivor's or a backup's"}},
		{"restore on quorum loss stays on", cluster(testutil.WithRestoreOnQuorumLoss(true), backupSpec("@hourly", "", nil)), cluster(testutil.WithRestoreOnQuorumLoss(true), backupSpec("@daily", "", nil)), nil, nil},
		{"schedule removed while restore is on", cluster(testutil.WithRestoreOnQuorumLoss(true), backupSpec("@hourly", "", nil)), cluster(testutil.WithRestoreOnQuorumLoss(true), testutil.WithReplicas(5)), nil, []string{
			"only EtcdBackups created by hand", "spec.backup.destination is not"}},
		{"restore on quorum loss turned off", cluster(testutil.WithRestoreOnQuorumLoss(true)), cluster(testutil.WithRestoreOnQuorumLoss(false)), nil, nil},
		{"errors drop warnings", cluster(), cluster(testutil.WithReplicas(1), testutil.WithStorageSize("512Mi")), []problem{{"spec.storage.size", "may only grow"}}, nil},
		{"every problem at once", cluster(testutil.WithVersion("3.5.20"), testutil.WithStorageClass("fast")), cluster(testutil.WithVersion("3.6.16"), testutil.WithReplicas(2), testutil.WithStorageClass("slow"), testutil.WithStorageSize("512Mi"), extraArgs("name", "x")), []problem{
			{"spec.replicas", "must be odd"},
			{"spec.version", "3.5.26 or later"},
			{"spec.storage.size", "may only grow"},
			{"spec.storage.storageClassName", "immutable"},
			{"spec.options.extraArgs[name]", "cannot be set through extraArgs"},
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs, warnings := ValidateUpdate(tc.old, tc.c)
			checkErrors(t, errs, tc.errs)
			checkWarnings(t, warnings, tc.warnings)
		})
	}
}

func TestDefault(t *testing.T) {
	for in, want := range map[string]string{
		"v3.6.16": "3.6.16",
		"3.6.16":  "3.6.16",
		"":        "",
		"v":       "v",
		"vfoo":    "vfoo", // left for the schema to refuse as typed
		"V3.6.16": "V3.6.16",
	} {
		c := cluster(testutil.WithVersion(in))
		Default(c)
		if c.Spec.Version != want {
			t.Errorf("Default(%q) = %q, want %q", in, c.Spec.Version, want)
		}
	}
}

func TestDefaultOnCreateKeepsWhatIsSet(t *testing.T) {
	c := &etcdv1beta1.EtcdCluster{}
	c.Spec.TLS = &etcdv1beta1.TLSSpec{Peer: &etcdv1beta1.TLSListenerSpec{Enabled: false}}
	DefaultOnCreate(c)
	if !c.Spec.ClientTLS() || c.Spec.PeerTLS() {
		t.Errorf("client %v peer %v; want the unset client port on and the peer port left off", c.Spec.ClientTLS(), c.Spec.PeerTLS())
	}
	if o := c.Spec.Options; o == nil || o.AutoCompactionMode != etcdv1beta1.AutoCompactionPeriodic || o.AutoCompactionRetention != "1h" {
		t.Errorf("options %+v; want periodic auto-compaction keeping 1h", o)
	}
	// compaction the user chose is kept, whichever field they set
	byRevision := &etcdv1beta1.EtcdCluster{}
	byRevision.Spec.Options = &etcdv1beta1.EtcdOptions{AutoCompactionMode: etcdv1beta1.AutoCompactionRevision, AutoCompactionRetention: "10000"}
	DefaultOnCreate(byRevision)
	if o := byRevision.Spec.Options; o.AutoCompactionMode != etcdv1beta1.AutoCompactionRevision || o.AutoCompactionRetention != "10000" {
		t.Errorf("revision compaction became %+v", o)
	}
	// no spec.tls at all: as stored by a cluster created before it existed, which the operator serves in
	// plain text
	if legacy := (&etcdv1beta1.EtcdCluster{}); legacy.Spec.AnyTLS() {
		t.Error("a cluster without spec.tls is read as TLS")
	}
}

// TestNetworkPolicyByDefault: with the installer's NetworkPolicy default, a new cluster that does not
// mention spec.networkPolicy gets one; a cluster that says otherwise, and an update, keep what they say.
func TestNetworkPolicyByDefault(t *testing.T) {
	create := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create}})
	update := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update}})
	on := &EtcdClusterDefaulter{Defaults: Defaults{NetworkPolicy: true}}
	c := cluster()
	if err := on.Default(create, c); err != nil || !c.Spec.NetworkPolicyEnabled() || !c.Spec.ClientTLS() {
		t.Errorf("new cluster: %v, networkPolicy %+v, client TLS %v; want both on", err, c.Spec.NetworkPolicy, c.Spec.ClientTLS())
	}
	optOut := cluster()
	optOut.Spec.NetworkPolicy = &etcdv1beta1.NetworkPolicySpec{Enabled: false}
	if err := on.Default(create, optOut); err != nil || optOut.Spec.NetworkPolicyEnabled() {
		t.Errorf("a new cluster that opts out: %v, networkPolicy %+v", err, optOut.Spec.NetworkPolicy)
	}
	existing := cluster()
	if err := on.Default(update, existing); err != nil || existing.Spec.NetworkPolicy != nil {
		t.Errorf("an update: %v, networkPolicy %+v; want it left alone", err, existing.Spec.NetworkPolicy)
	}
	plain := cluster()
	if err := (&EtcdClusterDefaulter{}).Default(create, plain); err != nil || plain.Spec.NetworkPolicy != nil {
		t.Errorf("without the default: %v, networkPolicy %+v", err, plain.Spec.NetworkPolicy)
	}
}
