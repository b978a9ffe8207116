//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testenv"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

const (
	// imageIDAnnotation is what hack/install-operator.sh puts on the operator's pod template: the ID of
	// the image it installed.
	imageIDAnnotation = "etcd.etcdkit.dev/image-id"
	// upgradeWatchTimeout bounds the watch after an operator upgrade: the new operator's first passes
	// and the next scheduled backup (every minute) finished.
	upgradeWatchTimeout = 150 * time.Second
)

// TestOperatorUpgrade: the operator of an earlier commit (hack/previous-release, or the ref
// E2E_UPGRADE_FROM names), installed with that commit's manifests, runs a 3-member cluster on claims
// with a backup every minute, created as v1alpha1; the operator is then upgraded to this tree's
// (hack/install-operator.sh: the CRDs store v1beta1 from then on, converted by the new operator)
// under a continuous writer. Until the new operator has made two passes over the cluster and the next
// scheduled backup succeeded, no member pod is recreated or restarted, etcd's members and cluster ID
// stay, and the cluster's status keeps every field it had (fields may be added) but what moves by
// itself; no acknowledged write is lost. The cluster has podTemplate: {}, which the earlier operator
// hashed apart from no template: the pods' spec hash annotation moves to this tree's hash, and
// nothing else about them changes. Only a change of the spec afterwards rolls the members, one
// at a time.
//
// It replaces the suite's operator, so it runs alone (no t.Parallel(): Go runs the parallel tests only
// once the serial ones are done), and it ends with this tree's operator installed again whatever
// happened.
func TestOperatorUpgrade(t *testing.T) {
	restoreOperatorAtEnd(t)
	took := runHack(t, "hack/install-previous-operator.sh")
	oldImage := operatorImage(t)
	t.Logf("the earlier operator (%s) installed with its own manifests in %s", oldImage, took.Round(100*time.Millisecond))

	// Until the upgrade, the cluster is written and read as v1alpha1: the version the earlier operator's
	// CRD serves, and that users' manifests of then are in.
	const ns = "e2e-operator-upgrade"
	newNamespace(t, ns)
	backupClaim(t, ns)
	c := testutil.EtcdCluster("demo", testutil.InNamespace(ns), testutil.WithReplicas(3), func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.Backup = &etcdv1beta1.BackupSpec{Schedule: "* * * * *", Destination: etcdv1beta1.BackupDestination{
			PVC: &etcdv1beta1.PVCDestination{ClaimName: "backups", SubPath: "etcd"}}}
		// stored as {}: the earlier operator hashed it apart from no template, this tree's does not,
		// and writes its hash on the pods instead of rolling them
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{}
	})
	asAlpha := &etcdv1alpha1.EtcdCluster{}
	if err := asAlpha.ConvertFrom(c); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(context.Background(), asAlpha); err != nil {
		t.Fatalf("create EtcdCluster %s/%s as v1alpha1: %v", ns, c.Name, err)
	}
	took, c = availableThroughAlpha(t, c)
	t.Logf("3-member cluster Available in %s under the earlier operator", took.Round(100*time.Millisecond))
	wr := startWriter(t, clientServiceEndpoint(t, c))
	// The status is compared as v1alpha1 before and after the upgrade, read every second.
	quiet := rest.CopyConfig(config)
	quiet.WarningHandlerWithContext = rest.NoWarnings{}
	alpha, err := client.New(quiet, client.Options{Scheme: testenv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// recorded once two reads a second apart agree: the status has settled after the bootstrap
	var before clusterState
	settled := false
	slowPoll.Eventually(t, statusTimeout, "the cluster's pods, members and status recorded", func(ctx context.Context) error {
		now, err := observeCluster(ctx, alpha, c)
		if err != nil {
			return err
		}
		if err := now.settled(); err != nil {
			return err
		}
		changes := before.changes(now)
		before, settled = now, settled || (before.pods != nil && len(changes) == 0)
		if !settled {
			return fmt.Errorf("settling: %v", changes)
		}
		return nil
	})
	t.Logf("before the upgrade: cluster ID %x, members %s, status revision %d", before.clusterID(), before.describe(), before.revision)

	start := time.Now()
	runHack(t, "hack/install-operator.sh")
	newImage := operatorImage(t)
	if newImage == oldImage {
		t.Fatalf("the operator still runs %s after hack/install-operator.sh", oldImage)
	}
	took = poll.Eventually(t, failoverTimeout, "a pod of the new operator holds the Lease", func(ctx context.Context) error {
		return leaderRuns(ctx, newImage)
	})
	tookOver := time.Now()
	t.Logf("operator upgraded to %s in %s; a new pod leads %s after the rollout", newImage, tookOver.Sub(start).Round(100*time.Millisecond), took.Round(100*time.Millisecond))

	passes, backup := watchUpgraded(t, alpha, c, before, tookOver)
	t.Logf("%s after the upgrade: %d status writes of the new operator, scheduled backup %s succeeded; no member pod restarted or recreated, members, cluster ID and status unchanged",
		time.Since(tookOver).Round(time.Second), passes, backup)
	// and the new operator sees nothing to roll: its hash of the unchanged spec is the pods', written on
	// them in place of the earlier operator's hash of the empty template
	hash, prev, err := specHashNow(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if hashes := before.specHashes(); len(hashes) != 1 || hashes[0] != prev {
		t.Errorf("under the earlier operator the member pods carried spec hash %v, want %s (its hash of podTemplate: {})", hashes, prev)
	}
	pods, err := memberPods(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	for n, p := range pods {
		if got := p.Annotations[etcdv1beta1.AnnotationSpecHash]; got != hash {
			t.Errorf("member pod %s carries spec hash %s; this tree's operator computes %s for the unchanged spec and will roll it", n, got, hash)
		}
	}
	wr.stopAndVerify(t, podEndpoint(pods["demo-0"]))

	// Only a change of the spec rolls the members, one at a time.
	const key, value = "example.com/rolled-by", "operator-upgrade-test"
	took, _ = rollAndCheck(t, c, false, func(c *etcdv1beta1.EtcdCluster) {
		c.Spec.PodTemplate = &etcdv1beta1.PodTemplate{Annotations: map[string]string{key: value}}
	}, func(cur *etcdv1beta1.EtcdCluster) error {
		pods, err := memberPods(context.Background(), cur)
		if err != nil {
			return err
		}
		for n, p := range pods {
			if p.Annotations[key] != value {
				return fmt.Errorf("pod %s has no annotation %s=%s yet", n, key, value)
			}
		}
		return nil
	})
	t.Logf("a pod template annotation then rolled the 3 members in %s", took.Round(100*time.Millisecond))
}

// availableThroughAlpha is assertAvailable of cluster c read through v1alpha1, and returns c as
// last read, converted to v1beta1 as this tree's conversion webhook does.
func availableThroughAlpha(t *testing.T, c *etcdv1beta1.EtcdCluster) (time.Duration, *etcdv1beta1.EtcdCluster) {
	t.Helper()
	var last *etcdv1beta1.EtcdCluster
	took := poll.Eventually(t, availableTimeout, "cluster "+c.Name+" Available (read as v1alpha1)", func(ctx context.Context) error {
		alpha := &etcdv1alpha1.EtcdCluster{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(c), alpha); err != nil {
			return err
		}
		got := &etcdv1beta1.EtcdCluster{}
		if err := alpha.ConvertTo(got); err != nil {
			return err
		}
		last = got
		if !meta.IsStatusConditionTrue(got.Status.Conditions, etcdv1beta1.ConditionAvailable) ||
			got.Status.ReadyReplicas != got.Spec.ReplicasOrDefault() || got.Status.Phase != etcdv1beta1.PhaseRunning {
			return fmt.Errorf("phase %s, %d/%d ready, conditions %v", got.Status.Phase, got.Status.ReadyReplicas, got.Spec.ReplicasOrDefault(), got.Status.Conditions)
		}
		return nil
	})
	return took, last
}

// watchUpgraded polls cluster c after the operator was upgraded (the new operator leads since
// tookOver) until the new operator has written the status twice (a pass writes it when the revision
// moved, which the writer makes it do) and a backup scheduled after tookOver succeeded, and fails the
// test as soon as anything of before changed. It returns the number of status writes and the backup.
func watchUpgraded(t *testing.T, alpha client.Reader, c *etcdv1beta1.EtcdCluster, before clusterState, tookOver time.Time) (int, string) {
	t.Helper()
	passes, lastRevision, backup := 0, int64(-1), ""
	slowPoll.Eventually(t, upgradeWatchTimeout, "two passes of the new operator and a scheduled backup after the upgrade", func(ctx context.Context) error {
		now, err := observeCluster(ctx, alpha, c)
		if err != nil {
			return err
		}
		hash, prev, err := specHashNow(ctx, c)
		if err != nil {
			return err
		}
		now.rehashed(before, prev, hash)
		if changes := before.changes(now); len(changes) > 0 {
			t.Fatalf("after the operator upgrade (%s later):\n  %s\nThe member pods were built with spec hash %v; this tree's operator computes %s for the cluster as stored now (when they differ, it rolls the members although their spec did not change: a new default in a hashed field does that).",
				time.Since(tookOver).Round(time.Second), strings.Join(changes, "\n  "), before.specHashes(), hash)
		}
		if len(now.unanswered) > 0 {
			return fmt.Errorf("members not answering: %s", strings.Join(now.unanswered, "; "))
		}
		if lastRevision >= 0 && now.revision != lastRevision {
			passes++
		}
		lastRevision = now.revision
		if backup == "" {
			if backup, err = scheduledBackupSince(ctx, c, tookOver); errors.Is(err, errBackupFailed) {
				t.Fatal(err)
			} else if err != nil {
				return err
			}
		}
		if passes < 2 || backup == "" {
			done := "no backup scheduled after " + tookOver.Format(time.TimeOnly) + " has succeeded yet"
			if backup != "" {
				done = "scheduled backup " + backup + " succeeded"
			}
			return fmt.Errorf("%d status writes by the new operator so far; %s", passes, done)
		}
		return nil
	})
	return passes, backup
}

// scheduledBackupSince returns the name of a succeeded backup of c scheduled after t, "" when there
// is none yet; a failed scheduled backup is an error that ends the test.
func scheduledBackupSince(ctx context.Context, c *etcdv1beta1.EtcdCluster, t time.Time) (string, error) {
	list := &etcdv1beta1.EtcdBackupList{}
	if err := k8s.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{etcdv1beta1.LabelScheduled: "true"}); err != nil {
		return "", err
	}
	for _, b := range list.Items {
		if b.Status.Phase == etcdv1beta1.BackupFailed {
			return "", fmt.Errorf("%w: scheduled backup %s failed: %s", errBackupFailed, b.Name, b.Status.Message)
		}
		at, err := time.Parse(time.RFC3339, b.Annotations[etcdv1beta1.AnnotationScheduledTime])
		if err == nil && at.After(t) && b.Status.Phase == etcdv1beta1.BackupSucceeded {
			return b.Name, nil
		}
	}
	return "", nil
}

var errBackupFailed = errors.New("a scheduled backup failed")

// slowPoll polls what asks every member of a cluster: every second.
var slowPoll = testutil.Poller{Interval: time.Second, AttemptTimeout: 10 * time.Second}

// memberState is what an operator upgrade must not change about a member pod.
type memberState struct {
	uid      types.UID
	specHash string
	// restarts and started are by container, init containers included; started holds the running
	// containers' start times.
	restarts map[string]int32
	started  map[string]string
}

// clusterState is what an operator upgrade must not change about a cluster.
type clusterState struct {
	pods map[string]memberState
	// views are what each member that answered says about the cluster (its ID and members), by
	// member; unanswered says why the others did not answer.
	views      map[string]memberView
	unanswered []string
	// status is the cluster's status as the API server returns it in v1alpha1, the version both the
	// earlier operator and this tree's serve (fields this tree's types may not know included),
	// without the fields that move by themselves (see steadyStatus).
	status map[string]any
	// revision is status.revision, which moves with each status write while clients write.
	revision int64
}

// observeCluster reads cluster c's member pods and its status (through alpha, a client of v1alpha1
// that does not log its deprecation), and asks every member for etcd's member list; a member that
// does not answer is only listed in unanswered.
func observeCluster(ctx context.Context, alpha client.Reader, c *etcdv1beta1.EtcdCluster) (clusterState, error) {
	s := clusterState{pods: map[string]memberState{}, views: map[string]memberView{}}
	pods, err := memberPods(ctx, c)
	if err != nil {
		return s, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))
	if err := alpha.Get(ctx, client.ObjectKeyFromObject(c), u); err != nil {
		return s, err
	}
	s.revision, _, _ = unstructured.NestedInt64(u.Object, "status", "revision")
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	s.status = steadyStatus(status)
	for name, p := range pods {
		m := memberState{uid: p.UID, specHash: p.Annotations[etcdv1beta1.AnnotationSpecHash], restarts: map[string]int32{}, started: map[string]string{}}
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			m.restarts[cs.Name] = cs.RestartCount
			if cs.State.Running != nil {
				m.started[cs.Name] = cs.State.Running.StartedAt.UTC().Format(time.RFC3339)
			}
		}
		s.pods[name] = m
		if p.Status.PodIP == "" {
			s.unanswered = append(s.unanswered, name+": no pod IP")
		} else if v, err := viewFrom(ctx, podEndpoint(p)); err != nil {
			s.unanswered = append(s.unanswered, fmt.Sprintf("%s: %v", name, err))
		} else {
			s.views[name] = v
		}
	}
	return s, nil
}

// clusterID and memberIDs are what the first member of s (by name) that answered says: the cluster
// ID and the member IDs by name; 0 and nil when none answered.
func (s clusterState) clusterID() uint64 { return s.first().clusterID }

func (s clusterState) memberIDs() map[string]uint64 { return idsOf(s.first()) }

func (s clusterState) first() memberView {
	if names := slices.Sorted(maps.Keys(s.views)); len(names) > 0 {
		return s.views[names[0]]
	}
	return memberView{}
}

// idsOf returns the member IDs of a member list by name.
func idsOf(v memberView) map[string]uint64 {
	if v.members == nil {
		return nil
	}
	ids := map[string]uint64{}
	for _, m := range v.members {
		ids[m.Name] = m.ID
	}
	return ids
}

// settled returns nil when every member answered and all say the same.
func (s clusterState) settled() error {
	if len(s.unanswered) > 0 {
		return fmt.Errorf("members not answering: %s", strings.Join(s.unanswered, "; "))
	}
	for name, v := range s.views {
		if v.clusterID != s.clusterID() || !reflect.DeepEqual(idsOf(v), s.memberIDs()) {
			return fmt.Errorf("%s says cluster %x members %v; another member cluster %x members %v", name, v.clusterID, idsOf(v), s.clusterID(), s.memberIDs())
		}
	}
	return nil
}

// steadyStatus returns status without what moves while neither the cluster nor its spec changes:
// what the operator last read from etcd (the revision, the database sizes, who leads: etcd may elect
// another leader by itself on a loaded machine, and the message of DataInconsistent, which names the
// revision and hash of the last consistency check: each operator process checks once when it starts,
// and again after a member's etcd starts)
// and the scheduled backups' bookkeeping (the last backup, the last schedule time, and BackupFailing
// while no backup has succeeded yet).
func steadyStatus(status map[string]any) map[string]any {
	for _, f := range []string{"revision", "leader", "lastBackup", "lastScheduleTime"} {
		delete(status, f)
	}
	members, _ := status["members"].([]any)
	for _, m := range members {
		if m, ok := m.(map[string]any); ok {
			delete(m, "dbSizeBytes")
			delete(m, "leader")
		}
	}
	conds, _ := status["conditions"].([]any)
	status["conditions"] = slices.DeleteFunc(conds, func(c any) bool {
		m, _ := c.(map[string]any)
		if m["type"] == etcdv1beta1.ConditionDataInconsistent {
			delete(m, "message")
		}
		return m["type"] == etcdv1beta1.ConditionBackupFailing && m["reason"] == etcdv1beta1.ReasonNoBackupYet
	})
	return status
}

// changes lists what differs in now from s: member pods recreated, restarted or with another spec
// hash, members added, removed or renumbered, another cluster ID, status fields changed or removed.
func (s clusterState) changes(now clusterState) []string {
	var out []string
	for name, was := range s.pods {
		is, ok := now.pods[name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("member pod %s is gone", name))
		case is.uid != was.uid:
			out = append(out, fmt.Sprintf("member pod %s was recreated (UID %s, was %s)", name, is.uid, was.uid))
		case is.specHash != was.specHash:
			out = append(out, fmt.Sprintf("member pod %s carries spec hash %s, was %s", name, is.specHash, was.specHash))
		case !reflect.DeepEqual(is.restarts, was.restarts) || !reflect.DeepEqual(is.started, was.started):
			out = append(out, fmt.Sprintf("a container of member pod %s restarted: restarts %v, was %v; started %v, was %v", name, is.restarts, was.restarts, is.started, was.started))
		}
	}
	for name := range now.pods {
		if _, ok := s.pods[name]; !ok {
			out = append(out, fmt.Sprintf("member pod %s is new", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(now.views)) {
		v := now.views[name]
		if v.clusterID != s.clusterID() {
			out = append(out, fmt.Sprintf("%s says cluster ID %x, was %x", name, v.clusterID, s.clusterID()))
		}
		if !reflect.DeepEqual(idsOf(v), s.memberIDs()) {
			out = append(out, fmt.Sprintf("%s lists the members %v, were %v", name, idsOf(v), s.memberIDs()))
		}
	}
	return append(out, valueChanges("status", s.status, now.status)...)
}

// describe names each member with its ID and pod UID.
func (s clusterState) describe() string {
	var out []string
	for name, id := range s.memberIDs() {
		out = append(out, fmt.Sprintf("%s=%x (pod %s, spec hash %s)", name, id, s.pods[name].uid, s.pods[name].specHash))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// valueChanges lists where after differs from before, a JSON value as unstructured decodes it: a
// field of before changed or gone, a list item of before changed or gone (conditions matched by
// type, members by name, other lists as a whole). What after adds is not a change.
func valueChanges(path string, before, after any) []string {
	switch b := before.(type) {
	case map[string]any:
		a, ok := after.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v, was %v", path, after, before)}
		}
		var out []string
		for _, k := range slices.Sorted(maps.Keys(b)) {
			if _, ok := a[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s is gone, was %v", path, k, b[k]))
				continue
			}
			out = append(out, valueChanges(path+"."+k, b[k], a[k])...)
		}
		return out
	case []any:
		a, ok := after.([]any)
		key := listKey(b)
		if !ok || key == "" {
			break
		}
		var out []string
		for _, item := range b {
			id := item.(map[string]any)[key]
			i := slices.IndexFunc(a, func(x any) bool { m, ok := x.(map[string]any); return ok && m[key] == id })
			if i < 0 {
				out = append(out, fmt.Sprintf("%s[%s=%v] is gone", path, key, id))
				continue
			}
			out = append(out, valueChanges(fmt.Sprintf("%s[%s=%v]", path, key, id), item, a[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(before, after) {
		return []string{fmt.Sprintf("%s: %v, was %v", path, after, before)}
	}
	return nil
}

// listKey returns the field that names each item of list ("type" for conditions, "name" for
// members), "" when its items are not all objects with one.
func listKey(list []any) string {
	for _, key := range []string{"type", "name"} {
		if !slices.ContainsFunc(list, func(x any) bool { m, ok := x.(map[string]any); return !ok || m[key] == nil }) {
			return key
		}
	}
	return ""
}

// specHashNow returns the spec hash this tree's operator gives the member pods of cluster c as
// stored now, with the etcd image repository of the installed operator's flags, and the one earlier
// operators gave them for its empty podTemplate or options (resources.Options.EmptySpecHash; "" when
// it has none).
func specHashNow(ctx context.Context, c *etcdv1beta1.EtcdCluster) (hash, prev string, err error) {
	cur, err := getCluster(ctx, c)
	if err != nil {
		return "", "", err
	}
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator"}, d); err != nil {
		return "", "", err
	}
	opts := resources.Options{}
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--etcd-image-repository="); ok {
			opts.ImageRepository = v
		}
	}
	return opts.SpecHash(cur), opts.EmptySpecHash(cur), nil
}

// rehashed counts, in s, a member pod whose spec hash went from prev in before to hash as keeping
// before's: the operator rewrites the hash an earlier operator gave an empty template (prev) to its
// own (hash) without touching the pod.
func (s clusterState) rehashed(before clusterState, prev, hash string) {
	if prev == "" {
		return
	}
	for name, m := range s.pods {
		if was, ok := before.pods[name]; ok && was.specHash == prev && m.specHash == hash {
			m.specHash = prev
			s.pods[name] = m
		}
	}
}

// specHashes returns the spec hashes the member pods of s carry.
func (s clusterState) specHashes() []string {
	hashes := map[string]bool{}
	for _, m := range s.pods {
		hashes[m.specHash] = true
	}
	return slices.Sorted(maps.Keys(hashes))
}

// operatorImage returns the image of the installed operator's Deployment.
func operatorImage(t *testing.T) string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator"}, d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// leaderRuns returns nil when the operator pod that holds the Lease runs image.
func leaderRuns(ctx context.Context, image string) error {
	leader, err := operatorLeader(ctx, operatorNamespace)
	if err != nil {
		return err
	}
	p := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: leader}, p); err != nil {
		return fmt.Errorf("the Lease's holder %s: %w", leader, err)
	}
	if got := p.Spec.Containers[0].Image; got != image {
		return fmt.Errorf("%s, which runs %s, holds the Lease", leader, got)
	}
	return nil
}

// restoreOperatorAtEnd reinstalls this tree's operator (hack/install-operator.sh) when the test ends
// with another image or image ID in the operator's Deployment than it found, so that the tests after
// it run against the operator the suite installed.
func restoreOperatorAtEnd(t *testing.T) {
	t.Helper()
	installed := func() (string, error) {
		d := &appsv1.Deployment{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: "etcd-operator"}, d); err != nil {
			return "", err
		}
		return d.Spec.Template.Spec.Containers[0].Image + " " + d.Spec.Template.Annotations[imageIDAnnotation], nil
	}
	want, err := installed()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if got, err := installed(); err == nil && got == want {
			return
		}
		t.Log("installing this tree's operator again")
		runHack(t, "hack/install-operator.sh")
	})
}

// runHack runs a script of hack/ from the top of the repository, its output shown as it comes (its
// steps print their progress), and returns how long it took; it fails the test with the output's end
// when the script fails.
func runHack(t *testing.T, script string, args ...string) time.Duration {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Dir = root
	var out testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(os.Stdout, &out), io.MultiWriter(os.Stderr, &out)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		t.Fatalf("%s: %v; its last lines:\n%s\nRun it alone (KUBECONFIG as for the tests) to see why.", script, err, strings.Join(lines[max(0, len(lines)-20):], "\n"))
	}
	return time.Since(start)
}
