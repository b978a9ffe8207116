package controller

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/ownedcache"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// k8s is a client of the test API server, without a cache: what it reads is what the server has.
var k8s client.Client

// operatorLogs holds everything the manager and the reconcilers log, at every verbosity, for tests that
// search it (TestAuthAndTLSLeakNoSecrets).
var operatorLogs = &testutil.SyncBuffer{}

// TestMain starts a real kube-apiserver and etcd, and the EtcdCluster reconciler in a manager against
// them, talking to real etcd members through the real client.
// testOperatorNamespace is where the operator the tests run would run as a pod.
const testOperatorNamespace = "etcd-operator-system"

func TestMain(m *testing.M) {
	// every verbosity: a secret logged only at V(5) leaks as well
	ctrl.SetLogger(zap.New(zap.WriteTo(operatorLogs), zap.Level(zapcore.Level(-10))))
	env, cfg, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// the operator's cache and client (cmd/etcd-operator): the kinds it creates cached only with its
	// label, reads of its own objects that miss the cache answered as ownedcache says
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testenv.Scheme,
		Cache:                  ownedcache.Options(),
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: ownedcache.Uncached()}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cli := metrics.CountingClient(ownedcache.Client(mgr.GetClient(), mgr.GetAPIReader()))
	r := &EtcdClusterReconciler{
		Client:     cli,
		Recorder:   mgr.GetEventRecorder("etcd-operator"),
		EtcdClient: etcd.New,
		Options: resources.Options{OperatorImage: testOperatorImage, OperatorNamespace: testOperatorNamespace,
			OperatorPodLabels: map[string]string{"app.kubernetes.io/name": "etcd-operator", "pod-template-hash": "5d8f7c9b4"}},
		HealthCheckInterval: 5 * time.Second,
		// compare hashes on every healthy pass, so tests see the DataInconsistent condition soon
		ConsistencyCheckInterval: time.Second,
		EtcdTimeout:              2 * time.Second,
		RecoveryDelay:            2 * time.Second,
		APIReader:                mgr.GetAPIReader(),
	}
	if err := r.SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	br := &EtcdBackupReconciler{
		Client:   cli,
		Recorder: mgr.GetEventRecorder("etcd-operator"),
		Options:  resources.Options{OperatorImage: testOperatorImage},
	}
	if err := br.SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
	_ = env.Stop()
	os.Exit(code)
}
