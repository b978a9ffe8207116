//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// enforceNetworkPolicies makes the cluster enforce NetworkPolicies for the rest of the test:
// $E2E_NETPOL_ENFORCER is a script run with "start" now and "stop" when the test ends (make test-e2e
// sets hack/netpol-enforcer.sh for the local cluster), or "cluster" when the cluster's network plugin
// enforces them on its own.
func enforceNetworkPolicies(t *testing.T) {
	t.Helper()
	enforcer := os.Getenv("E2E_NETPOL_ENFORCER")
	switch enforcer {
	case "":
		t.Fatal("E2E_NETPOL_ENFORCER is not set: name a script that starts (\"start\") and stops (\"stop\") NetworkPolicy enforcement, " +
			"or set it to \"cluster\" when the cluster's network plugin enforces NetworkPolicies (make test-e2e sets it for the local cluster)")
	case "cluster":
		return
	}
	run := func(arg string) error {
		out, err := exec.Command("bash", enforcer, arg).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %w\n%s", enforcer, arg, err, out)
		}
		t.Logf("%s %s: %s", enforcer, arg, strings.TrimSpace(string(out)))
		return nil
	}
	t.Cleanup(func() {
		if err := run("stop"); err != nil {
			t.Error(err)
		}
	})
	if err := run("start"); err != nil {
		t.Fatal(err)
	}
}

// target is a TCP address a probe pod connects to, and whether the connection must succeed.
type target struct {
	what, addr string
	open       bool
}

// probeScript returns a POSIX shell script that connects to each target and exits 1 unless each one
// that must be open accepts a connection within 15 s (a new pod's address reaches an enforcer's
// allow-lists within about a second) and each one that must be closed refuses or times out 3 times in
// a row.
func probeScript(targets []target) string {
	var b strings.Builder
	b.WriteString(`fail=0
conn() { nc -w 2 "$1" "$2" -e /bin/true >/dev/null 2>&1; }
check() {
  if [ "$4" = open ]; then
    i=0
    while [ $i -lt 30 ]; do conn "$2" "$3" && { echo "$1 ($2:$3): open"; return; }; i=$((i+1)); sleep 0.5; done
    echo "$1 ($2:$3): closed, want open"; fail=1
  else
    for i in 1 2 3; do conn "$2" "$3" && { echo "$1 ($2:$3): open, want closed"; fail=1; return; }; sleep 0.3; done
    echo "$1 ($2:$3): closed"
  fi
}
`)
	for _, tg := range targets {
		host, port, _ := strings.Cut(tg.addr, ":")
		want := "closed"
		if tg.open {
			want = "open"
		}
		fmt.Fprintf(&b, "check %q %s %s %s\n", tg.what, host, port, want)
	}
	b.WriteString("exit $fail\n")
	return b.String()
}

// probeFrom runs a pod in namespace ns with labels that connects to targets (probeScript), and fails
// the test with the pod's output unless every target is as it must be.
func probeFrom(t *testing.T, ns string, labels map[string]string, targets []target) {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-", Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "probe", Image: shellImage(t), ImagePullPolicy: corev1.PullNever,
				Command:                  []string{"/bin/sh", "-c", probeScript(targets)},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
		},
	}
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatalf("create a probe pod in %s: %v", ns, err)
	}
	defer func() { _ = k8s.Delete(context.Background(), p) }()
	var out string
	poll.Eventually(t, 2*time.Minute, "the probe pod in "+ns+" finished", func(ctx context.Context) error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated != nil {
				out = cs.State.Terminated.Message
			}
		}
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	if p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("from a pod in %s labelled %v:\n%s", ns, labels, out)
		return
	}
	t.Logf("from a pod in %s labelled %v: as required (%d addresses)", ns, labels, len(targets))
}

// TestNetworkPolicyEnforced: with spec.networkPolicy on, under a network plugin that enforces
// NetworkPolicies, the members still form a cluster (the peer port between members), the operator
// still manages it (it becomes Available, and a member pod deleted is recreated and rejoins), a backup
// Job still reaches the client port; a pod in another namespace reaches neither the client nor the
// peer port, a pod of the cluster's namespace the client port only when clientFrom selects it, and
// never the peer port. Switched off, the policy goes and the other namespace reaches both ports again
// (the probes see open ports when there are).
func TestNetworkPolicyEnforced(t *testing.T) {
	const ns, other = "e2e-netpol", "e2e-netpol-other"
	enforceNetworkPolicies(t)
	allowed := map[string]string{"role": "etcd-client"}
	c := newCluster(t, ns, "np", 3, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.NetworkPolicy = &etcdv1beta1.NetworkPolicySpec{Enabled: true, ClientFrom: []networkingv1.NetworkPolicyPeer{
			{PodSelector: &metav1.LabelSelector{MatchLabels: allowed}},
		}}
	})
	ctx := context.Background()
	otherNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}
	if err := k8s.Create(ctx, otherNS); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), otherNS) })
	took, c := assertAvailable(t, c, availableTimeout)
	t.Logf("Available %s after creation, with the policy enforced", took.Round(100*time.Millisecond))
	policy := &networkingv1.NetworkPolicy{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.NetworkPolicyName(c)}, policy); err != nil {
		t.Fatalf("the cluster's NetworkPolicy: %v", err)
	}

	pods, err := memberPods(ctx, c)
	if err != nil || len(pods) != 3 {
		t.Fatalf("member pods: %v (%d)", err, len(pods))
	}
	svc := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Status.ClientService}, svc); err != nil {
		t.Fatalf("client Service: %v", err)
	}
	// each probe also reaches the metrics port, which the policy opens to every source (metricsFrom
	// is empty): a probe pod without a network fails
	ports := func(client, peer bool) []target {
		out := []target{{"client Service", fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, resources.ClientPort), client}}
		for name, p := range pods {
			out = append(out, target{name + " client port", fmt.Sprintf("%s:%d", p.Status.PodIP, resources.ClientPort), client},
				target{name + " peer port", fmt.Sprintf("%s:%d", p.Status.PodIP, resources.PeerPort), peer},
				target{name + " metrics port", fmt.Sprintf("%s:%d", p.Status.PodIP, resources.MetricsPort), true})
		}
		return out
	}
	probeFrom(t, other, nil, ports(false, false))
	probeFrom(t, other, allowed, ports(false, false)) // clientFrom's podSelector means the cluster's namespace
	probeFrom(t, ns, nil, ports(false, false))
	probeFrom(t, ns, allowed, ports(true, false))

	// a backup Job reaches the client port
	backupClaim(t, ns)
	createBackup(t, ns, "under-policy", c.Name, &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups"}})
	b, took := waitBackup(t, ns, "under-policy", etcdv1beta1.BackupSucceeded)
	t.Logf("backup under the policy: succeeded %s after creation, %d bytes", took.Round(100*time.Millisecond), b.Status.SizeBytes)

	// the operator keeps managing the members: a member pod deleted comes back and rejoins
	if err := k8s.Delete(ctx, pods["np-1"]); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, recoverTimeout, "np-1 recreated", func(ctx context.Context) error {
		now, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		if p := now["np-1"]; p == nil || p.UID == pods["np-1"].UID {
			return fmt.Errorf("np-1 not recreated yet")
		}
		return nil
	})
	took, _ = assertAvailable(t, c, recoverTimeout)
	t.Logf("a member pod deleted under the policy: 3/3 healthy again %s later", took.Round(100*time.Millisecond))

	// switched off, the policy goes, and the other namespace reaches the client port
	updateCluster(t, c, func(c *etcdv1beta1.EtcdCluster) { c.Spec.NetworkPolicy.Enabled = false })
	poll.Eventually(t, statusTimeout, "the NetworkPolicy deleted", func(ctx context.Context) error {
		return goneErr(k8s.Get(ctx, client.ObjectKeyFromObject(policy), &networkingv1.NetworkPolicy{}))
	})
	pods, err = memberPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	probeFrom(t, other, nil, ports(true, true))
}
