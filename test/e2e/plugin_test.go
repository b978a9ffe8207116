//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/resources"
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
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl etcd %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	t.Logf("kubectl etcd %s (returned after %.1fs):\n%s", strings.Join(args, " "), time.Since(start).Seconds(), stdout.String())
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
	b := &etcdv1beta1.EtcdBackup{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "by-plugin"}, b); err != nil || b.Status.Phase != etcdv1beta1.BackupSucceeded {
		t.Fatalf("EtcdBackup by-plugin: phase %q, %v", b.Status.Phase, err)
	}

	manifest := runPlugin(t, bin, ns, "restore", "by-plugin", "--into", "demo-copy")
	restored := &etcdv1beta1.EtcdCluster{}
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
func assertPluginStatus(t testing.TB, bin string, c *etcdv1beta1.EtcdCluster) {
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
		if f[4] == "yes" && f[2] == string(etcdv1beta1.RoleVoter) {
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

// dayTwoTimeout bounds one day-2 command of the plugin: a replacement copies the data to a new member
// and waits for it to be promoted.
const dayTwoTimeout = 5 * time.Minute

// TestPluginDayTwo: on a 3-member cluster with a continuous writer, `kubectl etcd move-leader` moves
// etcd's leadership to a follower; `defrag` defragments every member (each database file shrinks
// after 16 MiB were written, deleted and compacted away), the new leader last; `replace-member
// --yes` gives the leader a new member ID on a new claim, and the cluster is Available with 3
// voters again; a request for an unknown member is refused. No acknowledged write is lost.
func TestPluginDayTwo(t *testing.T) {
	bin := buildPlugin(t)
	const ns = "e2e-plugin-day2"
	ctx := context.Background()
	c := newCluster(t, ns, "demo", 3)
	_, c = assertAvailable(t, c, availableTimeout)
	ep := clientServiceEndpoint(t, c)
	w := startWriter(t, ep)

	target := ""
	for _, m := range c.Status.Members {
		if !m.Leader {
			target = m.Name
		}
	}
	var moved struct{ Leader, LeaderID, PreviousLeader string }
	decodePlugin(t, runPlugin(t, bin, ns, "move-leader", c.Name, target, "-o", "json", "--timeout", pluginTimeout.String()), &moved)
	if moved.Leader != target || moved.PreviousLeader != c.Status.Leader || moved.LeaderID == "" {
		t.Errorf("move-leader %s: %+v", target, moved)
	}
	assertEtcdLeader(t, c, target)

	fragment(t, ep, c)
	asked := time.Now()
	var defrag struct {
		Members []struct {
			Name                                string
			DBSizeBeforeBytes, DBSizeAfterBytes int64
		}
		LastDefragmentation *etcdv1beta1.DefragmentationRecord
	}
	decodePlugin(t, runPlugin(t, bin, ns, "defrag", c.Name, "-o", "json", "--timeout", dayTwoTimeout.String()), &defrag)
	if len(defrag.Members) != 3 {
		t.Errorf("defrag reports %d members, want 3: %+v", len(defrag.Members), defrag)
	}
	for _, m := range defrag.Members {
		if m.DBSizeAfterBytes <= 0 || m.DBSizeAfterBytes >= m.DBSizeBeforeBytes {
			t.Errorf("defrag: %s's database file went from %d to %d bytes, want it smaller", m.Name, m.DBSizeBeforeBytes, m.DBSizeAfterBytes)
		}
	}
	if l := defrag.LastDefragmentation; l == nil || l.Member != target || l.Time.Time.Before(asked.Add(-time.Minute)) {
		t.Errorf("last defragmentation %+v, want the leader %s's, after the request", l, target)
	}

	refused := exec.Command(bin, "-n", ns, "move-leader", c.Name, "demo-9", "--timeout", pluginTimeout.String())
	if out, err := refused.CombinedOutput(); err == nil || !strings.Contains(string(out), "the operator refused the request: Refused etcd.etcdkit.dev/move-leader=demo-9: the cluster has no member demo-9") {
		t.Errorf("move-leader to an unknown member: %v\n%s", err, out)
	}

	c, err := getCluster(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	victim := c.Status.Leader
	oldClaim := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.PVCName(victim)}, oldClaim); err != nil {
		t.Fatal(err)
	}
	var replaced struct{ Member, PreviousID, ID string }
	decodePlugin(t, runPlugin(t, bin, ns, "replace-member", c.Name, victim, "--yes", "-o", "json", "--timeout", dayTwoTimeout.String()), &replaced)
	if replaced.Member != victim || replaced.ID == "" || replaced.ID == replaced.PreviousID || replaced.PreviousID == "" {
		t.Errorf("replace-member %s: %+v", victim, replaced)
	}
	assertReplaced(t, c, victim, replaced.ID, oldClaim)
	assertAvailable(t, c, availableTimeout)
	w.stopAndVerify(t, ep)
}

// decodePlugin decodes the plugin's -o json output into v.
func decodePlugin(t testing.TB, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("decode the plugin's output: %v\n%s", err, out)
	}
}

// assertEtcdLeader checks that every member of c agrees that member leads.
func assertEtcdLeader(t testing.TB, c *etcdv1beta1.EtcdCluster, member string) {
	t.Helper()
	id := memberID(t, c, member)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, clients := memberClients(ctx, t, c)
	poll.Eventually(t, statusTimeout, member+" leads", func(ctx context.Context) error {
		for name, p := range pods {
			st, err := clients[name].Status(ctx, podEndpoint(p))
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if st.Leader != id {
				return fmt.Errorf("%s says %s leads, want %s", name, etcd.FormatID(st.Leader), etcd.FormatID(id))
			}
		}
		return nil
	})
}

// fragment writes 16 values of 1 MiB through ep, deletes and compacts them away, and waits until the
// status reports every member's database file at 16 MiB at least: the size defrag reports as before.
func fragment(t testing.TB, ep string, c *etcdv1beta1.EtcdCluster) {
	t.Helper()
	writeDeleteCompact(t, etcdClient(t, ep), 16)
	poll.Eventually(t, 2*time.Minute, "the status reports 16 MiB files", func(ctx context.Context) error {
		got, err := getCluster(ctx, c)
		if err != nil {
			return err
		}
		for _, m := range got.Status.Members {
			if m.DBSizeBytes < 16<<20 {
				return fmt.Errorf("%s: %d bytes", m.Name, m.DBSizeBytes)
			}
		}
		return nil
	})
}

// assertReplaced checks that etcd lists member name of c as a voter with member ID id (hex), on
// another claim than old, beside two other voters.
func assertReplaced(t testing.TB, c *etcdv1beta1.EtcdCluster, name, id string, old *corev1.PersistentVolumeClaim) {
	t.Helper()
	poll.Eventually(t, statusTimeout, name+" a voter under ID "+id, func(ctx context.Context) error {
		pods, err := memberPods(ctx, c)
		if err != nil {
			return err
		}
		p := pods[name]
		if p == nil {
			return fmt.Errorf("no pod %s", name)
		}
		view, err := viewFrom(ctx, podEndpoint(p))
		if err != nil {
			return err
		}
		voters, found := 0, false
		for _, m := range view.members {
			if !m.IsLearner {
				voters++
			}
			found = found || (m.Name == name && !m.IsLearner && etcd.FormatID(m.ID) == id)
		}
		if !found || voters != 3 {
			return fmt.Errorf("members %+v", view.members)
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(name)}, pvc); err != nil {
			return err
		}
		if pvc.UID == old.UID {
			return fmt.Errorf("%s still runs on its old claim", name)
		}
		return nil
	})
}
