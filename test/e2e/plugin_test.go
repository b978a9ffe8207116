//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
)

// pluginTimeout bounds one command of the plugin that waits on the operator (pause, resume).
const pluginTimeout = 60 * time.Second

// buildPlugin builds cmd/kubectl-etcd into a temporary directory and returns its path.
func buildPlugin(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-etcd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/etcdkit/etcd-operator/cmd/kubectl-etcd").CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-etcd: %v\n%s", err, out)
	}
	return bin
}

// runPlugin runs the plugin against KUBECONFIG in namespace ns and returns its standard output; it
// fails the test when the plugin fails.
func runPlugin(t testing.TB, bin, ns string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, append([]string{"-n", ns}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl etcd %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	t.Logf("kubectl etcd %s:\n%s", strings.Join(args, " "), stdout.String())
	return stdout.String()
}

// TestPlugin: on a 3-member cluster, `kubectl etcd status` shows the 3 healthy members and the
// leader; `backup` to a claim follows the backup until it succeeds; `restore` prints a manifest that
// admission accepts; `pause` and `resume` return once the operator has observed them, and the
// cluster is Available again after.
func TestPlugin(t *testing.T) {
	bin := buildPlugin(t)
	const ns = "e2e-plugin"
	c := newCluster(t, ns, "demo", 3)
	_, c = assertAvailable(t, c, availableTimeout)

	assertPluginStatus(t, bin, c)

	backupClaim(t, ns)
	out := runPlugin(t, bin, ns, "backup", c.Name, "--name", "by-plugin", "--pvc", "backups", "--pvc-sub-path", "etcd",
		"--timeout", backupTimeout.String())
	if !strings.Contains(out, "Succeeded: ") || !strings.Contains(out, "pvc://backups/etcd/"+ns+"/demo/by-plugin.db") {
		t.Errorf("backup does not report its success and location:\n%s", out)
	}
	b := &etcdv1alpha1.EtcdBackup{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "by-plugin"}, b); err != nil || b.Status.Phase != etcdv1alpha1.BackupSucceeded {
		t.Fatalf("EtcdBackup by-plugin: phase %q, %v", b.Status.Phase, err)
	}

	manifest := runPlugin(t, bin, ns, "restore", "by-plugin", "--into", "demo-copy")
	restored := &etcdv1alpha1.EtcdCluster{}
	if err := yaml.UnmarshalStrict([]byte(manifest), restored); err != nil {
		t.Fatalf("decode the restore manifest: %v", err)
	}
	if err := k8s.Create(context.Background(), restored, client.DryRunAll); err != nil {
		t.Errorf("admission refuses the restore manifest: %v", err)
	}

	out = runPlugin(t, bin, ns, "pause", c.Name, "--timeout", pluginTimeout.String())
	if !strings.Contains(out, "Observed: phase Paused") {
		t.Errorf("pause does not report phase Paused:\n%s", out)
	}
	if out := runPlugin(t, bin, ns, "status", c.Name); !regexp.MustCompile(`(?m)^Paused:\s+yes$`).MatchString(out) {
		t.Errorf("status of the paused cluster:\n%s", out)
	}
	out = runPlugin(t, bin, ns, "resume", c.Name, "--timeout", pluginTimeout.String())
	if !strings.Contains(out, "Observed: phase") || strings.Contains(out, "phase Paused") {
		t.Errorf("resume does not report the cluster resumed:\n%s", out)
	}
	assertAvailable(t, c, availableTimeout)
}

// assertPluginStatus checks that `kubectl etcd status` shows c's 3 members healthy, its leader once,
// and that the list of the namespace's clusters shows it ready.
func assertPluginStatus(t testing.TB, bin string, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	out := runPlugin(t, bin, c.Namespace, "status", c.Name)
	if !strings.Contains(out, "Leader:") || !strings.Contains(out, c.Status.Leader) || !strings.Contains(out, "3/3") {
		t.Errorf("status header lacks the leader %s or 3/3 ready", c.Status.Leader)
	}
	_, table, found := strings.Cut(out, "\nNAME ")
	if !found {
		t.Fatalf("status has no members table")
	}
	var healthy, leaders int
	for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 7 {
			t.Fatalf("member line %q", line)
		}
		// NAME ID ROLE LEADER HEALTHY VERSION DB SIZE
		if f[4] == "yes" && f[2] == string(etcdv1alpha1.RoleVoter) {
			healthy++
		}
		if f[3] == "*" {
			leaders++
			if f[0] != c.Status.Leader {
				t.Errorf("status marks %s as leader, the cluster's status says %s", f[0], c.Status.Leader)
			}
		}
	}
	if healthy != 3 || leaders != 1 {
		t.Errorf("status shows %d healthy voters and %d leaders, want 3 and 1", healthy, leaders)
	}
	list := runPlugin(t, bin, c.Namespace, "status")
	if !strings.Contains(list, c.Name) || !strings.Contains(list, "Running") || !strings.Contains(list, "3/3") {
		t.Errorf("the list of clusters does not show %s Running 3/3", c.Name)
	}
}
