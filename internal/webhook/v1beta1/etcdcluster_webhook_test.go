package v1beta1

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// The table tests above need no API server; the integration tests below start one on first use, with
// the webhook configurations exactly as dist/install.yaml installs them (failurePolicy,
// matchConditions) and this package's webhooks served by a controller-runtime manager.

const (
	// webhookTimeout bounds the start of the webhook server.
	webhookTimeout = 30 * time.Second
	validatingName = "vetcdcluster-v1alpha1.etcd.etcdkit.dev"
)

var (
	startOnce sync.Once
	env       *envtest.Environment
	envCfg    *rest.Config
	envErr    error
	stopMgr   context.CancelFunc
)

func TestMain(m *testing.M) {
	code := m.Run()
	if stopMgr != nil {
		stopMgr()
	}
	if env != nil {
		_ = env.Stop()
	}
	os.Exit(code)
}

// apiServer returns the configuration of a kube-apiserver whose EtcdCluster requests go through this
// package's webhooks, starting both on first use.
func apiServer(t *testing.T) *rest.Config {
	t.Helper()
	startOnce.Do(func() {
		ctrl.SetLogger(logr.Discard())
		env, envCfg, envErr = testenv.StartWithWebhooks(testenv.InstallFile())
		if envErr != nil {
			return
		}
		w := env.WebhookInstallOptions
		server := crwebhook.NewServer(crwebhook.Options{Host: w.LocalServingHost, Port: w.LocalServingPort, CertDir: w.LocalServingCertDir})
		mgr, err := ctrl.NewManager(envCfg, ctrl.Options{
			Scheme:                 testenv.Scheme,
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			WebhookServer:          server,
		})
		if err != nil {
			envErr = err
			return
		}
		if envErr = SetupEtcdClusterWebhookWithManager(mgr, Defaults{}, resources.Options{}.AdmissionPod); envErr != nil {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		stopMgr = cancel
		go func() { _ = mgr.Start(ctx) }()
		serving := server.StartedChecker()
		if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, webhookTimeout, true, func(context.Context) (bool, error) {
			envErr = serving(&http.Request{})
			return envErr == nil, nil
		}); err != nil && envErr == nil {
			envErr = err
		}
	})
	if envErr != nil {
		t.Fatalf("start kube-apiserver with the webhooks: %v", envErr)
	}
	return envCfg
}

// newClient returns a client of the test API server, without a cache, and the warnings it receives.
func newClient(t *testing.T) (client.Client, *testutil.Warnings) {
	t.Helper()
	cfg := rest.CopyConfig(apiServer(t))
	w := &testutil.Warnings{}
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c, w
}

var seq int

// create creates a cluster in namespace default under a name unique to the test, and fails t if the
// API server refuses it.
func create(t *testing.T, k8s client.Client, opts ...testutil.ClusterOption) *etcdv1beta1.EtcdCluster {
	t.Helper()
	c := newObject(opts...)
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatalf("create %s: %v", c.Name, err)
	}
	return c
}

// newObject is cluster(opts...) under a name unique to the test, in namespace default.
func newObject(opts ...testutil.ClusterOption) *etcdv1beta1.EtcdCluster {
	seq++
	c := cluster(opts...)
	c.Name, c.Namespace = fmt.Sprintf("w%d", seq), "default"
	return c
}

// update applies opts to the stored c and sends the update; c keeps what the API server returned.
func update(k8s client.Client, c *etcdv1beta1.EtcdCluster, opts ...testutil.ClusterOption) error {
	for _, o := range opts {
		o(c)
	}
	return k8s.Update(context.Background(), c)
}

// setStatus writes c's status through the status subresource, as the operator does.
func setStatus(t *testing.T, k8s client.Client, c *etcdv1beta1.EtcdCluster, opts ...testutil.ClusterOption) {
	t.Helper()
	for _, o := range opts {
		o(c)
	}
	if err := k8s.Status().Update(context.Background(), c); err != nil {
		t.Fatalf("update the status of %s: %v", c.Name, err)
	}
}

// denied fails t unless err is a 422 Invalid whose message has every one of mentions; byWebhook says
// it must come from the validating webhook rather than the CRD's schema.
func denied(t *testing.T, err error, byWebhook bool, mentions ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("allowed, want a 422 mentioning %q", mentions)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("%v (reason %s), want 422 Invalid", err, apierrors.ReasonForError(err))
	}
	if byWebhook && !strings.Contains(err.Error(), fmt.Sprintf("admission webhook %q denied the request", validatingName)) {
		t.Errorf("%v: not denied by the webhook", err)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("%v: does not mention %q", err, m)
		}
	}
}

// TestC09_VersionPathAtAdmission: version changes off etcd's upgrade path are refused with a message
// that names the allowed path, including those only the webhook can see (what the members run, the
// minimum patch before a minor upgrade); the object stays as it was.
func TestC09_VersionPathAtAdmission(t *testing.T) {
	k8s, w := newClient(t)
	ctx := context.Background()

	t.Run("create 3.4.x", func(t *testing.T) {
		err := k8s.Create(ctx, newObject(testutil.WithVersion("3.4.30")))
		denied(t, err, false, "spec.version")
	})
	t.Run("downgrade 3.6 to 3.5", func(t *testing.T) {
		c := create(t, k8s, testutil.WithVersion("3.6.16"))
		denied(t, update(k8s, c, testutil.WithVersion("3.5.35")), false, "spec.version", "downgraded")
	})
	t.Run("3.5.20 to 3.6 needs 3.5.26 first", func(t *testing.T) {
		c := create(t, k8s, testutil.WithVersion("3.5.20"))
		denied(t, update(k8s, c, testutil.WithVersion("3.6.16")), true,
			"spec.version", "upgrading to 3.6 needs every member on 3.5.26 or later first", "upgrade to 3.5.x (x ≥ 26) first")
	})
	t.Run("downgrade below what the members run", func(t *testing.T) {
		c := create(t, k8s, testutil.WithVersion("3.5.35"))
		setStatus(t, k8s, c, testutil.WithCurrentVersion("3.6.16"))
		denied(t, update(k8s, c, testutil.WithVersion("3.5.40")), true,
			"spec.version", "the members run etcd 3.6.16 and etcd cannot be downgraded to 3.5.40 in place")
		got := &etcdv1beta1.EtcdCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Version != "3.5.35" {
			t.Errorf("spec.version is %q after a refused change, want 3.5.35", got.Spec.Version)
		}
	})
	t.Run("3.5.35 to 3.6.16", func(t *testing.T) {
		c := create(t, k8s, testutil.WithVersion("3.5.35"))
		setStatus(t, k8s, c, testutil.WithCurrentVersion("3.5.35"))
		w.Take()
		if err := update(k8s, c, testutil.WithVersion("3.6.16")); err != nil {
			t.Fatalf("upgrade refused: %v", err)
		}
		checkWarnings(t, w.Take(), []string{"changing spec.version rolls every member one at a time; the leader last"})
	})
	t.Run("back from a release that does not exist, which no member took", func(t *testing.T) {
		c := create(t, k8s, testutil.WithVersion("3.6.16"))
		setStatus(t, k8s, c, testutil.WithCurrentVersion("3.6.16"), withMemberVersions("3.6.16", "3.6.16", "3.6.16"))
		if err := update(k8s, c, testutil.WithVersion("3.6.99")); err != nil {
			t.Fatalf("patch upgrade refused: %v", err)
		}
		// the first member's pod is restarting onto it: it answers no more, and may run 3.6.99 next
		setStatus(t, k8s, c, func(c *etcdv1beta1.EtcdCluster) { c.Status.Members[0].Version = "" })
		denied(t, update(k8s, c, testutil.WithVersion("3.6.16")), true, "spec.version", "are being changed to 3.6.99 already")
		// it waits for an image that does not exist: it never ran 3.6.99
		setStatus(t, k8s, c, pullingImage(0))
		if err := update(k8s, c, testutil.WithVersion("3.6.16")); err != nil {
			t.Errorf("going back to the version every member runs was refused: %v", err)
		}
	})
	t.Run("back below a member that took the change", func(t *testing.T) {
		c := create(t, k8s, testutil.WithVersion("3.6.16"))
		setStatus(t, k8s, c, testutil.WithCurrentVersion("3.6.16"), withMemberVersions("3.6.16", "3.6.16", "3.6.16"))
		if err := update(k8s, c, testutil.WithVersion("3.6.17")); err != nil {
			t.Fatalf("patch upgrade refused: %v", err)
		}
		setStatus(t, k8s, c, func(c *etcdv1beta1.EtcdCluster) { c.Status.Members[0].Version = "3.6.17" })
		denied(t, update(k8s, c, testutil.WithVersion("3.6.16")), true, "spec.version", "are being changed to 3.6.17 already")
	})
}

// TestC10_C11_DeniedAtAdmission: sizes and storage changes the operator cannot honour get a 422 that
// says why, and one answer lists every problem the webhook finds.
func TestC10_C11_DeniedAtAdmission(t *testing.T) {
	k8s, _ := newClient(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		opts      []testutil.ClusterOption
		byWebhook bool
		mentions  []string
	}{
		{"C10 replicas 0", []testutil.ClusterOption{testutil.WithReplicas(0)}, false, []string{"spec.replicas"}},
		{"C10 replicas 2", []testutil.ClusterOption{testutil.WithReplicas(2)}, false, []string{"spec.replicas", "odd"}},
		{"C10 replicas 4", []testutil.ClusterOption{testutil.WithReplicas(4)}, false, []string{"spec.replicas", "of 4 is 3"}},
		{"C10 replicas 11", []testutil.ClusterOption{testutil.WithReplicas(11)}, false, []string{"spec.replicas"}},
		{"C11 size 0", []testutil.ClusterOption{testutil.WithStorageSize("0")}, false, []string{"spec.storage.size", "at least 64Mi"}},
		{"C11 size -1Gi", []testutil.ClusterOption{testutil.WithStorageSize("-1Gi")}, false, []string{"spec.storage.size", "at least 64Mi"}},
		{"quota above storage.size", []testutil.ClusterOption{testutil.WithStorageSize("4Gi"), testutil.WithQuota("8Gi")}, true, []string{
			`spec.options.quotaBackendBytes: Invalid value: "8Gi": must be below storage.size (4Gi): the volume would fill up before the database reached its quota`,
		}},
		{"quota above the emptyDir sizeLimit", []testutil.ClusterOption{emptyDirLimit("1Gi"), testutil.WithQuota("2Gi")}, true, []string{
			`spec.options.quotaBackendBytes: Invalid value: "2Gi": must be below storage.emptyDir.sizeLimit (1Gi)`,
		}},
		{"backup every second", []testutil.ClusterOption{backupSpec("@every 1s", "", nil)}, true, []string{
			`spec.backup.schedule: Invalid value: "@every 1s": schedule "@every 1s" fires more often than once a minute`,
		}},
		{"restore key outside the destination", []testutil.ClusterOption{restoreKey("../other/b.db")}, false, []string{
			`spec.bootstrap.restore.source.key: Invalid value: "../other/b.db": restore.source.key must be a relative path such as 'apps/demo/nightly-1.db'`,
		}},
		{"size 1000000Ei", []testutil.ClusterOption{testutil.WithStorageSize("1000000Ei")}, false, []string{"spec.storage.size", "at most 64Ti"}},
		{"reserved flags, all listed", []testutil.ClusterOption{extraArgs("name", "x", "initial-cluster-state", "new", "log-level", "debug")}, true, []string{
			`spec.options.extraArgs[initial-cluster-state]: Forbidden: cannot be set through extraArgs: the operator decides the initial cluster state of each member`,
			`spec.options.extraArgs[name]: Forbidden: cannot be set through extraArgs: the operator names each member after its pod`,
		}},
		{"image that is not a reference", []testutil.ClusterOption{testutil.WithImage("registry.example/Etcd:v3.6.16")}, true, []string{
			`spec.image: Invalid value: "registry.example/Etcd:v3.6.16": is not an image reference`,
		}},
		{"extra flag value with a newline", []testutil.ClusterOption{extraArgs("log-level", "debug\n")}, true, []string{
			`spec.options.extraArgs[log-level]: Invalid value: "debug\n": contains the control character '\n' at byte 5`,
		}},
		{"a flag etcd 3.6 does not have", []testutil.ClusterOption{extraArgs("log-levle", "debug")}, true, []string{
			`spec.options.extraArgs[log-levle]: Invalid value: "log-levle": etcd 3.6 has no flag --log-levle and would refuse to start with it`,
		}},
		{"flags etcd accepts only to ignore them, one of a single letter", []testutil.ClusterOption{extraArgs("v", "true", "snapshot", "true")}, true, []string{
			`spec.options.extraArgs[snapshot]: Forbidden: etcd accepts --snapshot only to ignore it (a flag of etcd 2): it would have no effect`,
			`spec.options.extraArgs[v]: Forbidden: etcd accepts --v only to ignore it (a flag of etcd 2): it would have no effect`,
		}},
		{"a value etcd 3.6 refuses", []testutil.ClusterOption{extraArgs("log-level", "verbose")}, true, []string{
			`spec.options.extraArgs[log-level]: Invalid value: "verbose": etcd 3.6 refuses it as it starts (unrecognized level: "verbose"), so every member restarted with it would crash-loop`,
		}},
		{"risky and TLS flags", []testutil.ClusterOption{extraArgs("enable-pprof", "true", "discovery-srv-name", "x", "tls-min-version", "TLS1.3")}, true, []string{
			`spec.options.extraArgs[discovery-srv-name]: Forbidden: cannot be set through extraArgs: members are bootstrapped by the operator, not by discovery`,
			`spec.options.extraArgs[enable-pprof]: Forbidden: cannot be set through extraArgs: it serves /debug/pprof on the client port, unauthenticated, to every client that reaches it`,
			`spec.options.extraArgs[tls-min-version]: Forbidden: cannot be set through extraArgs: the operator manages TLS: use spec.tls`,
		}},
	} {
		t.Run("create "+tc.name, func(t *testing.T) {
			denied(t, k8s.Create(ctx, newObject(tc.opts...)), tc.byWebhook, tc.mentions...)
		})
	}

	t.Run("update C10 3 to 0", func(t *testing.T) {
		denied(t, update(k8s, create(t, k8s), testutil.WithReplicas(0)), false, "spec.replicas")
	})
	t.Run("update C11 shrink", func(t *testing.T) {
		denied(t, update(k8s, create(t, k8s, testutil.WithStorageSize("2Gi")), testutil.WithStorageSize("1Gi")), false, "spec.storage.size", "only grow")
	})
	t.Run("update C11 class change", func(t *testing.T) {
		denied(t, update(k8s, create(t, k8s, testutil.WithStorageClass("fast")), testutil.WithStorageClass("slow")), false, "spec.storage.storageClassName", "immutable")
	})
	t.Run("update, every problem the webhook sees", func(t *testing.T) {
		c := create(t, k8s, testutil.WithVersion("3.5.20"))
		denied(t, update(k8s, c, testutil.WithVersion("3.6.16"), extraArgs("data-dir", "/x")), true,
			"spec.version", "3.5.26 or later", "spec.options.extraArgs[data-dir]")
	})
	t.Run("update, an extraArgs value etcd 3.6 refuses", func(t *testing.T) {
		c := create(t, k8s, extraArgs("log-level", "debug"))
		denied(t, update(k8s, c, extraArgs("log-level", "verbose")), true,
			`spec.options.extraArgs[log-level]: Invalid value: "verbose"`, `unrecognized level: "verbose"`)
	})
	t.Run("update, allowed: grow and change the image", func(t *testing.T) {
		c := create(t, k8s)
		if err := update(k8s, c, testutil.WithStorageSize("2Gi"), testutil.WithImage("mirror.example/etcd:v3.6.16")); err != nil {
			t.Fatalf("refused: %v", err)
		}
	})
}

// TestReplicasOutOfRangeOneReason: a replica count below 1 or above 9 is refused for being out of
// range only, not also for being even (CEL's -1 % 2 is -1). A negative count gets a second message, of
// the API server's own /scale check of spec.replicas, which the CRD cannot turn off.
func TestReplicasOutOfRangeOneReason(t *testing.T) {
	k8s, _ := newClient(t)
	const scale = ".spec.replicas: Invalid value: %d: should be a non-negative integer"
	for _, tc := range []struct {
		replicas int32
		want     []string
	}{
		{-1, []string{"spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 1", fmt.Sprintf(scale, -1)}},
		{-2, []string{"spec.replicas: Invalid value: -2: spec.replicas in body should be greater than or equal to 1", fmt.Sprintf(scale, -2)}},
		{0, []string{"spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"}},
		{10, []string{"spec.replicas: Invalid value: 10: spec.replicas in body should be less than or equal to 9"}},
		{11, []string{"spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 9"}},
	} {
		t.Run(fmt.Sprint(tc.replicas), func(t *testing.T) {
			err := k8s.Create(context.Background(), newObject(testutil.WithReplicas(tc.replicas)))
			denied(t, err, false, tc.want...)
			var status apierrors.APIStatus
			if !errors.As(err, &status) || status.Status().Details == nil {
				t.Fatalf("%v: no details", err)
			}
			if causes := status.Status().Details.Causes; len(causes) != len(tc.want) {
				t.Errorf("%d reasons %+v, want %d: %q", len(causes), causes, len(tc.want), tc.want)
			}
		})
	}
}

// asUnstructured is c with change applied to its spec, as JSON the typed client cannot send (a field
// of another type than the Go struct's).
func asUnstructured(t *testing.T, c *etcdv1beta1.EtcdCluster, change func(spec map[string]any)) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(etcdv1beta1.GroupVersion.WithKind("EtcdCluster"))
	change(u.Object["spec"].(map[string]any))
	return u
}

// TestWrongTypeRefusedByTheSchema: a field of the wrong JSON type gets the CRD schema's message, with
// its field path and the type it must have, on create and on update, not the Go decoding error of the
// mutating webhook (which lets such an object through to the schema).
func TestWrongTypeRefusedByTheSchema(t *testing.T) {
	k8s, _ := newClient(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(spec map[string]any)
		want   string
	}{
		{`replicas "three"`, func(s map[string]any) { s["replicas"] = "three" },
			`spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`},
		{"options.extraArgs a list", func(s map[string]any) { s["options"] = map[string]any{"extraArgs": []any{"--foo"}} },
			`spec.options.extraArgs: Invalid value: "array": spec.options.extraArgs in body must be of type object: "array"`},
	} {
		check := func(t *testing.T, err error) {
			t.Helper()
			denied(t, err, false, tc.want)
			if err != nil && (strings.Contains(err.Error(), "cannot unmarshal") || strings.Contains(err.Error(), "admission webhook")) {
				t.Errorf("%v: the message is a webhook's, want the schema's alone", err)
			}
		}
		t.Run("create "+tc.name, func(t *testing.T) {
			check(t, k8s.Create(ctx, asUnstructured(t, newObject(), tc.change)))
		})
		t.Run("update "+tc.name, func(t *testing.T) {
			check(t, k8s.Update(ctx, asUnstructured(t, create(t, k8s), tc.change)))
		})
	}
}

// TestPodTemplateAsStored: what rolls the members is judged on the template the API server stores. A
// template whose every field it pruned as unknown is stored as {}, which rolls nothing, so even the
// only member of an emptyDir cluster may be given one; topologySpreadConstraints: [] (no constraint)
// is kept through the defaulting webhook and rolls the members.
func TestPodTemplateAsStored(t *testing.T) {
	k8s, w := newClient(t)
	ctx := context.Background()
	storedTemplate := func(c *etcdv1beta1.EtcdCluster) map[string]any {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(etcdv1beta1.GroupVersion.WithKind("EtcdCluster"))
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), u); err != nil {
			t.Fatal(err)
		}
		tmpl, _, _ := unstructured.NestedMap(u.Object, "spec", "podTemplate")
		return tmpl
	}
	rollWarnings := func() (rolls []string) {
		for _, m := range w.Take() {
			if strings.Contains(m, "rolls every member") || strings.Contains(m, "restarts the only member") {
				rolls = append(rolls, m)
			}
		}
		return rolls
	}

	only := create(t, k8s, testutil.WithReplicas(1), testutil.WithEmptyDir())
	w.Take()
	if err := k8s.Update(ctx, asUnstructured(t, only, func(s map[string]any) {
		s["podTemplate"] = map[string]any{"nodeSelectr": map[string]any{"disk": "ssd"}}
	})); err != nil {
		t.Fatalf("a template of unknown fields on the only emptyDir member refused: %v", err)
	}
	if tmpl := storedTemplate(only); tmpl == nil || len(tmpl) != 0 {
		t.Errorf("stored spec.podTemplate %v, want {} (its only field pruned)", tmpl)
	}
	if rolls := rollWarnings(); len(rolls) != 0 {
		t.Errorf("an empty template warned %q, want no roll", rolls)
	}

	c := create(t, k8s)
	w.Take()
	if err := k8s.Update(ctx, asUnstructured(t, c, func(s map[string]any) {
		s["podTemplate"] = map[string]any{"topologySpreadConstraints": []any{}}
	})); err != nil {
		t.Fatalf("topologySpreadConstraints: [] refused: %v", err)
	}
	if tsc, ok := storedTemplate(c)["topologySpreadConstraints"].([]any); !ok || len(tsc) != 0 {
		t.Errorf("stored topologySpreadConstraints %v, want [] kept", storedTemplate(c)["topologySpreadConstraints"])
	}
	if rolls := rollWarnings(); len(rolls) != 1 || !strings.Contains(rolls[0], "changing spec.podTemplate rolls every member") {
		t.Errorf("topologySpreadConstraints: [] warned %q, want that spec.podTemplate rolls every member", rolls)
	}
}

// TestVersionPrefixDefaulted: "v3.6.16" is stored as "3.6.16", on create and on update.
func TestVersionPrefixDefaulted(t *testing.T) {
	k8s, _ := newClient(t)
	c := create(t, k8s, testutil.WithVersion("v3.5.35"))
	if c.Spec.Version != "3.5.35" {
		t.Errorf("created with spec.version %q, want 3.5.35", c.Spec.Version)
	}
	if err := update(k8s, c, testutil.WithVersion("v3.6.16")); err != nil {
		t.Fatalf("update to v3.6.16: %v", err)
	}
	if c.Spec.Version != "3.6.16" {
		t.Errorf("updated to spec.version %q, want 3.6.16", c.Spec.Version)
	}
}

// TestWarnings: risky but legal changes are admitted with a warning that says what will happen.
func TestWarnings(t *testing.T) {
	k8s, w := newClient(t)
	for _, tc := range []struct {
		name   string
		create []testutil.ClusterOption
		status []testutil.ClusterOption
		change []testutil.ClusterOption
		want   []string
	}{
		{"create with one member", []testutil.ClusterOption{testutil.WithReplicas(1)}, nil, nil, []string{"spec.replicas is 1: a single member has no fault tolerance"}},
		{"scale down to one member", nil, nil, []testutil.ClusterOption{testutil.WithReplicas(1)}, []string{"spec.replicas is 1: a single member has no fault tolerance"}},
		{"pod template", nil, nil, []testutil.ClusterOption{podLabels("team", "a")}, []string{"changing spec.podTemplate rolls every member one at a time; the leader last"}},
		{"quota below a member's database", []testutil.ClusterOption{testutil.WithStorageSize("10Gi")}, []testutil.ClusterOption{dbSizes(1<<30, 3<<30, 1<<30)}, []testutil.ClusterOption{testutil.WithQuota("2Gi")}, []string{
			"changing spec.options rolls every member",
			"spec.options.quotaBackendBytes 2Gi is below the database size of member demo-1 (3221225472 bytes): etcd will raise NOSPACE and refuse writes",
		}},
		{"memory limit etcd outgrows", nil, nil, []testutil.ClusterOption{withMemoryLimit("20Mi")}, []string{
			"changing spec.podTemplate rolls every member",
			"spec.podTemplate.resources.limits.memory 20Mi is below 256Mi",
		}},
		{"retain policy back to Delete", []testutil.ClusterOption{testutil.WithRetainPolicy(etcdv1beta1.RetainPolicyRetain)}, nil, []testutil.ClusterOption{testutil.WithRetainPolicy(etcdv1beta1.RetainPolicyDelete)}, []string{
			"spec.storage.retainPolicy is now Delete",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w.Take()
			c := create(t, k8s, tc.create...)
			if tc.change == nil {
				checkWarnings(t, w.Take(), tc.want)
				return
			}
			checkWarnings(t, w.Take(), nil)
			if tc.status != nil {
				setStatus(t, k8s, c, tc.status...)
			}
			if err := update(k8s, c, tc.change...); err != nil {
				t.Fatalf("refused: %v", err)
			}
			checkWarnings(t, w.Take(), tc.want)
		})
	}
}

// TestMetadataUpdatesSkipTheWebhooks: with the webhook unreachable, updates that leave the spec alone
// (finalizers, labels) still go through, so clusters can be deleted while the operator is down;
// spec changes are refused (failurePolicy Fail).
func TestMetadataUpdatesSkipTheWebhooks(t *testing.T) {
	k8s, _ := newClient(t)
	ctx := context.Background()
	c := create(t, k8s)

	// A copy of the installed validating configuration whose webhook nobody serves.
	installed := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "etcd-operator-validating-webhook-configuration"}, installed); err != nil {
		t.Fatalf("get the installed validating webhook configuration: %v", err)
	}
	down := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "unreachable-" + installed.Name},
		Webhooks:   installed.Webhooks,
	}
	down.Webhooks[0].ClientConfig.URL = ptr.To("https://127.0.0.1:1/validate")
	if err := k8s.Create(ctx, down); err != nil {
		t.Fatalf("create %s: %v", down.Name, err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), down) })

	// Configuration changes reach the API server's admission chain through a watch: wait until a spec
	// change (a dry run, which changes nothing) calls the unreachable webhook.
	testutil.Eventually(t, webhookTimeout, "the unreachable webhook called", func(ctx context.Context) error {
		probe := c.DeepCopy()
		probe.Spec.Replicas = ptr.To[int32](5)
		err := k8s.Update(ctx, probe, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "failed calling webhook") {
			return nil
		}
		return fmt.Errorf("the dry run got %w", err)
	})
	if err := update(k8s, c, testutil.WithLabels("team", "a"), func(c *etcdv1beta1.EtcdCluster) {
		c.Finalizers = append(c.Finalizers, "example.com/test")
	}); err != nil {
		t.Fatalf("metadata update refused while the webhook is down: %v", err)
	}
	c.Finalizers = nil
	if err := k8s.Update(ctx, c); err != nil {
		t.Fatalf("finalizer removal refused while the webhook is down: %v", err)
	}
	err := update(k8s, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Storage.Size = ptr.To(resource.MustParse("4Gi")) })
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("spec change while the webhook is down: %v, want a failed webhook call", err)
	}
}

// TestTLSDefaultedOnCreateOnly: a new cluster gets TLS on both ports unless it says otherwise; a port's
// TLS can be switched afterwards (the operator switches the running members); a plain-text cluster
// stays plain text when it is updated otherwise.
func TestTLSDefaultedOnCreateOnly(t *testing.T) {
	k8s, _ := newClient(t)
	c := create(t, k8s)
	if !c.Spec.ClientTLS() || !c.Spec.PeerTLS() {
		t.Fatalf("created with spec.tls %+v; want TLS on both ports", c.Spec.TLS)
	}
	if o := c.Spec.Options; o == nil || o.AutoCompactionMode != etcdv1beta1.AutoCompactionPeriodic || o.AutoCompactionRetention != "1h" {
		t.Fatalf("created with spec.options %+v; want periodic auto-compaction keeping 1h", o)
	}
	if err := update(k8s, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.Options = nil }); err != nil || c.Spec.Options != nil {
		t.Fatalf("removing spec.options: %v (%+v); want it admitted, and not defaulted back", err, c.Spec.Options)
	}
	plain := create(t, k8s, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.TLS = &etcdv1beta1.TLSSpec{Client: &etcdv1beta1.TLSListenerSpec{Enabled: false}}
	})
	if plain.Spec.ClientTLS() || !plain.Spec.PeerTLS() {
		t.Fatalf("created with client TLS off: client %v, peer %v; want off and on", plain.Spec.ClientTLS(), plain.Spec.PeerTLS())
	}
	if err := update(k8s, plain, func(c *etcdv1beta1.EtcdCluster) { c.Spec.TLS.Client.Enabled = true }); err != nil || !plain.Spec.ClientTLS() {
		t.Fatalf("switching client TLS on: %v (client TLS %v); want it admitted", err, plain.Spec.ClientTLS())
	}
	if err := update(k8s, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.TLS = nil }); err != nil || c.Spec.AnyTLS() {
		t.Fatalf("removing spec.tls: %v (spec.tls %+v); want it admitted, and not defaulted back on", err, c.Spec.TLS)
	}

	// a cluster that opted out of TLS on both ports stays so when it is updated: the defaults apply on
	// create only
	legacy := newObject()
	legacy.Spec.TLS = &etcdv1beta1.TLSSpec{Client: &etcdv1beta1.TLSListenerSpec{}, Peer: &etcdv1beta1.TLSListenerSpec{}}
	if err := k8s.Create(context.Background(), legacy); err != nil {
		t.Fatal(err)
	}
	if err := update(k8s, legacy, testutil.WithStorageSize("2Gi")); err != nil {
		t.Fatalf("update of a plain-text cluster: %v", err)
	}
	if legacy.Spec.AnyTLS() {
		t.Errorf("an update turned TLS on: %+v", legacy.Spec.TLS)
	}
}
