package verdict

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestJudgeDataLoss: quorum is lost for good only when fewer than a quorum of the last listed voters
// keep their data: their claim (persistent storage) or their pod (emptyDir). Only what is certainly
// gone counts: a claim being deleted is kept while its pod exists, a terminating emptyDir pod still has
// its volume; learners do not count.
func TestJudgeDataLoss(t *testing.T) {
	voters := func(names ...string) []etcdv1beta1.MemberStatus {
		var ms []etcdv1beta1.MemberStatus
		for i, n := range names {
			ms = append(ms, etcdv1beta1.MemberStatus{Name: n, Role: etcdv1beta1.RoleVoter, ID: fmt.Sprintf("%x", i+1)})
		}
		return ms
	}
	now := metav1.Now()
	pod := func(phase corev1.PodPhase, deleting bool) *corev1.Pod {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	pvc := func(deleting bool) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{}
		if deleting {
			c.DeletionTimestamp = &now
		}
		return c
	}
	for _, tc := range []struct {
		name      string
		emptyDir  bool
		members   []etcdv1beta1.MemberStatus
		pods      map[string]*corev1.Pod
		pvcs      map[string]*corev1.PersistentVolumeClaim
		lost      []string
		permanent bool
	}{
		{name: "all claims kept, pods gone", members: voters("d-0", "d-1", "d-2"),
			pvcs: map[string]*corev1.PersistentVolumeClaim{"data-d-0": pvc(false), "data-d-1": pvc(false), "data-d-2": pvc(false)}},
		{name: "one claim gone: quorum can come back", members: voters("d-0", "d-1", "d-2"),
			pvcs: map[string]*corev1.PersistentVolumeClaim{"data-d-0": pvc(false), "data-d-1": pvc(false)}, lost: []string{"d-2"}},
		{name: "two claims gone", members: voters("d-0", "d-1", "d-2"),
			pvcs: map[string]*corev1.PersistentVolumeClaim{"data-d-0": pvc(false)}, lost: []string{"d-1", "d-2"}, permanent: true},
		{name: "a claim being deleted without its pod is gone", members: voters("d-0", "d-1", "d-2"),
			pvcs: map[string]*corev1.PersistentVolumeClaim{"data-d-0": pvc(false), "data-d-1": pvc(true)}, lost: []string{"d-1", "d-2"}, permanent: true},
		{name: "a claim being deleted under a live pod is kept (Kubernetes keeps it while the pod uses it)", members: voters("d-0", "d-1", "d-2"),
			pods: map[string]*corev1.Pod{"d-1": pod(corev1.PodRunning, false), "d-2": pod(corev1.PodRunning, false)},
			pvcs: map[string]*corev1.PersistentVolumeClaim{"data-d-1": pvc(true), "data-d-2": pvc(true)}, lost: []string{"d-0"}},
		{name: "persistent members keep data without pods", members: voters("d-0"),
			pvcs: map[string]*corev1.PersistentVolumeClaim{"data-d-0": pvc(false)}},
		{name: "emptyDir: all pods restarted at once", emptyDir: true, members: voters("d-0", "d-1", "d-2"),
			lost: []string{"d-0", "d-1", "d-2"}, permanent: true},
		{name: "emptyDir: frozen pods keep their data", emptyDir: true, members: voters("d-0", "d-1", "d-2"),
			pods: map[string]*corev1.Pod{"d-0": pod(corev1.PodRunning, false), "d-1": pod(corev1.PodPending, false), "d-2": pod(corev1.PodRunning, false)}},
		{name: "emptyDir: a terminating pod still has its volume", emptyDir: true, members: voters("d-0", "d-1", "d-2"),
			pods: map[string]*corev1.Pod{"d-0": pod(corev1.PodRunning, true), "d-1": pod(corev1.PodRunning, true)},
			lost: []string{"d-2"}},
		{name: "emptyDir: pods gone", emptyDir: true, members: voters("d-0", "d-1", "d-2", "d-3", "d-4"),
			pods: map[string]*corev1.Pod{"d-0": pod(corev1.PodRunning, false), "d-3": pod(corev1.PodFailed, false)},
			lost: []string{"d-1", "d-2", "d-4"}, permanent: true},
		{name: "learners do not count", members: append(voters("d-0"), etcdv1beta1.MemberStatus{Name: "d-1", Role: etcdv1beta1.RoleLearner}),
			pvcs: map[string]*corev1.PersistentVolumeClaim{"data-d-0": pvc(false)}},
		{name: "no member ever listed: nothing to judge", members: nil},
		{name: "a pod recorded while etcd did not answer is no voter (a removed member's, still terminating)",
			members: append(voters("d-0"), etcdv1beta1.MemberStatus{Name: "d-1", Role: etcdv1beta1.RoleVoter}),
			pvcs:    map[string]*corev1.PersistentVolumeClaim{"data-d-0": pvc(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []testutil.ClusterOption
			if tc.emptyDir {
				opts = append(opts, testutil.WithEmptyDir())
			}
			c := testutil.EtcdCluster("d", opts...)
			c.Status.Members = tc.members
			in := model.Input{Cluster: c}
			for name, p := range tc.pods {
				p.Name = name
				in.Pods = append(in.Pods, *p)
			}
			for name, pvc := range tc.pvcs {
				pvc.Name = name
				in.Claims = append(in.Claims, *pvc)
			}
			d := JudgeDataLoss(model.Build(in))
			if !slices.Equal(d.Lost, tc.lost) || d.Permanent() != tc.permanent {
				t.Errorf("lost %v permanent %v, want %v %v", d.Lost, d.Permanent(), tc.lost, tc.permanent)
			}
		})
	}
}

// TestPickRestoreBackup: the newest Succeeded backup of this cluster (not of another one, nor of an
// earlier cluster of the same name) that the cluster's version can restore.
func TestPickRestoreBackup(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	at := func(h int) *metav1.Time { t := metav1.NewTime(created.Add(time.Duration(h) * time.Hour)); return &t }
	clusterDest := etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "bk-b"}}
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "d", CreationTimestamp: created},
		Spec: etcdv1beta1.EtcdClusterSpec{Version: "3.5.35", Backup: &etcdv1beta1.BackupSpec{Destination: clusterDest}}}
	own := &etcdv1beta1.BackupDestination{PVC: &etcdv1beta1.PVCDestination{ClaimName: "own"}}
	b := func(name, cluster string, phase etcdv1beta1.BackupPhase, createdH, doneH int, ver string) etcdv1beta1.EtcdBackup {
		return etcdv1beta1.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: *at(createdH)},
			Spec:       etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: cluster}, Destination: own},
			Status: etcdv1beta1.EtcdBackupStatus{Phase: phase, Key: name + ".db", CompletionTime: at(doneH), EtcdVersion: ver,
				Location: "pvc://own/" + name + ".db"},
		}
	}
	// a backup that named no destination went to the cluster's destination of the day
	toCluster := func(name, claim string, doneH int) etcdv1beta1.EtcdBackup {
		x := b(name, "d", etcdv1beta1.BackupSucceeded, 1, doneH, "3.5.35")
		x.Spec.Destination = nil
		x.Status.Location = "pvc://" + claim + "/" + name + ".db"
		return x
	}
	for _, tc := range []struct {
		name    string
		backups []etcdv1beta1.EtcdBackup
		want    string
		why     string
	}{
		{"newest succeeded wins", []etcdv1beta1.EtcdBackup{
			b("old", "d", etcdv1beta1.BackupSucceeded, 1, 1, "3.5.35"),
			b("new", "d", etcdv1beta1.BackupSucceeded, 2, 3, "3.5.35"),
			b("failed", "d", etcdv1beta1.BackupFailed, 4, 4, "3.5.35"),
			b("running", "d", etcdv1beta1.BackupRunning, 5, 0, ""),
			b("other", "e", etcdv1beta1.BackupSucceeded, 6, 6, "3.5.35"),
		}, "new", ""},
		{"an earlier cluster's backup is not this one's", []etcdv1beta1.EtcdBackup{
			b("before", "d", etcdv1beta1.BackupSucceeded, -1, 9, "3.5.35"),
		}, "", "no EtcdBackup of this cluster succeeded"},
		{"a newer minor's snapshot is refused", []etcdv1beta1.EtcdBackup{
			b("newer", "d", etcdv1beta1.BackupSucceeded, 1, 5, "3.6.16"),
			b("ok", "d", etcdv1beta1.BackupSucceeded, 1, 2, "3.5.35"),
		}, "ok", ""},
		{"only unrestorable ones", []etcdv1beta1.EtcdBackup{
			b("newer", "d", etcdv1beta1.BackupSucceeded, 1, 5, "3.6.16"),
		}, "", "newer (the snapshot was taken from etcd 3.6.16"},
		{"none", nil, "", "no EtcdBackup of this cluster succeeded"},
		{"an earlier cluster's backup is named", []etcdv1beta1.EtcdBackup{
			b("before", "d", etcdv1beta1.BackupSucceeded, -1, 9, "3.5.35"),
		}, "", "EtcdBackups before are of an earlier cluster of the same name"},
		{"stored at the cluster's destination", []etcdv1beta1.EtcdBackup{toCluster("here", "bk-b", 2)}, "here", ""},
		{"stored where the cluster's destination no longer points", []etcdv1beta1.EtcdBackup{
			toCluster("moved", "bk-a", 5), toCluster("here", "bk-b", 2),
		}, "here", ""},
		{"only moved ones", []etcdv1beta1.EtcdBackup{toCluster("moved", "bk-a", 5)}, "", "moved (stored at pvc://bk-a/moved.db, which spec.backup.destination no longer names)"},
		{"a survivor's copy newer than the backups wins", []etcdv1beta1.EtcdBackup{
			atRev(b("sched", "d", etcdv1beta1.BackupSucceeded, 1, 2, "3.5.35"), 160),
			atRev(b("demo-0-survivor", "d", etcdv1beta1.BackupSucceeded, 3, 3, "3.5.35"), 170),
		}, "demo-0-survivor", ""},
		{"a backup beyond a lagging survivor's copy wins, though older", []etcdv1beta1.EtcdBackup{
			atRev(b("sched", "d", etcdv1beta1.BackupSucceeded, 1, 2, "3.5.35"), 160),
			atRev(b("demo-0-survivor", "d", etcdv1beta1.BackupSucceeded, 3, 3, "3.5.35"), 150),
		}, "sched", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, dest, why := PickRestoreBackup(c, tc.backups)
			name := ""
			if got != nil {
				name = got.Name
				if loc := resources.DestinationLocation(dest, got.Status.Key); loc != got.Status.Location {
					t.Errorf("destination %+v gives %s, the backup is at %s", dest, loc, got.Status.Location)
				}
			}
			if name != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("got %q (%q), want %q (%q)", name, why, tc.want, tc.why)
			}
		})
	}
}

func atRev(b etcdv1beta1.EtcdBackup, rev int64) etcdv1beta1.EtcdBackup {
	b.Status.Revision = rev
	return b
}

// TestSurvivorCopies: each survivor needs its own Succeeded copy, named after the loss's start, before
// the cluster is recreated; a failed copy blocks and is retaken SurvivorRetryAfter after it failed.
func TestSurvivorCopies(t *testing.T) {
	since := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	now := since.Add(time.Minute)
	copyOf := func(member string, phase etcdv1beta1.BackupPhase, failedAgo time.Duration) etcdv1beta1.EtcdBackup {
		b := etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: resources.SurvivorSnapshotName(member, since)},
			Status: etcdv1beta1.EtcdBackupStatus{Phase: phase, Message: "boom"}}
		if phase == etcdv1beta1.BackupFailed {
			b.Status.CompletionTime = &metav1.Time{Time: now.Add(-failedAgo)}
		}
		return b
	}
	if got := resources.SurvivorSnapshotName("demo-0", since); got != "demo-0-survivor-20260101-100000" {
		t.Errorf("SurvivorSnapshotName = %q", got)
	}
	d := DataLoss{Voters: []string{"demo-0", "demo-1", "demo-2", "demo-3", "demo-4"}, Lost: []string{"demo-1", "demo-3", "demo-4"}}
	if got := d.Survivors(); !slices.Equal(got, []string{"demo-0", "demo-2"}) {
		t.Fatalf("Survivors = %v", got)
	}
	for _, tc := range []struct {
		name    string
		backups []etcdv1beta1.EtcdBackup
		done    bool
		missing []string
		retry   int
		msg     string
	}{
		{"none taken", nil, false, []string{"demo-0", "demo-2"}, 0, "copying the members that kept their data before anything is deleted: demo-0, demo-2"},
		{"a copy of another loss does not count", []etcdv1beta1.EtcdBackup{
			{ObjectMeta: metav1.ObjectMeta{Name: resources.SurvivorSnapshotName("demo-0", since.Add(-time.Hour))}, Status: etcdv1beta1.EtcdBackupStatus{Phase: etcdv1beta1.BackupSucceeded}},
		}, false, []string{"demo-0", "demo-2"}, 0, "demo-0, demo-2"},
		{"one running", []etcdv1beta1.EtcdBackup{copyOf("demo-0", etcdv1beta1.BackupSucceeded, 0), copyOf("demo-2", etcdv1beta1.BackupRunning, 0)},
			false, nil, 0, "demo-2 (EtcdBackup demo-2-survivor-20260101-100000)"},
		{"one failed just now", []etcdv1beta1.EtcdBackup{copyOf("demo-0", etcdv1beta1.BackupSucceeded, 0), copyOf("demo-2", etcdv1beta1.BackupFailed, time.Second)},
			false, nil, 0, "the copy of demo-2 (EtcdBackup demo-2-survivor-20260101-100000: boom) failed, and a survivor that was not copied is never deleted"},
		{"one failed a while ago is retaken", []etcdv1beta1.EtcdBackup{copyOf("demo-0", etcdv1beta1.BackupSucceeded, 0), copyOf("demo-2", etcdv1beta1.BackupFailed, SurvivorRetryAfter)},
			false, nil, 1, "failed"},
		{"all taken", []etcdv1beta1.EtcdBackup{copyOf("demo-0", etcdv1beta1.BackupSucceeded, 0), copyOf("demo-2", etcdv1beta1.BackupSucceeded, 0)},
			true, nil, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := JudgeSurvivorCopies(d.Survivors(), since, now, tc.backups)
			if sc.Done() != tc.done || !slices.Equal(sc.Missing, tc.missing) || len(sc.Retry) != tc.retry || !strings.Contains(sc.Message(), tc.msg) {
				t.Errorf("got %+v (%q), want done %v, missing %v, %d to retry, message with %q", sc, sc.Message(), tc.done, tc.missing, tc.retry, tc.msg)
			}
			if tc.done && len(sc.Taken) != 2 {
				t.Errorf("taken %v, want both copies", sc.Taken)
			}
		})
	}
}

// TestLostRevisions: the highest revision known (the status before the loss, any backup of this
// cluster) minus the restored copy's, never below 0.
func TestLostRevisions(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := &etcdv1beta1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "d", CreationTimestamp: created}}
	bk := func(cluster string, rev int64, phase etcdv1beta1.BackupPhase, createdAt metav1.Time) etcdv1beta1.EtcdBackup {
		return etcdv1beta1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: createdAt},
			Spec:   etcdv1beta1.EtcdBackupSpec{ClusterRef: etcdv1beta1.LocalObjectReference{Name: cluster}},
			Status: etcdv1beta1.EtcdBackupStatus{Phase: phase, Revision: rev}}
	}
	later := metav1.NewTime(created.Add(time.Hour))
	chosen := bk("d", 100, etcdv1beta1.BackupSucceeded, later)
	for _, tc := range []struct {
		name    string
		status  int64
		backups []etcdv1beta1.EtcdBackup
		want    int64
	}{
		{"the survivor was current", 90, []etcdv1beta1.EtcdBackup{chosen, bk("d", 80, etcdv1beta1.BackupSucceeded, later)}, 0},
		{"the status saw more", 130, []etcdv1beta1.EtcdBackup{chosen}, 30},
		{"a higher backup counts", 0, []etcdv1beta1.EtcdBackup{chosen, bk("d", 120, etcdv1beta1.BackupSucceeded, later)}, 20},
		{"failed, other clusters' and earlier clusters' backups do not count", 0, []etcdv1beta1.EtcdBackup{chosen,
			bk("d", 500, etcdv1beta1.BackupFailed, later), bk("e", 500, etcdv1beta1.BackupSucceeded, later),
			bk("d", 500, etcdv1beta1.BackupSucceeded, metav1.NewTime(created.Add(-time.Hour)))}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.Status.Revision = tc.status
			if got := LostRevisions(c, &chosen, tc.backups); got != tc.want {
				t.Errorf("LostRevisions = %d, want %d", got, tc.want)
			}
		})
	}
}
