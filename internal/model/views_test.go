package model

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/testutil"
)

// TestPlannerViews: the membership view counts a member with a NOSPACE alarm as healthy and carries
// the pods and claims of names etcd does not list (a removed member's, still going); the rollout view
// marks a member up to date by its pod's spec hash (one without a pod is: there is nothing to restart)
// and ready by its pod's Ready condition.
func TestPlannerViews(t *testing.T) {
	c := testutil.EtcdCluster("w", testutil.WithReplicas(3))
	ready := pod("w-0", false)
	ready.Annotations = map[string]string{etcdv1beta1.AnnotationSpecHash: "new"}
	ready.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	old := pod("w-1", false)
	old.Annotations = map[string]string{etcdv1beta1.AnnotationSpecHash: "old"}
	e := &Etcd{ClusterID: 1, Leader: 1,
		Members: []etcd.Member{{ID: 1, Name: "w-0"}, {ID: 2, Name: "w-1"}},
		Health:  map[uint64]error{1: nil, 2: etcd.ErrNoSpace},
	}
	m := Build(Input{Cluster: c, Etcd: e, Pods: []corev1.Pod{ready, old, pod("w-5", true)},
		Claims: []corev1.PersistentVolumeClaim{claim("w-5", nil)}})

	ms := m.Membership(map[string]string{"w-1": "down too long"})
	if ms.Replicas != 3 || ms.Leader != 1 || len(ms.Members) != 2 || !ms.Members[1].Healthy || ms.Members[0].Replace != "" || ms.Members[1].Replace != "down too long" {
		t.Errorf("membership view %+v", ms)
	}
	if got := ms.Resources["w-5"]; got != (membership.Resources{PodTerminating: true, Data: true}) {
		t.Errorf("resources of the removed member %+v", got)
	}
	ro := m.Rollout("new")
	if len(ro.Members) != 2 || !ro.Members[0].UpToDate || !ro.Members[0].Ready || ro.Members[1].UpToDate || ro.Members[1].Ready || !ro.Members[1].Healthy {
		t.Errorf("rollout view %+v", ro.Members)
	}
	// a member etcd lists whose pod is gone has nothing to restart: the rollout must not pick it
	// (its pod is recreated, with the current spec, by the phases before)
	gone := Build(Input{Cluster: c, Etcd: e, Pods: []corev1.Pod{ready}})
	if ro := gone.Rollout("new"); len(ro.Members) != 2 || !ro.Members[1].UpToDate || ro.Members[1].Ready {
		t.Errorf("rollout view with w-1's pod gone %+v; want it up to date and not ready", ro.Members)
	}
}

// TestDownSince: a member etcd lists that does not answer is down since the earliest of what the status
// recorded, its pod's Ready condition turning False, and the pass; a member that answers, or one etcd
// does not list, is not down. The time survives the pod being recreated (a new pod's Ready transition
// is later than the recorded time). A member promoted since the status listed it as a learner starts
// again from the pass (etcd promotes only a learner in sync with the leader), and keeps that start on
// the passes after (its pod has not been Ready since its learner days: that must not count).
func TestDownSince(t *testing.T) {
	now := time.Date(2026, 12, 1, 3, 10, 0, 0, time.UTC)
	notReadyAt := metav1.NewTime(now.Add(-5 * time.Minute))
	recordedAt := metav1.NewTime(now.Add(-8 * time.Minute))
	down := pod("d-0", false)
	down.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: notReadyAt}}
	up := pod("d-1", false)
	up.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: notReadyAt}}
	recreated := pod("d-2", false)
	recreated.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
	promoted := pod("d-5", false)
	promoted.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: notReadyAt}}
	promotedBefore := pod("d-6", false)
	promotedBefore.Status.Conditions = promoted.Status.Conditions
	promotedAt := metav1.NewTime(now.Add(-2 * time.Second))
	c := testutil.EtcdCluster("d", testutil.WithReplicas(7))
	c.Status.Members = []etcdv1beta1.MemberStatus{{Name: "d-2", DownSince: &recordedAt}, {Name: "d-4", DownSince: &recordedAt},
		{Name: "d-5", Role: etcdv1beta1.RoleLearner, DownSince: &recordedAt}, {Name: "d-6", Role: etcdv1beta1.RoleVoter, DownSince: &promotedAt}}
	e := &Etcd{ClusterID: 1, Leader: 2,
		Members: []etcd.Member{{ID: 1, Name: "d-0"}, {ID: 2, Name: "d-1"}, {ID: 3, Name: "d-2"}, {ID: 4, Name: "d-3"}, {ID: 5, Name: "d-4"}, {ID: 6, Name: "d-5"}, {ID: 7, Name: "d-6"}},
		Health: map[uint64]error{1: errors.New("context deadline exceeded"), 2: nil, 3: errors.New("connection refused"), 5: nil,
			6: errors.New("context deadline exceeded"), 7: errors.New("context deadline exceeded")},
	}
	m := Build(Input{Cluster: c, Etcd: e, Now: now, Pods: []corev1.Pod{down, up, recreated, promoted, promotedBefore}})
	for name, want := range map[string]time.Time{
		"d-0": notReadyAt.Time, // down: since its pod stopped being Ready
		"d-1": {},              // answers
		"d-2": recordedAt.Time, // recreated pod: the recorded time is earlier
		"d-3": now,             // not asked, no pod: down from this pass
		"d-4": {},              // answers again: no longer down, whatever was recorded
		"d-5": now,             // promoted since the status listed it a learner: in sync then, down from this pass
		"d-6": promotedAt.Time, // promoted a pass ago: from then, not from its pod's learner days
	} {
		if got := m.Member(name).DownSince; !got.Equal(want) {
			t.Errorf("%s: DownSince %v, want %v", name, got, want)
		}
	}
}

// TestProblem: a down member's problem names its pod's state, the etcd container's waiting reason and
// last exit, or etcd's error; a member that is not down has none.
func TestProblem(t *testing.T) {
	crash := pod("p-0", false)
	crash.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd",
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}}}
	pull := pod("p-1", false)
	pull.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "failed to pull image \"nope\": not found\nmore"}}}}
	pending := pod("p-2", false)
	pending.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}
	gone := pod("p-3", true)
	healthy := pod("p-5", false)
	c := testutil.EtcdCluster("p", testutil.WithReplicas(5))
	e := &Etcd{ClusterID: 1, Leader: 6,
		Members: []etcd.Member{{ID: 1, Name: "p-0"}, {ID: 2, Name: "p-1"}, {ID: 3, Name: "p-2"}, {ID: 4, Name: "p-3"}, {ID: 5, Name: "p-4"}, {ID: 6, Name: "p-5"}},
		Health:  map[uint64]error{1: errors.New("x"), 2: errors.New("x"), 3: errors.New("x"), 4: errors.New("x"), 5: errors.New("dial tcp: connection refused\nsecond line"), 6: nil},
	}
	m := Build(Input{Cluster: c, Etcd: e, Pods: []corev1.Pod{crash, pull, pending, gone, healthy}})
	for name, want := range map[string]string{
		"p-0": "etcd container CrashLoopBackOff (last exit code 2, Error)",
		"p-1": `etcd container ErrImagePull: failed to pull image "nope": not found`,
		"p-2": "pod not scheduled: Unschedulable 0/1 nodes are available",
		"p-3": "pod terminating",
		"p-4": "no pod",
		"p-5": "",
	} {
		if got := m.Member(name).Problem(); got != want {
			t.Errorf("%s: Problem %q, want %q", name, got, want)
		}
	}
}

// TestPodProblem: whether or not etcd lists the member (a cluster still forming), the pod's own
// problem names an image that cannot be pulled, a crash-looping init container or an unschedulable
// pod; a pod that is only starting (being created, waiting for its init containers) has none.
func TestPodProblem(t *testing.T) {
	pull := pod("b-0", false)
	pull.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "docker.io/local/etcd:v3.6.99"`}}}}
	initCrash := pod("b-1", false)
	initCrash.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "await-peers",
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
	initCrash.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
	starting := pod("b-2", false)
	starting.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "verify-data",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
	starting.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
	creating := pod("b-3", false)
	creating.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	pending := pod("b-4", false)
	pending.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available"}}
	c := testutil.EtcdCluster("b", testutil.WithReplicas(5))
	m := Build(Input{Cluster: c, Pods: []corev1.Pod{pull, initCrash, starting, creating, pending}}) // etcd did not answer
	for name, want := range map[string]string{
		"b-0": `etcd container ImagePullBackOff: Back-off pulling image "docker.io/local/etcd:v3.6.99"`,
		"b-1": "init container await-peers CrashLoopBackOff (last exit code 1, Error)",
		"b-2": "",
		"b-3": "",
		"b-4": "pod not scheduled: Unschedulable 0/1 nodes are available",
	} {
		if got := m.Member(name).PodProblem(); got != want {
			t.Errorf("%s: PodProblem %q, want %q", name, got, want)
		}
	}
}

// TestLongProblemKeepsItsCause: a pod's message longer than a status line keeps its beginning and its
// end, where a wrapped error names its cause.
func TestLongProblemKeepsItsCause(t *testing.T) {
	p := pod("l-0", false)
	msg := `Back-off pulling image "docker.io/local/etcd:no-such-tag": ErrImagePull: failed to pull and unpack image "docker.io/local/etcd:no-such-tag": failed to resolve reference "docker.io/local/etcd:no-such-tag": failed to do request: Head "https://registry-1.docker.io/v2/local/etcd/manifests/no-such-tag": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host`
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: msg}}}}
	got := Build(Input{Cluster: testutil.EtcdCluster("l", testutil.WithReplicas(1)), Pods: []corev1.Pod{p}}).Member("l-0").PodProblem()
	if !strings.HasPrefix(got, `etcd container ImagePullBackOff: Back-off pulling image "docker.io/local/etcd:no-such-tag"`) ||
		!strings.HasSuffix(got, "no such host") || !strings.Contains(got, " … ") || len(got) > 260 {
		t.Errorf("PodProblem = %q (%d bytes), want the message's beginning and its cause, about 200 bytes", got, len(got))
	}
}

// TestPullingImage: a member whose etcd container has never been created and waits with reason
// ContainerCreating or PodInitializing after its init containers completed waits for its image's first
// pull (the kubelet writes no status while it pulls): its Problem says so and names the image,
// WaitsForImage holds, and ImagePullProblem recognises that Problem. A container waiting while an init
// container has not completed, or once it ran (an image ID), is not pulling.
func TestPullingImage(t *testing.T) {
	status := func(initDone bool, reason, imageID string) corev1.PodStatus {
		init := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		if initDone {
			init = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}
		}
		return corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "verify-data", State: init}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", Image: "docker.io/local/etcd:no-such-tag", ImageID: imageID,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}},
		}
	}
	pods := map[string]corev1.PodStatus{
		"p-0": status(true, "ContainerCreating", ""),
		"p-1": status(true, "PodInitializing", ""), // as the kubelet leaves it during a pull that follows the init containers
		"p-2": status(false, "PodInitializing", ""),
		"p-3": status(true, "ContainerCreating", "sha256:0123"),
	}
	in := Input{Cluster: testutil.EtcdCluster("p", testutil.WithReplicas(4)), Etcd: &Etcd{ClusterID: 1, Leader: 9, Health: map[uint64]error{}}}
	for i, name := range []string{"p-0", "p-1", "p-2", "p-3"} {
		p := pod(name, false)
		p.Status = pods[name]
		in.Pods = append(in.Pods, p)
		in.Etcd.Members = append(in.Etcd.Members, etcd.Member{ID: uint64(i + 1), Name: name})
		in.Etcd.Health[uint64(i+1)] = errors.New("connection refused")
	}
	m := Build(in)
	want := "etcd container not created yet: pulling image docker.io/local/etcd:no-such-tag"
	for _, name := range []string{"p-0", "p-1"} {
		mem := m.Member(name)
		if got := mem.Problem(); got != want || !mem.WaitsForImage() || !ImagePullProblem(got) {
			t.Errorf("%s: Problem %q (want %q), WaitsForImage %v, ImagePullProblem %v", name, got, want, mem.WaitsForImage(), ImagePullProblem(got))
		}
		if got := mem.PodProblem(); got != "" {
			t.Errorf("%s: PodProblem %q, want none: a first pull is how every pod starts", name, got)
		}
	}
	for _, name := range []string{"p-2", "p-3"} {
		if mem := m.Member(name); mem.WaitsForImage() || ImagePullProblem(mem.Problem()) {
			t.Errorf("%s: WaitsForImage %v, Problem %q: want no pull", name, mem.WaitsForImage(), mem.Problem())
		}
	}
}

// TestPullingImageAfterGrace: in the first PullGrace after the init containers completed, an etcd
// container still waiting without an image ID is being created, not pulled (the kubelet's first status
// after them says PodInitializing for about a second); after it, it is a pull.
func TestPullingImageAfterGrace(t *testing.T) {
	now := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	in := Input{Cluster: testutil.EtcdCluster("g", testutil.WithReplicas(2)), Now: now, Etcd: &Etcd{ClusterID: 1, Leader: 9, Health: map[uint64]error{}}}
	for i, ago := range []time.Duration{time.Second, PullGrace + time.Second} {
		p := pod(fmt.Sprintf("g-%d", i), false)
		p.Status = corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "await-add", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				Reason: "Completed", FinishedAt: metav1.NewTime(now.Add(-ago))}}}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", Image: "docker.io/local/etcd:v3.6.16",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}},
		}
		in.Pods = append(in.Pods, p)
		in.Etcd.Members = append(in.Etcd.Members, etcd.Member{ID: uint64(i + 1), Name: p.Name})
		in.Etcd.Health[uint64(i+1)] = errors.New("connection refused")
	}
	m := Build(in)
	if mem := m.Member("g-0"); mem.PullingImage() || mem.WaitsForImage() || ImagePullProblem(mem.Problem()) {
		t.Errorf("1 s after the init containers: PullingImage %v, WaitsForImage %v, Problem %q: want no pull yet", mem.PullingImage(), mem.WaitsForImage(), mem.Problem())
	}
	if mem := m.Member("g-1"); !mem.PullingImage() || !strings.HasPrefix(mem.Problem(), PullingImageProblem) {
		t.Errorf("%s after the init containers: PullingImage %v, Problem %q: want a pull", PullGrace+time.Second, mem.PullingImage(), mem.Problem())
	}
}

// TestExitCause: a failed process's cause is its panic line, else the message and error of its last
// JSON log line of level error or fatal, without the timestamp; nothing otherwise.
func TestExitCause(t *testing.T) {
	for msg, want := range map[string]string{
		"{\"level\":\"info\",\"ts\":\"2026-12-05T02:20:00Z\",\"msg\":\"starting\"}\npanic: unrecognized level: \"verbose\"\n\ngoroutine 1 [running]:\nmain.main()":                                                                                                 `panic: unrecognized level: "verbose"`,
		"{\"level\":\"info\",\"ts\":\"2026-12-05T02:20:00Z\",\"msg\":\"starting\"}\n{\"level\":\"fatal\",\"ts\":\"2026-12-05T02:20:01Z\",\"caller\":\"etcdmain/etcd.go:204\",\"msg\":\"discovery failed\",\"error\":\"member 3 has already been bootstrapped\"}\n": "discovery failed: member 3 has already been bootstrapped",
		"{\"level\":\"warn\",\"msg\":\"slow fdatasync\"}\n": "",
		// etcd's zap logger logs the line of level panic, then Go panics with its message alone
		"{\"level\":\"panic\",\"msg\":\"failed to open database\",\"error\":\"invalid database\"}\npanic: failed to open database\n\ngoroutine 116 [running]:\n": "panic: failed to open database: invalid database",
		"{\"level\":\"error\",\"msg\":\"failed to open database\",\"error\":\"x\"}\npanic: failed to open database\n":                                            "panic: failed to open database",
		"":                               "",
		"Error: unknown flag: --bogus\n": "Error: unknown flag: --bogus",
		// the operator's verify-data says what it could not do on a plain line
		"error: cannot tell whether /var/lib/etcd/data is member 95899508fa3e49a3's: read the WAL's snapshot entries in /var/lib/etcd/data/member/wal: walpb: crc mismatch\n": "error: cannot tell whether /var/lib/etcd/data is member 95899508fa3e49a3's: read the WAL's snapshot entries in /var/lib/etcd/data/member/wal: walpb: crc mismatch",
		"fatal error: runtime: out of memory\n\ngoroutine 1 [running]:\nmain.main()\n\t/src/main.go:3 +0x1\n":                                                                 "fatal error: runtime: out of memory",
		// the tail of a traceback whose panic line is further up the log: its innermost function
		"ernal/common/page.go:83 +0x1c7\ngo.etcd.io/bbolt.(*Tx).page(0x2210ffb1a190?, 0x2210fff75300?)\n\tgo.etcd.io/bbolt@v1.4.3/tx.go:638 +0x7a\ncreated by main.main in goroutine 1\n\t/src/main.go:3 +0x1\n": "panic in go.etcd.io/bbolt.(*Tx).page",
		"plain text\nthat ends\n": "",
	} {
		if got := ExitCause(msg); got != want {
			t.Errorf("ExitCause(%q) = %q, want %q", msg, got, want)
		}
	}
	crash := pod("c-0", false)
	crash.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error",
			Message: "panic: unrecognized level: \"verbose\"\n\ngoroutine 1 [running]:\n"}}}}
	m := Build(Input{Cluster: testutil.EtcdCluster("c", testutil.WithReplicas(1)), Pods: []corev1.Pod{crash}})
	if got, want := m.Member("c-0").PodProblem(), `etcd container CrashLoopBackOff (last exit code 2, Error): panic: unrecognized level: "verbose"`; got != want {
		t.Errorf("PodProblem = %q, want %q", got, want)
	}
}
