//go:build e2e

// Package e2e tests the operator end to end on a real Kubernetes cluster: the one KUBECONFIG names
// (by default, the local single-node cluster that `make test-e2e` brings up), with the operator
// installed in namespace etcd-operator-system. The tests reach pod and Service IPs from the machine
// they run on, as they can on the local cluster, and freeze member processes through /proc to stop
// members from answering: run them on the node.
package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

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
	os.Exit(m.Run())
}

// poll polls the cluster under test: every 200 ms, each attempt with a context of 10 s.
var poll = testutil.Poller{Interval: 200 * time.Millisecond, AttemptTimeout: 10 * time.Second}
