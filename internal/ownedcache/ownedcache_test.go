package ownedcache_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdkit/etcd-operator/internal/ownedcache"
	"github.com/etcdkit/etcd-operator/internal/testenv"
)

// start starts envtest and returns its config and an admin client.
func start(tb testing.TB) (*rest.Config, client.Client) {
	tb.Helper()
	env, cfg, err := testenv.Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = env.Stop() })
	k8s, err := client.New(cfg, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		tb.Fatal(err)
	}
	return cfg, k8s
}

// startCache starts a cache with opts until the test ends and waits for it to sync pods and Services.
func startCache(tb testing.TB, cfg *rest.Config, opts cache.Options) cache.Cache {
	tb.Helper()
	opts.Scheme = testenv.Scheme
	c, err := cache.New(cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	go func() { _ = c.Start(ctx) }()
	for _, o := range []client.Object{&corev1.Pod{}, &corev1.Service{}} {
		if _, err := c.GetInformer(ctx, o); err != nil {
			tb.Fatal(err)
		}
	}
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !c.WaitForCacheSync(syncCtx) {
		tb.Fatal("the cache did not sync")
	}
	return c
}

func pod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "registry.example/app:v1", Args: []string{"--listen=:8080", "--log-level=info"},
			Env: []corev1.EnvVar{{Name: "A", Value: "some value"}, {Name: "B", Value: "another value"}},
		}}},
	}
}

var managed = map[string]string{ownedcache.ManagedByLabel: ownedcache.ManagedBy}

// TestCacheHoldsOnlyManagedAndGetFallsBack: the cache of Options holds only the objects with the
// operator's label, without their managedFields (an update from the cache keeps the server's);
// Client's Get finds one without the label through the API server, and still says NotFound for one
// that does not exist.
func TestCacheHoldsOnlyManagedAndGetFallsBack(t *testing.T) {
	cfg, k8s := start(t)
	ctx := context.Background()
	for _, o := range []client.Object{
		pod("ours", managed), pod("theirs", map[string]string{"app": "x"}),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: "default"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
	} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	c := startCache(t, cfg, ownedcache.Options())
	// the labelled pod was created before the cache started, so synced means it is there
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Name != "ours" {
		t.Errorf("the cache holds pods %v, want only the labelled one", names(pods.Items))
	} else if mf := pods.Items[0].ManagedFields; mf != nil {
		t.Errorf("the cache holds the pod's managedFields %v, want none", mf)
	}
	// ... while the API server keeps them: an update of the cached pod, which sends none, keeps them
	ours := pods.Items[0].DeepCopy()
	ours.Labels["touched"] = "yes"
	if err := k8s.Update(ctx, ours); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(ours), ours); err != nil {
		t.Fatal(err)
	} else if len(ours.ManagedFields) == 0 || ours.Labels["touched"] != "yes" {
		t.Errorf("after an update from the cache, the pod has labels %v and managedFields %v, want the new label and the server's managedFields", ours.Labels, ours.ManagedFields)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "theirs"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("the cache holds an unlabelled Service: %v", err)
	}

	cached, err := client.New(cfg, client.Options{Scheme: testenv.Scheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		t.Fatal(err)
	}
	cli := ownedcache.Client(cached, k8s)
	for _, o := range []client.Object{&corev1.Pod{}, &corev1.Service{}} {
		if err := cli.Get(ctx, client.ObjectKey{Namespace: "default", Name: "theirs"}, o); err != nil {
			t.Errorf("Get of an unlabelled %T: %v", o, err)
		} else if o.GetName() != "theirs" {
			t.Errorf("Get of an unlabelled %T returned %q", o, o.GetName())
		}
	}
	if err := cli.Get(ctx, client.ObjectKey{Namespace: "default", Name: "absent"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a Service that does not exist: want NotFound, got %v", err)
	}
}

// countingReader counts the reads that reach the API server.
type countingReader struct {
	client.Reader
	gets atomic.Int32
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// lagging is a client whose cache has seen nothing yet: every Get says NotFound.
type lagging struct{ client.Client }

func (lagging) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(corev1.Resource("object"), key.Name)
}

// TestOwnedOnlyReads: an OwnedOnly read that misses the cache asks the API server only for a name the
// client created, or was refused as already existing, lately: a missing name costs no request, a name
// created a moment ago is found although the cache lags, and an object of the name that is not the
// operator's is found once its Create was refused.
func TestOwnedOnlyReads(t *testing.T) {
	_, k8s := start(t)
	ctx := context.Background()
	service := func() *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: "default"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	if err := k8s.Create(ctx, service()); err != nil {
		t.Fatal(err)
	}
	api := &countingReader{Reader: k8s}
	cli := ownedcache.Client(lagging{k8s}, api)
	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: "default", Name: name} }

	if err := cli.Get(ctx, key("absent"), &corev1.Service{}, ownedcache.OwnedOnly); !apierrors.IsNotFound(err) {
		t.Errorf("OwnedOnly Get of a missing Service: want NotFound, got %v", err)
	}
	if err := cli.Get(ctx, key("theirs"), &corev1.Service{}, ownedcache.OwnedOnly); !apierrors.IsNotFound(err) {
		t.Errorf("OwnedOnly Get of a Service the operator never made: want NotFound (not asked), got %v", err)
	}
	if n := api.gets.Load(); n != 0 {
		t.Errorf("OwnedOnly Gets of names never created asked the API server %d times, want 0", n)
	}

	if err := cli.Create(ctx, pod("fresh", managed)); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Pod{}
	if err := cli.Get(ctx, key("fresh"), got, ownedcache.OwnedOnly); err != nil || got.Name != "fresh" {
		t.Errorf("OwnedOnly Get of a pod created a moment ago, the cache lagging: %v (name %q)", err, got.Name)
	}
	if err := cli.Create(ctx, service()); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("Create of a Service of a name taken: want AlreadyExists, got %v", err)
	}
	for range 2 { // asked until the API server says it is gone
		svc := &corev1.Service{}
		if err := cli.Get(ctx, key("theirs"), svc, ownedcache.OwnedOnly); err != nil || svc.Name != "theirs" {
			t.Errorf("OwnedOnly Get of a Service whose Create was refused: %v (name %q)", err, svc.Name)
		}
	}
	if err := cli.Create(ctx, pod("dry", managed), client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	before := api.gets.Load()
	if err := cli.Get(ctx, key("dry"), &corev1.Pod{}, ownedcache.OwnedOnly); !apierrors.IsNotFound(err) || api.gets.Load() != before {
		t.Errorf("OwnedOnly Get after a dry-run Create: want NotFound without a request, got %v and %d requests", err, api.gets.Load()-before)
	}
}

func names(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i := range pods {
		out[i] = pods[i].Name
	}
	return out
}

// BenchmarkCacheMemory reports the heap that a synced cache of pods takes in a namespace of 2,000
// pods not managed by the operator and 20 that are, with the operator's label selection
// (ownedcache.ByObject) and without it. Run it alone:
//
//	go test -run '^$' -bench CacheMemory -benchtime 1x ./internal/ownedcache
func BenchmarkCacheMemory(b *testing.B) {
	cfg, k8s := start(b)
	ctx := context.Background()
	for i := range 2020 {
		labels := map[string]string{"app": "other", "pod-template-hash": "5d8f7c9b6"}
		if i < 20 {
			labels = managed
		}
		if err := k8s.Create(ctx, pod(fmt.Sprintf("p-%04d", i), labels)); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name string
		opts cache.Options
	}{
		{"unfiltered", cache.Options{}},
		{"managed-only", cache.Options{ByObject: ownedcache.ByObject()}},
		{"managed-only-without-managedfields", ownedcache.Options()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				before := heap()
				c := startCache(b, cfg, bc.opts)
				after := heap()
				pods := &corev1.PodList{}
				if err := c.List(ctx, pods); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(after-before)/(1<<20), "heap-MiB")
				b.ReportMetric(float64(len(pods.Items)), "cached-pods")
				runtime.KeepAlive(c)
			}
		})
	}
}

// heap returns the live heap after a collection.
func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
