//go:build e2e

// Package e2e tests the operator end to end on a real Kubernetes cluster: the one KUBECONFIG names
// (by default, the local single-node cluster that `make test-e2e` brings up), with the operator
// installed in namespace etcd-operator-system. The tests reach pod and Service IPs from the machine
// they run on, as they can on the local cluster, and freeze member processes through /proc to stop
// members from answering: run them on the node.
//
// Most tests run one at a time. The ones that mostly wait on the operator's timers while a writer runs
// (certificate renewals, CA changes, switching TLS, a backup schedule firing every minute) call t.Parallel(): Go runs them together once the
// others are done, `make test-e2e` up to three at once (-parallel 3), each on a cluster in a namespace
// of its own; none of them restarts the operator or reads its process-wide metrics. The tests that
// kill, set aside or replace the operator (TestOperatorFailover, TestHelmInstall, TestOperatorUpgrade)
// are serial ones, and leave the suite's operator installed and admitting when they end.
package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// Timeouts, named once.
const (
	// availableTimeout bounds apply -> Available of a new cluster.
	availableTimeout = 120 * time.Second
	// recoverTimeout bounds a member pod's return after it was deleted.
	recoverTimeout = 90 * time.Second
	// deleteTimeout bounds the removal of everything a deleted cluster owned, including the members'
	// 30 s termination grace period when their processes are frozen.
	deleteTimeout = 90 * time.Second
	// statusTimeout bounds how soon the status shows a change of the pods.
	statusTimeout = 15 * time.Second
	// idleWindow is how long an idle cluster is watched for writes and reconciles (C14).
	idleWindow = 60 * time.Second
	// loadedWindow is how long the operator's API writes are counted while a client writes to a
	// settled cluster.
	loadedWindow = 30 * time.Second
)

var (
	k8s    client.Client
	kube   *kubernetes.Clientset
	config *rest.Config
)

func TestMain(m *testing.M) {
	if os.Getenv("KUBECONFIG") == "" {
		fmt.Fprintln(os.Stderr, "KUBECONFIG is not set: run the end-to-end tests with `make test-e2e`")
		os.Exit(1)
	}
	// admission warnings (for example on a 1-member cluster) are logged through controller-runtime's logger
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	var err error
	config, err = ctrl.GetConfig()
	if err == nil {
		k8s, err = client.New(config, client.Options{Scheme: testenv.Scheme})
	}
	if err == nil {
		kube, err = kubernetes.NewForConfig(config)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect to the cluster:", err)
		os.Exit(1)
	}
	// What the README's install steps wait for before the first EtcdCluster is applied.
	took, err := waitAdmission(admissionTimeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "the operator does not admit EtcdClusters:", err)
		os.Exit(1)
	}
	fmt.Printf("the operator admits EtcdClusters (waited %s)\n", took.Round(100*time.Millisecond))
	if err := removeLeftovers(leftoverTimeout); err != nil {
		fmt.Fprintln(os.Stderr, "namespaces left by an earlier run:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// leftoverTimeout bounds the removal of the namespaces an earlier run left.
const leftoverTimeout = 3 * time.Minute

// removeLeftovers deletes the test namespaces ("e2e-…") that an earlier run left (a failed test keeps
// its namespace to be looked at), and waits until they are gone, so that a test never meets the
// cluster of an earlier run.
func removeLeftovers(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		list := &corev1.NamespaceList{}
		if err := k8s.List(ctx, list); err != nil {
			return err
		}
		var left []string
		for i := range list.Items {
			ns := &list.Items[i]
			if !strings.HasPrefix(ns.Name, "e2e-") {
				continue
			}
			left = append(left, ns.Name)
			if ns.DeletionTimestamp == nil {
				if err := k8s.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		fmt.Printf("removing namespaces left by an earlier run: %s\n", strings.Join(left, ", "))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still there after %s: %w", strings.Join(left, ", "), timeout, ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// poll polls the cluster under test: every 200 ms, each attempt with a context of 10 s.
var poll = testutil.Poller{Interval: 200 * time.Millisecond, AttemptTimeout: 10 * time.Second}
