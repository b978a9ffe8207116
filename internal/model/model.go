// Package model is the one observed view of an etcd cluster that every decision of the operator reads.
// Build joins, per member name, what Kubernetes holds (the member's pod and claim), what etcd reported
// (member ID, learner or voter, started, health, alarms, status) and what the EtcdCluster's status last
// recorded. It is pure: it reads what its caller listed and asked, and makes no call.
//
// Counting lives here once: Voters, HealthyVoters, ServingVoters and Quorum are defined once, so that
// membership, rollout, recovery and status never disagree about who votes and how many a quorum needs.
package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// Etcd is what etcd reported in one pass: the member list read through any running member, and the
// status and health each member gave through its own client URL.
type Etcd struct {
	// ClusterID is the cluster ID the member list came with.
	ClusterID uint64
	// Members is etcd's member list, in the order etcd gave it.
	Members []etcd.Member
	// Status holds the status of each member that answered, by member ID.
	Status map[uint64]etcd.EndpointStatus
	// Health holds, by member ID, nil for a member that answered a linearizable read (a learner: its
	// status) without alarm, or why it did not; a member missing here was not asked.
	Health map[uint64]error
	// Leader is the member ID most members report as leader, 0 when none reports one.
	Leader uint64
	// Alarms are the alarms etcd has raised, cluster-wide (those of removed members included);
	// AlarmsErr says why they could not be listed (then Alarms is empty).
	Alarms    []etcd.Alarm
	AlarmsErr error
}

// ErrNotObserved is the EtcdErr of a model built before the pass observed anything (it stopped before
// listing pods and asking etcd): it holds only what the status recorded.
var ErrNotObserved = errors.New("the pass stopped before observing the cluster")

// ErrNotAsked is a member's Health when etcd lists it but the pass did not ask it.
var ErrNotAsked = errors.New("the member was not asked for its health")

// Member is one member name joined across Kubernetes and etcd.
type Member struct {
	// Name is the member's name, which is also its pod's name ("<cluster>-<ordinal>"); for an etcd member
	// whose name cannot be known, its hex member ID.
	Name string
	// Pod is the member's pod, nil when there is none.
	Pod *corev1.Pod
	// Claim is the member's PersistentVolumeClaim, nil when there is none (always nil with emptyDir).
	Claim *corev1.PersistentVolumeClaim
	// Etcd is the member as etcd lists it; nil when etcd did not answer or does not list it.
	Etcd *etcd.Member
	// Status is what the member reported about itself; nil when it did not answer.
	Status *etcd.EndpointStatus
	// Health is nil when the member is healthy (see Healthy), else why not; only meaningful when Etcd is
	// set.
	Health error
	// Recorded is the member as the EtcdCluster's status last listed it; nil when it was not listed.
	Recorded *etcdv1beta1.MemberStatus
	// DownSince is when the member went down (see Down), the zero time while it is not down: the
	// earliest of when the status first recorded it down, when its pod stopped being Ready, and this
	// pass. It survives the pod being recreated.
	DownSince time.Time
	// now is the time of the pass that built the member (Cluster.Now); the zero time for a member made
	// otherwise, which PullingImage then reads without it.
	now time.Time
	// answered is true when etcd answered in the pass that built the member: its member list is then
	// the truth, and a member it does not list votes no more, whatever the status last recorded.
	answered bool
}

// Listed reports whether etcd lists the member in this pass.
func (m *Member) Listed() bool { return m.Etcd != nil }

// Voter reports whether the member votes: etcd lists it as a voter, or, when etcd did not answer, the
// status last listed it as a voter with a member ID (a member etcd listed, not a pod recorded while
// etcd did not answer). A member etcd answered without (one removed moments ago, whose pod is still
// there) is no voter.
func (m *Member) Voter() bool {
	if m.Etcd != nil {
		return !m.Etcd.IsLearner
	}
	return !m.answered && m.Recorded != nil && m.Recorded.Role == etcdv1beta1.RoleVoter && m.Recorded.ID != ""
}

// Learner reports whether etcd lists the member as a learner.
func (m *Member) Learner() bool { return m.Etcd != nil && m.Etcd.IsLearner }

// Started reports whether the member's process has started and published its name to etcd.
func (m *Member) Started() bool { return m.Etcd != nil && m.Etcd.Name != "" }

// ID is the member's etcd member ID, 0 when etcd does not list it.
func (m *Member) ID() uint64 {
	if m.Etcd == nil {
		return 0
	}
	return m.Etcd.ID
}

// Healthy reports whether the member answered a linearizable read (a learner: its status) and reported
// no alarm.
func (m *Member) Healthy() bool { return m.Etcd != nil && m.Health == nil }

// NoSpace reports whether the member's only problem is etcd's NOSPACE alarm: it serves reads, but the
// cluster refuses writes.
func (m *Member) NoSpace() bool { return m.Etcd != nil && errors.Is(m.Health, etcd.ErrNoSpace) }

// Serving reports whether the member takes part in raft as a healthy member does: healthy, or healthy
// but for a NOSPACE alarm. Membership changes and restarts of other members need only that; a NOSPACE
// alarm must not block the rollout that raises the quota.
func (m *Member) Serving() bool { return m.Healthy() || m.NoSpace() }

// HasPod reports whether the member has a pod that is not being deleted.
func (m *Member) HasPod() bool { return m.Pod != nil && m.Pod.DeletionTimestamp == nil }

// PodTerminating reports whether the member's pod is being deleted.
func (m *Member) PodTerminating() bool { return m.Pod != nil && m.Pod.DeletionTimestamp != nil }

// StuckTerminating is how long past the end of its grace period a pod that is still terminating is
// taken as stuck (its node gone or not answering): kubelet finishes a deletion within seconds of it.
const StuckTerminating = 30 * time.Second

// PodStuck reports whether the member's pod is still terminating StuckTerminating after its grace
// period ended, at now.
func (m *Member) PodStuck(now time.Time) bool {
	return m.PodTerminating() && now.After(m.Pod.DeletionTimestamp.Add(StuckTerminating))
}

// AwaitsAdd reports whether the member's pod was created before its member was added to etcd and
// still holds etcd back (init container resources.AwaitAddContainerName): that container has not
// finished, etcd has never run in the pod, and the claim records no member identity. A pod whose etcd
// has run (a member since removed) never counts: its data is a removed member's.
func (m *Member) AwaitsAdd() bool {
	if m.Pod == nil || (m.Claim != nil && m.Claim.Annotations[etcdv1beta1.AnnotationMemberID] != "") {
		return false
	}
	if !slices.ContainsFunc(m.Pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == resources.AwaitAddContainerName }) {
		return false
	}
	for _, st := range m.Pod.Status.InitContainerStatuses {
		if st.Name == resources.AwaitAddContainerName && (st.State.Terminated != nil && st.State.Terminated.ExitCode == 0 ||
			st.LastTerminationState.Terminated != nil && st.LastTerminationState.Terminated.ExitCode == 0) {
			return false
		}
	}
	for _, st := range m.Pod.Status.ContainerStatuses {
		if st.RestartCount > 0 || st.State.Running != nil || st.State.Terminated != nil || st.LastTerminationState.Terminated != nil {
			return false
		}
	}
	return true
}

// AwaitingClaim reports whether the member's claim was made for a member to be added before its add
// (etcdv1beta1.AnnotationAwaitsAdd) and no etcd has started on it (it records no member ID): it holds
// no data. Its pod is made right after it, or again if it went.
func (m *Member) AwaitingClaim() bool {
	return m.HasClaim() && m.Claim.Annotations[etcdv1beta1.AnnotationAwaitsAdd] != "" && m.Claim.Annotations[etcdv1beta1.AnnotationMemberID] == ""
}

// ClaimLostGrace is how long a pod that waits for its add may be seen without its claim before the claim
// counts as gone: the claim is made first, but the operator's caches of claims and pods are filled by
// separate watches.
const ClaimLostGrace = 10 * time.Second

// AwaitingClaimLost reports whether the member's pod, waiting for its add, mounts a claim that has
// been missing for longer than ClaimLostGrace since the pod was made, at now: the pod cannot be
// scheduled and must be made again.
func (m *Member) AwaitingClaimLost(now time.Time) bool {
	if m.Pod == nil || m.Claim != nil || now.Sub(m.Pod.CreationTimestamp.Time) < ClaimLostGrace {
		return false
	}
	return slices.ContainsFunc(m.Pod.Spec.Volumes, func(v corev1.Volume) bool { return v.PersistentVolumeClaim != nil })
}

// AwaitAddRunning reports whether the member's pod has its address (so its DNS name resolves, the peer
// Service publishing addresses of pods that are not ready) and its init container
// resources.AwaitAddContainerName runs: the member can be added to etcd now.
func (m *Member) AwaitAddRunning() bool {
	if m.Pod == nil || m.Pod.Status.PodIP == "" {
		return false
	}
	for _, st := range m.Pod.Status.InitContainerStatuses {
		if st.Name == resources.AwaitAddContainerName {
			return st.State.Running != nil
		}
	}
	return false
}

// AwaitsPeerAddresses reports whether the member's pod waits in its init container
// resources.AwaitPeersContainerName for the operator to mark it with
// etcdv1beta1.AnnotationPeersAddressed, and is not marked yet.
func (m *Member) AwaitsPeerAddresses() bool {
	if !m.HasPod() || m.Pod.Annotations[etcdv1beta1.AnnotationPeersAddressed] == "true" {
		return false
	}
	return slices.ContainsFunc(m.Pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == resources.AwaitPeersContainerName })
}

// PodReady reports whether the member's pod exists, is not being deleted, runs and is Ready.
func (m *Member) PodReady() bool {
	p := m.Pod
	if p == nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	cond := PodCondition(p, corev1.PodReady)
	return cond != nil && cond.Status == corev1.ConditionTrue
}

// JoinGrace is how long after its etcd starts a new member may list its name without serving yet and
// still count as joining (see Joining): etcd's publish timeout (5 s plus two election timeouts, 7 s by
// default), after which a member whose first publish was lost retries it, and a margin.
const JoinGrace = 10 * time.Second

// newMemberData is how young a member's claim (or, without one, its pod) is for the member to count as
// new in Joining.
const newMemberData = 2 * time.Minute

// Joining reports whether the member is a new member that has joined and does not serve yet, at now:
// etcd lists it under its name (it has applied the leader's snapshot: its name came with it), it does not
// answer, its pod was made to join a running cluster (--initial-cluster-state=existing; a member of
// the cluster's bootstrap never is), its etcd container has run for less than JoinGrace without a
// restart (or, its init containers finished moments ago, the kubelet has not reported its start
// yet), and its claim (or pod, without one) is less than newMemberData old. A new member serves
// once it has published itself through raft; when the leader's snapshot already holds that proposal,
// etcd does not see it applied and serves only after retrying it, 7 s after it started
// (etcd-io/etcd#16436), although it takes part in raft the whole time. A member that restarted, or
// runs on older data, is never joining.
func (m *Member) Joining(now time.Time) bool {
	if !m.Started() || m.Serving() || !m.HasPod() || resources.PodFlag(m.Pod, "initial-cluster-state") != string(resources.StateExisting) {
		return false
	}
	born := m.Pod.CreationTimestamp.Time
	if m.Claim != nil {
		born = m.Claim.CreationTimestamp.Time
	}
	if born.IsZero() || now.Sub(born) > newMemberData {
		return false
	}
	st := m.etcdStatus()
	if st == nil || st.RestartCount != 0 {
		return false
	}
	if st.State.Running != nil {
		return now.Sub(st.State.Running.StartedAt.Time) < JoinGrace
	}
	// a container that never ran, of a pod whose init containers (await-add) finished moments ago: its
	// etcd has most likely started, and the kubelet reports that a moment later (a pod made again for a
	// member whose name an earlier pod published, stuck pulling its image, is not joining: its init
	// containers finished longer ago)
	init := PodCondition(m.Pod, corev1.PodInitialized)
	return st.State.Waiting != nil && st.LastTerminationState.Terminated == nil &&
		(st.State.Waiting.Reason == "PodInitializing" || st.State.Waiting.Reason == "ContainerCreating") &&
		init != nil && init.Status == corev1.ConditionTrue && now.Sub(init.LastTransitionTime.Time) < JoinGrace
}

// PodCondition returns the condition of type t of pod p, nil when it has none.
func PodCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// InRaft reports whether the member is a joining voter (Joining) whose etcd container the kubelet
// reports ready: its readiness probe (/readyz on the metrics port, which etcd serves before the member
// has published itself; for etcd 3.5, /health) passed, and that probe answers only for a voter that
// has a leader and was served a linearizable read through it. Such a member takes part in raft and
// counts for quorum, although it serves no client until it has published itself (up to 7 s after it
// started, etcd-io/etcd#16436). The probe's verdict lags: a member that stops answering moments after
// its probe passed still counts until its pod turns not ready (6 failed probes) or JoinGrace ends,
// whichever comes first; etcd's own checks still guard every membership change meanwhile.
func (m *Member) InRaft(now time.Time) bool {
	return m.Voter() && m.Joining(now) && m.EtcdReady()
}

// lastTermination returns the most recent termination of container cs: its current state when it
// has terminated, else its last one (a container waiting to be restarted); nil when it never ended.
func lastTermination(cs *corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	if cs.State.Terminated != nil {
		return cs.State.Terminated
	}
	return cs.LastTerminationState.Terminated
}

// failedRun returns the most recent termination of container status cs (lastTermination) when that run
// failed (a non-zero exit code); nil when it did not, when cs has not terminated, or when cs is nil.
func failedRun(cs *corev1.ContainerStatus) *corev1.ContainerStateTerminated {
	if cs == nil {
		return nil
	}
	if t := lastTermination(cs); t != nil && t.ExitCode != 0 {
		return t
	}
	return nil
}

// verifyDataStatus returns the status of the verify-data init container of the member's pod, nil
// without a pod, or when the pod has none or the kubelet has not reported it yet.
func (m *Member) verifyDataStatus() *corev1.ContainerStatus {
	if m.Pod == nil {
		return nil
	}
	return named(m.Pod.Status.InitContainerStatuses, resources.VerifyDataContainerName)
}

// etcdStatus returns the status of the etcd container of the member's pod, nil without a pod or before
// the kubelet reported one.
func (m *Member) etcdStatus() *corev1.ContainerStatus {
	if m.Pod == nil {
		return nil
	}
	return named(m.Pod.Status.ContainerStatuses, resources.EtcdContainer)
}

// named returns the status of the container called name in statuses, nil when there is none.
func named(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

// EtcdNeverRan reports whether the etcd container of the member's pod has never run: the pod has no
// status of it yet, or one that shows no run, no restart and no earlier termination (it waits for its
// image, or its pod is not scheduled). False without a pod.
func (m *Member) EtcdNeverRan() bool {
	if m.Pod == nil {
		return false
	}
	st := m.etcdStatus()
	return st == nil || st.State.Running == nil && st.State.Terminated == nil && st.RestartCount == 0 && st.LastTerminationState.Terminated == nil
}

// EtcdRunningSince returns when the kubelet reports that the etcd container of the member's pod
// started running, zero when it does not run.
func (m *Member) EtcdRunningSince() time.Time {
	st := m.etcdStatus()
	if st == nil || st.State.Running == nil {
		return time.Time{}
	}
	return st.State.Running.StartedAt.Time
}

// EtcdContainerID returns the ID the kubelet reports for the member's etcd container (a new one at
// every start of it, in its pod or a new pod), "" when it has none.
func (m *Member) EtcdContainerID() string {
	st := m.etcdStatus()
	if st == nil {
		return ""
	}
	return st.ContainerID
}

// EtcdReady reports whether the kubelet reports the etcd container of the member's pod ready: its
// readiness probe passed (the pod's Ready condition also needs its readiness gate).
func (m *Member) EtcdReady() bool {
	st := m.etcdStatus()
	return st != nil && st.Ready
}

// EtcdRunning reports whether the kubelet reports the etcd container of the member's pod running.
func (m *Member) EtcdRunning() bool {
	st := m.etcdStatus()
	return st != nil && st.State.Running != nil
}

// PodSpecHash returns the hash of the spec the member's pod was built from (its
// etcdv1beta1.AnnotationSpecHash, see resources.Options.SpecHash), "" without a pod.
func (m *Member) PodSpecHash() string {
	if m.Pod == nil {
		return ""
	}
	return m.Pod.Annotations[etcdv1beta1.AnnotationSpecHash]
}

// Image returns the image of the etcd container of the member's pod, "" without a pod.
func (m *Member) Image() string {
	if m.Pod == nil {
		return ""
	}
	for _, ctr := range m.Pod.Spec.Containers {
		if ctr.Name == resources.EtcdContainer {
			return ctr.Image
		}
	}
	return ""
}

// MemberStartGrace is how long after its pod was made a member that does not serve yet, and whose pod
// shows no problem, counts as starting (see Starting): the pull of a local image, the init containers,
// etcd's start and its catch-up from the leader take seconds; a minute leaves a margin for a loaded
// node and a larger database.
const MemberStartGrace = time.Minute

// Starting reports whether the member does not serve yet because its pod is new, at now: etcd lists
// it, it does not serve, it was already down when its pod was made (the pod is the restart or the
// recreation that brings it back, not one it served on and then stopped; a second of margin for the
// clocks of the operator and the API server), its pod is not being deleted, was made less than
// MemberStartGrace ago, and shows no problem (PodProblem: no crash loop, image that cannot be pulled,
// or unschedulable pod).
func (m *Member) Starting(now time.Time) bool {
	if !m.Down() || !m.NewPod(now) || m.DownSince.IsZero() {
		return false
	}
	return m.DownSince.Before(m.Pod.CreationTimestamp.Add(time.Second)) && m.PodProblem() == ""
}

// NewPod reports whether the member has a pod, not being deleted, made less than MemberStartGrace
// before now.
func (m *Member) NewPod(now time.Time) bool {
	return m.HasPod() && now.Sub(m.Pod.CreationTimestamp.Time) < MemberStartGrace
}

// Down reports whether etcd lists the member and it does not serve (see Serving): it is not answering,
// or answers with an alarm other than NOSPACE. A learner that has not started yet is down too.
func (m *Member) Down() bool { return m.Etcd != nil && !m.Serving() }

// notReadySince returns since when the member's pod has not been Ready, from its Ready condition's
// last transition; the zero time when the pod is Ready, has no Ready condition yet, or is gone.
func (m *Member) notReadySince() time.Time {
	if m.Pod == nil {
		return time.Time{}
	}
	if cond := PodCondition(m.Pod, corev1.PodReady); cond != nil && cond.Status != corev1.ConditionTrue {
		return cond.LastTransitionTime.Time
	}
	return time.Time{}
}

// Problem says in one line why a member that is down is down, from what Kubernetes and etcd report:
// its pod missing, terminating, unschedulable or with a container waiting (with the reason and exit
// code of its last run), else etcd's error. Empty for a member that is not down. It holds no
// timestamps or back-off delays, so that it changes only when the cause does.
func (m *Member) Problem() string {
	if !m.Down() {
		return ""
	}
	if p := m.podProblem(true); p != "" {
		return p
	}
	if m.Health != nil {
		return "etcd: " + firstLine(m.Health.Error())
	}
	return "not started"
}

// PodProblem says in one line what keeps the member's pod from running etcd, as Kubernetes reports it,
// whether or not etcd lists the member: its pod terminating or unschedulable, its data directory
// refused by verify-data, or a container waiting on something other than its normal start (an image
// that cannot be pulled, a crash loop, a bad configuration). Empty when there is no pod or nothing is
// wrong with it yet. It holds no timestamps or back-off delays.
func (m *Member) PodProblem() string {
	if m.Pod == nil {
		return ""
	}
	return m.podProblem(false)
}

// podProblem is Problem's reading of the pod; starting counts a container still being created or
// waiting for its init containers as a problem too (of a member etcd lists, which should be running).
func (m *Member) podProblem(starting bool) string {
	p := m.Pod
	switch {
	case p == nil:
		return NoPodProblem
	case p.DeletionTimestamp != nil:
		return PodTerminatingProblem
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
			return strings.TrimSpace("pod not scheduled: " + cond.Reason + " " + firstLine(cond.Message))
		}
	}
	if msg := m.DataNotOwn(); msg != "" {
		return "data directory check: " + msg
	}
	waiting := func(what string, cs corev1.ContainerStatus) string {
		w := cs.State.Waiting
		if w == nil || w.Reason == "ContainerCreating" || (!starting && w.Reason == "PodInitializing") {
			return ""
		}
		out := what + " " + w.Reason
		if t := cs.LastTerminationState.Terminated; t != nil {
			out += fmt.Sprintf(" (last exit code %d, %s)", t.ExitCode, t.Reason)
			if cause := ExitCause(t.Message); cause != "" {
				out += ": " + cause
			}
		} else if msg := firstLine(w.Message); msg != "" && w.Reason != "CrashLoopBackOff" {
			out += ": " + msg
		}
		return out
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if out := waiting("init container "+cs.Name, cs); out != "" && !strings.HasSuffix(out, " PodInitializing") {
			return out
		}
	}
	cs := m.etcdStatus()
	switch {
	case cs == nil:
		return ""
	case starting && m.PullingImage():
		return PullingImageProblem + " " + cs.Image
	}
	return waiting("etcd container", *cs)
}

// The Problems of a member whose pod is gone, and whose pod is being deleted.
const (
	NoPodProblem          = "no pod"
	PodTerminatingProblem = "pod terminating"
)

// PullingImageProblem begins the Problem of a member whose etcd container waits for the kubelet to
// pull its image for the first time (Member.PullingImage); the image reference follows.
const PullingImageProblem = "etcd container not created yet: pulling image"

// PullingImage reports whether the member's etcd container waits for the kubelet to pull its image
// for the first time: every init container of its pod has completed (its data volume is mounted: the
// node and the claim are fine), and its etcd container has never been created (no image ID) and waits
// with reason ContainerCreating or PodInitializing. The kubelet does not update a pod's status while
// it pulls an image, so the status it last wrote, which says PodInitializing when the pull follows
// the init containers, stays until the first pull returns. A pull that fails turns the reason into
// ErrImagePull, then ImagePullBackOff, which the kubelet keeps while it retries (ImagePullReasons). A
// pull from a registry that accepts the connection and does not answer may never return. For
// PullGrace after the init containers completed (by the pass's clock), the container is taken as
// being created, not pulled: the kubelet's first status after them shows it so while it creates it
// from an image the node has.
func (m *Member) PullingImage() bool {
	if m.Pod == nil || m.Pod.DeletionTimestamp != nil {
		return false
	}
	var initialized time.Time
	for _, cs := range m.Pod.Status.InitContainerStatuses {
		t := cs.State.Terminated
		if t == nil || t.ExitCode != 0 {
			return false
		}
		if t.FinishedAt.After(initialized) {
			initialized = t.FinishedAt.Time
		}
	}
	if !m.now.IsZero() && !initialized.IsZero() && m.now.Sub(initialized) < PullGrace {
		return false
	}
	cs := m.etcdStatus()
	return cs != nil && cs.ImageID == "" && cs.State.Waiting != nil && (cs.State.Waiting.Reason == "ContainerCreating" || cs.State.Waiting.Reason == "PodInitializing")
}

// PullGrace is how long after a member pod's init containers completed its etcd container may wait
// without an image ID before PullingImage takes it as waiting for a pull: creating it from an image
// the node has takes the kubelet about a second.
const PullGrace = 5 * time.Second

// WaitsForImage reports whether the member's etcd container waits for its image: the kubelet cannot
// get it (ImageUnavailable) or is pulling it for the first time (PullingImage). Neither recreating the
// pod nor replacing the member helps such a member: the new pod would wait for the same image.
func (m *Member) WaitsForImage() bool {
	return m.ImageUnavailable() || m.PullingImage()
}

// DownOnUntriedSpec reports whether the member is down on a spec that no member has served on: a
// rolling update restarted it, while it served, onto the spec its pod was built from, and it has not
// served on it since (its claim's AnnotationRolledOnto is its pod's AnnotationSpecHash; the record is
// removed once it serves), and no other member serves on a pod of that spec. The spec may be what
// keeps it down (a flag value etcd refuses, a memory limit etcd cannot start within, a node selector no
// node matches): a member made from the same spec would most likely fail the same way, so it is not
// replaced. False for a member without a pod or claim, or one that a rollout moved onto the spec while
// it was already down. A pod being deleted counts (one whose first image pull does not return is not
// let go by the kubelet until it does).
func (c *Cluster) DownOnUntriedSpec(m *Member) bool {
	if !m.Down() || m.Pod == nil || m.Claim == nil {
		return false
	}
	hash := m.PodSpecHash()
	if hash == "" || m.Claim.Annotations[etcdv1beta1.AnnotationRolledOnto] != hash {
		return false
	}
	return !slices.ContainsFunc(c.Listed(), func(o *Member) bool {
		return o.Name != m.Name && o.Serving() && o.PodSpecHash() == hash
	})
}

// RolledBackFrom returns the spec hash the member's pod was rolled back from (its claim's
// AnnotationRolledBackFrom), "" when it was not or it has no claim.
func (m *Member) RolledBackFrom() string {
	if m.Claim == nil {
		return ""
	}
	return m.Claim.Annotations[etcdv1beta1.AnnotationRolledBackFrom]
}

// ServedSpec returns the spec hash of the pod the member served on when a rolling update last
// restarted it (its claim's AnnotationServedSpec), "" when there is none.
func (m *Member) ServedSpec() string {
	if m.Claim == nil {
		return ""
	}
	return m.Claim.Annotations[etcdv1beta1.AnnotationServedSpec]
}

// ServedSpecOf returns the cluster to build m's pod from to roll it back to the spec it served on (its
// claim's AnnotationServedSpec): c's EtcdCluster with the spec the cluster's ControllerRevision of that
// hash keeps (resources.Options.SpecOfRevision). Errors when the claim records none, the cluster has no
// such revision, or the revision does not build pods of that hash.
func (c *Cluster) ServedSpecOf(m *Member) (*etcdv1beta1.EtcdCluster, error) {
	hash := m.ServedSpec()
	if hash == "" {
		return nil, fmt.Errorf("the claim of %s records no spec it served on", m.Name)
	}
	return c.RevisionSpec(hash, m.Name)
}

// RevisionSpec returns the cluster to build a pod of the spec of hash from, which member served on:
// c's EtcdCluster with the spec the cluster's ControllerRevision of that hash keeps
// (resources.Options.SpecOfRevision). Errors when hash is "", the cluster has no such revision, or the
// revision does not build pods of that hash.
func (c *Cluster) RevisionSpec(hash, member string) (*etcdv1beta1.EtcdCluster, error) {
	if hash == "" {
		return nil, fmt.Errorf("no record of the spec %s served on", member)
	}
	rev := c.Revisions[hash]
	if rev == nil {
		return nil, fmt.Errorf("no controllerrevision keeps spec %s, which %s served on", hash, member)
	}
	return c.Options.SpecOfRevision(c.Object, rev)
}

// RolledBack returns the first member, by name, whose claim says its pod was rolled back from the spec
// of hash (AnnotationRolledBackFrom), nil when none; whether etcd answers or not, whether the claim is
// being deleted (its record is copied to the spec's revision until it is gone: RollbackMarkToWrite),
// and whether spec.recovery.rollBackFailedRollouts is on or not (turning it off makes no new rollback,
// and leaves the one in place until the spec changes).
func (c *Cluster) RolledBack(hash string) *Member {
	for _, m := range c.Members {
		if m.Claim != nil && hash != "" && m.RolledBackFrom() == hash {
			return m
		}
	}
	return nil
}

// Rollback is a rollout rolled back from the current spec: the rolled-back member, the spec hash it
// serves on (which new members are made from while the rollback holds), why it was rolled back, and the
// member whose claim records it (nil when that claim was lost and only the spec's ControllerRevision
// keeps the record: etcdv1beta1.AnnotationRolledBackClaim).
type Rollback struct {
	// Member is the name of the member rolled back.
	Member string
	// ServedSpec is the hash of the spec it served on and was rolled back to; "" when its claim records
	// none.
	ServedSpec string
	// Reason is why it was rolled back, "" when unrecorded.
	Reason string
	// Recorded is the member whose claim records the rollback (etcdv1beta1.AnnotationRolledBackFrom),
	// nil when the claim was lost.
	Recorded *Member
}

// Rollback returns the rollback from the spec of hash that holds, nil when none: the one a member's
// claim records (RolledBack), or else the one the ControllerRevision of that spec records
// (etcdv1beta1.AnnotationRolledBackClaim) when the claim that recorded it is gone: no claim of that
// member, one being deleted, or one of another UID (the member's replacement's). A claim of that UID
// without the record lifts it (the user removed the record), and so does a member serving on a pod of
// that spec (LiftedRollbackMark).
func (c *Cluster) Rollback(hash string) *Rollback {
	if m := c.RolledBack(hash); m != nil {
		return &Rollback{Member: m.Name, ServedSpec: m.ServedSpec(), Reason: m.Claim.Annotations[etcdv1beta1.AnnotationRollbackReason], Recorded: m}
	}
	name, uid, ok := c.rollbackMark(hash)
	if !ok {
		return nil
	}
	if m := c.Member(name); m != nil && m.HasClaim() && string(m.Claim.UID) == uid {
		return nil // the claim is there without the record: lifted
	}
	if c.servesOn(hash) {
		return nil // the spec runs (a cluster restored from a backup onto it, say)
	}
	rev := c.Revisions[hash]
	return &Rollback{Member: name, ServedSpec: rev.Annotations[etcdv1beta1.AnnotationServedSpec], Reason: rev.Annotations[etcdv1beta1.AnnotationRollbackReason]}
}

// rollbackMark returns the member and claim UID the ControllerRevision of hash records a rollback from
// it for (etcdv1beta1.AnnotationRolledBackClaim); ok is false when it records none.
func (c *Cluster) rollbackMark(hash string) (member, uid string, ok bool) {
	rev := c.Revisions[hash]
	if rev == nil || hash == "" {
		return "", "", false
	}
	member, uid, ok = strings.Cut(rev.Annotations[etcdv1beta1.AnnotationRolledBackClaim], "/")
	return member, uid, ok && member != "" && uid != ""
}

// RollbackMarkToWrite returns the annotations to write on the ControllerRevision of hash so that it
// records the rollback a member's claim records (Rollback, etcdv1beta1.AnnotationRolledBackClaim), nil
// when it records that already or no claim records one.
func (c *Cluster) RollbackMarkToWrite(hash string) map[string]string {
	m := c.RolledBack(hash)
	if m == nil || c.Revisions[hash] == nil {
		return nil
	}
	want := map[string]string{
		etcdv1beta1.AnnotationRolledBackClaim: m.Name + "/" + string(m.Claim.UID),
		etcdv1beta1.AnnotationServedSpec:      m.ServedSpec(),
		etcdv1beta1.AnnotationRollbackReason:  m.Claim.Annotations[etcdv1beta1.AnnotationRollbackReason],
	}
	have := c.Revisions[hash].Annotations
	for k, v := range want {
		if have[k] != v {
			return want
		}
	}
	return nil
}

// LiftedRollbackMark reports whether the ControllerRevision of hash records a rollback
// (etcdv1beta1.AnnotationRolledBackClaim) that no longer holds: no claim records it, and either the
// claim that recorded it is there (the user removed the record to have the rollout try the spec
// again) or a member serves on a pod of that spec (it runs: a cluster restored from a backup onto it,
// say). Its annotations are then to be removed, so that losing that claim later, or the members going
// down, does not bring the rollback back.
func (c *Cluster) LiftedRollbackMark(hash string) bool {
	name, uid, ok := c.rollbackMark(hash)
	if !ok || c.RolledBack(hash) != nil {
		return false
	}
	m := c.Member(name)
	return (m != nil && m.HasClaim() && string(m.Claim.UID) == uid) || c.servesOn(hash)
}

// Trial returns the member a rolling update is trying the spec of hash on, nil when none: the first
// member, by name, whose claim records that the rollout restarted it onto that spec while it served
// (etcdv1beta1.AnnotationRolledOnto, with the spec hash it served on, AnnotationServedSpec, which
// spec.recovery.rollBackFailedRollouts has recorded) and that has a pod of that spec (being deleted or
// not), while no member serves on a pod of that spec and no rollback from it holds (Rollback). Until a
// member serves on it, nothing says the spec runs: the repair makes no other member's pod from it
// (verdict.SpecToAdd, verdict.SpecToRestore), as the rollout restarts no other member onto it. The pod
// is required so that a record not yet removed (it goes once the member serves on the spec:
// verdict.ClaimRecordsToDrop) never makes members that ran on the spec, their pods all lost at once,
// come back on an older one.
func (c *Cluster) Trial(hash string) *Member {
	if hash == "" || c.servesOn(hash) || c.Rollback(hash) != nil {
		return nil
	}
	for _, m := range c.Members {
		if m.Claim != nil && m.Claim.Annotations[etcdv1beta1.AnnotationRolledOnto] == hash && m.ServedSpec() != "" && m.ServedSpec() != hash &&
			m.Pod != nil && m.PodSpecHash() == hash {
			return m
		}
	}
	return nil
}

// servesOn reports whether a member serves on a pod of the spec of hash.
func (c *Cluster) servesOn(hash string) bool {
	return slices.ContainsFunc(c.Members, func(m *Member) bool { return m.HasPod() && m.Serving() && m.PodSpecHash() == hash })
}

// ImagePullReasons are the reasons the kubelet gives a container that waits for an image it cannot get.
var ImagePullReasons = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}

// ImagePullProblem reports whether problem, a member's Problem or PodProblem (as status.members[].problem
// keeps it), is its etcd container waiting for an image it cannot get (ImagePullReasons) or that the
// kubelet is pulling for the first time (PullingImageProblem).
func ImagePullProblem(problem string) bool {
	return strings.HasPrefix(problem, PullingImageProblem) || slices.ContainsFunc(ImagePullReasons, func(reason string) bool { return strings.HasPrefix(problem, "etcd container "+reason) })
}

// ImageUnavailable reports whether the member's etcd container waits for an image it cannot get
// (ImagePullReasons): a member created from the same spec would wait the same way.
func (m *Member) ImageUnavailable() bool {
	cs := m.etcdStatus()
	return cs != nil && cs.State.Waiting != nil && slices.Contains(ImagePullReasons, cs.State.Waiting.Reason)
}

// DataNotOwn returns why the member's data directory is not its own, as the pod's verify-data init
// container found before etcd started (exit code 3, its termination message), or "" when it did not
// find that (it passed, did not run, or could not tell).
func (m *Member) DataNotOwn() string {
	if cs := m.verifyDataStatus(); cs != nil {
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t != nil && t.ExitCode == resources.ExitNotOwn {
				if msg := firstLine(t.Message); msg != "" {
					return msg
				}
				return "the data directory is not the member's own"
			}
		}
	}
	return ""
}

// DataDiverged returns what the operator's comparison of the members' key-value hashes found of the
// member, whose hash differed from the one a strict majority of the members share (its pod's
// AnnotationDataDiverged), or "" when it found nothing of the kind. The record goes with the pod.
func (m *Member) DataDiverged() string {
	if m.Pod == nil {
		return ""
	}
	return m.Pod.Annotations[etcdv1beta1.AnnotationDataDiverged]
}

// unreadableDataErrors are the errors bbolt gives etcd for a database file that is not a valid
// database (its meta pages fail their checks), by etcd's log line "failed to open database".
var unreadableDataErrors = []string{"invalid database", "version mismatch", "checksum error", "file size too small"}

// DataUnreadable returns what the member's etcd said as its last run failed because its data on disk
// cannot be read, or what the pod's verify-data init container said of a WAL it could not read
// (walUnreadable): "failed to open database" with one of bbolt's errors for a file that is not a valid
// database (unreadableDataErrors), a Go panic inside bbolt.Open (bbolt's checks of the pages it walks
// as it opens the file failed: "assertion failed: Page expected to be: 4, but self identifies as …",
// what a database whose meta pages are intact and whose other pages are overwritten gives; see
// openPanic), or a bootstrap that failed on a WAL or snapshot file that fails its
// checksum ("crc mismatch") or does not decode ("proto: …"). It reads the etcd container's most recent
// termination (its current state, else its last), whose message, with
// TerminationMessageFallbackToLogsOnError, is the tail of etcd's log; "" when that run did not fail so,
// or its message does not say it (an error of another kind, such as "permission denied", is never
// taken for it). No restart, and no other pod on the same data, heals such data: only a copy from the
// member's peers does.
func (m *Member) DataUnreadable() string {
	if msg := m.walUnreadable(); msg != "" {
		return msg
	}
	t := failedRun(m.etcdStatus())
	if t == nil {
		return ""
	}
	for line := range strings.Lines(t.Message) {
		entry, ok := failureLine(line)
		switch {
		case !ok:
		case entry.Msg == "failed to open database" && slices.Contains(unreadableDataErrors, entry.Error),
			(entry.Msg == "bootstrap failed" || entry.Msg == "discovery failed") && walRecordError(entry.Error):
			return firstLine(entry.Msg + ": " + entry.Error)
		}
	}
	return openPanic(t.Message)
}

// openPanic returns what message, the tail of etcd's log, says of a Go panic inside bbolt.Open, the
// call that opens the member's database file ("panic opening the database: " and the panic's message,
// or "panic opening the database, in " and the innermost function of the traceback when the panic's
// line is before the tail); "" when message does not end in such a traceback, or tells of a fatal
// error of the Go runtime (such as running out of memory), which is not the file's.
func openPanic(message string) string {
	funcs := goTraceback(message)
	if !slices.Contains(funcs, "go.etcd.io/bbolt.Open") || strings.Contains(message, "fatal error: ") || strings.Contains(message, "out of memory") {
		return ""
	}
	for line := range strings.Lines(message) {
		if panicked, ok := strings.CutPrefix(strings.TrimSpace(line), "panic: "); ok {
			return firstLine("panic opening the database: " + panicked)
		}
	}
	return firstLine("panic opening the database, in " + funcs[0])
}

// goTraceback returns the functions of the Go traceback that ends message, innermost first, as Go
// prints a goroutine's stack: a function's line, its arguments in parentheses, then its file and line
// indented by a tab. It reads the last goroutine's stack when message holds more than one; nil when
// message does not end in a traceback. A cut first line (message is a log's tail) is passed over.
func goTraceback(message string) []string {
	lines := strings.Split(strings.TrimRight(message, "\n"), "\n")
	isFile := func(l string) bool { return strings.HasPrefix(l, "\t") && strings.Contains(l, ".go:") }
	if !isFile(lines[len(lines)-1]) {
		return nil
	}
	var funcs []string
	for i, l := range lines[:len(lines)-1] {
		switch {
		case strings.HasPrefix(l, "goroutine "):
			funcs = nil
		case l != "" && !strings.HasPrefix(l, "\t") && !strings.HasPrefix(l, "created by ") && strings.HasSuffix(l, ")") && isFile(lines[i+1]):
			funcs = append(funcs, l[:strings.LastIndex(l, "(")])
		}
	}
	return funcs
}

// RaftLogLost returns what the member's etcd said as its last run failed because its raft log lacks
// entries it had acknowledged to the leader, or "": raft panics with "tocommit(N) is out of range
// [lastIndex(M)]. Was the raft log corrupted, truncated, or lost?" when the leader's commit index is
// past the member's last log entry, which only a log that lost written entries gives (a WAL
// overwritten or truncated, a data directory put back from an older copy). No restart heals it: the
// leader never forgets what the member acknowledged. It reads the etcd container's most recent
// termination, whose message, with TerminationMessageFallbackToLogsOnError, is the tail of etcd's log:
// raft's JSON log line of level panic, or Go's panic line after it.
func (m *Member) RaftLogLost() string {
	t := failedRun(m.etcdStatus())
	if t == nil {
		return ""
	}
	for line := range strings.Lines(t.Message) {
		msg, ok := strings.CutPrefix(strings.TrimSpace(line), "panic: ")
		if entry, isJSON := failureLine(line); isJSON {
			msg, ok = entry.Msg, true
		}
		if ok && strings.HasPrefix(msg, "tocommit(") && strings.Contains(msg, ") is out of range [lastIndex(") {
			msg, _, _ = strings.Cut(msg, ". ")
			return firstLine(msg)
		}
	}
	return ""
}

// walUnreadable returns what the pod's verify-data init container said as its most recent run failed
// reading the member's WAL, which fails its checksum ("crc mismatch") or does not decode ("proto: …"):
// it reads the WAL before etcd starts, so on a pod recreated on its claim etcd never gets to say it.
// "" otherwise (it passed, found the directory not the member's own, or failed another way).
func (m *Member) walUnreadable() string {
	if t := failedRun(m.verifyDataStatus()); t != nil {
		if t.ExitCode == resources.ExitNotOwn {
			return ""
		}
		for line := range strings.Lines(t.Message) {
			_, cause, found := strings.Cut(line, "read the WAL's snapshot entries in ")
			if _, err, ok := strings.Cut(cause, ": "); found && ok && walRecordError(err) {
				return firstLine("verify-data read the WAL: " + strings.TrimSpace(err))
			}
		}
	}
	return ""
}

// ExitCause returns what a process said as it failed, from its container's termination message (with
// TerminationMessageFallbackToLogsOnError, the tail of its log): a Go panic's or the Go runtime's fatal
// error's line ("panic: …", "fatal error: …"; for the panic of a JSON log line of level panic, that
// line's message and error: "panic: failed to open database: invalid database"), else the message and
// error of its last JSON log line of level error, fatal or panic (etcd logs so: "msg" and "error"), else
// its last plain line that starts with "error: " (the operator's own commands, such as verify-data, and
// most command-line tools say so), else "panic in " and the innermost function of a Go traceback whose
// panic line is before the tail; "" when there is none of these. It holds no timestamp, so that it is
// the same on every restart that fails the same way; at most 200 bytes.
func ExitCause(message string) string {
	cause, panicked, plain := "", "", ""
	for line := range strings.Lines(message) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") {
			if panicked != "" && line == "panic: "+panicked {
				// the Go panic of etcd's log line of level panic, which has the error too
				return "panic: " + firstLine(cause)
			}
			return firstLine(line)
		}
		if entry, ok := failureLine(line); ok {
			cause = entry.Msg
			if entry.Error != "" {
				cause += ": " + entry.Error
			}
			panicked = ""
			if entry.Level == "panic" {
				panicked = entry.Msg
			}
		} else if len(line) > len("error: ") && strings.EqualFold(line[:len("error: ")], "error: ") {
			plain = line
		}
	}
	switch {
	case cause != "":
		return firstLine(cause)
	case plain != "":
		return firstLine(plain)
	}
	if funcs := goTraceback(message); len(funcs) > 0 {
		return firstLine("panic in " + funcs[0])
	}
	return ""
}

// logEntry is what the operator reads of a line of etcd's JSON log.
type logEntry struct{ Level, Msg, Error string }

// failureLine returns line, one line of etcd's log, as a logEntry when it is a JSON line of level
// error, fatal or panic.
func failureLine(line string) (logEntry, bool) {
	var entry logEntry
	if line = strings.TrimSpace(line); !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &entry) != nil {
		return entry, false
	}
	return entry, entry.Level == "error" || entry.Level == "fatal" || entry.Level == "panic"
}

// walRecordError reports whether err, an error of etcd's wal package reading records, says a record
// fails its checksum or does not decode.
func walRecordError(err string) bool {
	return strings.Contains(err, "crc mismatch") || strings.HasPrefix(err, "proto: ")
}

// firstLine returns the first line of s, at most about 200 bytes of it: a longer line keeps its
// beginning and its end around "…", since a wrapped error names its cause last ("failed to pull and
// unpack image …: … dial tcp: lookup registry-1.docker.io: no such host"). Both are cut between
// words where a space is near (within 50 bytes), so that no word is shown in part.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) <= 200 {
		return s
	}
	head, tail := s[:110], s[len(s)-90:]
	if i := strings.LastIndexByte(head, ' '); i >= len(head)-50 {
		head = head[:i]
	}
	if i := strings.IndexByte(tail, ' '); i >= 0 && i < 50 {
		tail = tail[i+1:]
	}
	return strings.ToValidUTF8(strings.TrimRight(head, " "), "") + " … " + strings.ToValidUTF8(tail, "")
}

// HasClaim reports whether the member has a claim that is not being deleted.
func (m *Member) HasClaim() bool { return m.Claim != nil && m.Claim.DeletionTimestamp == nil }

// ClaimTerminating reports whether the member's claim is being deleted.
func (m *Member) ClaimTerminating() bool { return m.Claim != nil && m.Claim.DeletionTimestamp != nil }

// ClaimDeletedUnderPod reports whether the member's claim is being deleted while its pod, not being
// deleted, runs on it: kubernetes.io/pvc-protection keeps the claim until the pod is gone, and the
// member's data goes with the pod.
func (m *Member) ClaimDeletedUnderPod() bool { return m.ClaimTerminating() && m.HasPod() }

// StartedAs returns how the member was first started, as its claim records it (its
// --initial-cluster-state and --initial-cluster, and the member and cluster ID it then had); "new" with
// no initial cluster when the claim records nothing.
func (m *Member) StartedAs() resources.Member {
	out := resources.Member{Name: m.Name, InitialClusterState: resources.StateNew}
	if m.Claim == nil {
		return out
	}
	if state := m.Claim.Annotations[etcdv1beta1.AnnotationInitialClusterState]; state != "" {
		out.InitialClusterState = state
	}
	out.InitialCluster = m.Claim.Annotations[etcdv1beta1.AnnotationInitialCluster]
	out.ExpectMemberID = m.Claim.Annotations[etcdv1beta1.AnnotationMemberID]
	out.ExpectClusterID = m.Claim.Annotations[etcdv1beta1.AnnotationClusterID]
	return out
}

// PodFlag returns the value of etcd flag name (without "--") that the member's pod runs etcd with, ""
// when it has no pod or does not set the flag.
func (m *Member) PodFlag(name string) string { return resources.PodFlag(m.Pod, name) }

// Cluster is what one pass observed of an EtcdCluster.
type Cluster struct {
	// Object is the EtcdCluster as the pass read it.
	Object *etcdv1beta1.EtcdCluster
	// Desired is the number of voting members the spec asks for.
	Desired int
	// Members holds every member name that has a pod, a claim, an etcd member, or, when etcd did not
	// answer, an entry in the status; sorted by name.
	Members []*Member
	// ForeignClaims are claims with this cluster's labels that were created for an earlier cluster of the
	// same name (kept by storage.retainPolicy Retain): never used by this one. Sorted.
	ForeignClaims []string
	// Etcd is what etcd reported; nil when no member answered.
	Etcd *Etcd
	// EtcdErr says why Etcd is nil.
	EtcdErr error
	// Now is the time of the pass.
	Now time.Time
	// Options are the operator's options the pass runs with.
	Options resources.Options
	// SpecHash is the hash of the current spec (Options.SpecHash): a member pod of another hash was
	// built from an older spec.
	SpecHash string
	// Revisions are the cluster's ControllerRevisions (resources.Options.Revision), by the spec hash
	// they are labelled with.
	Revisions map[string]*appsv1.ControllerRevision
}

// Input is what a pass listed and asked, from which Build makes the model.
type Input struct {
	// Cluster is the EtcdCluster.
	Cluster *etcdv1beta1.EtcdCluster
	// Options name the members' peer URLs (to name an etcd member that has not started).
	Options resources.Options
	// Pods and Claims are the objects carrying the cluster's selector labels; pods and claims that are
	// not a member's are ignored.
	Pods   []corev1.Pod
	Claims []corev1.PersistentVolumeClaim
	// Etcd is what etcd reported, nil when no member answered; EtcdErr says why.
	Etcd    *Etcd
	EtcdErr error
	// Now is the time of the pass (the zero time: time.Now()); DownSince is counted against it.
	Now time.Time
	// Revisions are the ControllerRevisions carrying the cluster's labels.
	Revisions []appsv1.ControllerRevision
}

// Build joins the input into one model; it makes no call.
func Build(in Input) *Cluster {
	c := in.Cluster
	out := &Cluster{Object: c, Desired: int(c.Spec.ReplicasOrDefault()), Etcd: in.Etcd, EtcdErr: in.EtcdErr, Now: in.Now, Options: in.Options,
		SpecHash: in.Options.SpecHash(c), Revisions: map[string]*appsv1.ControllerRevision{}}
	for i := range in.Revisions {
		if rev := &in.Revisions[i]; rev.DeletionTimestamp == nil && metav1.IsControlledBy(rev, c) {
			out.Revisions[rev.Labels[etcdv1beta1.LabelSpecHash]] = rev
		}
	}
	if out.Now.IsZero() {
		out.Now = time.Now()
	}
	byName := map[string]*Member{}
	get := func(name string) *Member {
		if m, ok := byName[name]; ok {
			return m
		}
		m := &Member{Name: name, now: out.Now, answered: in.Etcd != nil}
		byName[name] = m
		return m
	}
	for i := range in.Pods {
		if _, ok := resources.MemberOrdinal(c, in.Pods[i].Name); ok {
			get(in.Pods[i].Name).Pod = &in.Pods[i]
		}
	}
	for i := range in.Claims {
		pvc := &in.Claims[i]
		if uid := pvc.Annotations[etcdv1beta1.AnnotationClusterUID]; uid != "" && uid != string(c.UID) {
			out.ForeignClaims = append(out.ForeignClaims, pvc.Name)
			continue
		}
		name := strings.TrimPrefix(pvc.Name, resources.PVCName(""))
		if _, ok := resources.MemberOrdinal(c, name); ok && resources.PVCName(name) == pvc.Name {
			get(name).Claim = pvc
		}
	}
	if e := in.Etcd; e != nil {
		for i := range e.Members {
			em := &e.Members[i]
			m := get(MemberName(in.Options, c, *em))
			m.Etcd = em
			var asked bool
			if m.Health, asked = e.Health[em.ID]; !asked {
				m.Health = ErrNotAsked
			}
			if st, ok := e.Status[em.ID]; ok {
				m.Status = &st
			}
		}
	}
	out.addRecorded(byName, get)
	return out
}

// addRecorded joins what the status recorded of each member (when etcd did not answer, every member
// it recorded is one of the model's), sets each member's DownSince, and sorts the model.
func (out *Cluster) addRecorded(byName map[string]*Member, get func(string) *Member) {
	for i := range out.Object.Status.Members {
		rec := &out.Object.Status.Members[i]
		if out.Etcd == nil {
			get(rec.Name).Recorded = rec
		} else if m, ok := byName[rec.Name]; ok {
			m.Recorded = rec
		}
	}
	for _, m := range byName {
		m.DownSince = downSince(m, out.Now)
		out.Members = append(out.Members, m)
	}
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].Name < out.Members[j].Name })
	sort.Strings(out.ForeignClaims)
}

// downSince returns since when m is down, counted at now: when the status recorded it down; else the
// earlier of when its pod stopped being Ready and now; the zero time when it is not down. The status's
// record already took the pod's Ready condition into account when it was first written, and
// overrides it: a member promoted since the status last listed it starts at now (its first checks as
// a voter may time out while it applies what it caught up on, and must not get it recreated at once),
// and keeps that start on the passes after, although its pod has not been Ready since its learner
// days. A learner's
// clock starts no earlier than its pod got a node, and does not run while its pod waits for one
// without being refused (its claim is being provisioned): a learner cannot start before that, and a
// slow provisioner must not get each new member replaced before it could start.
func downSince(m *Member, now time.Time) time.Time {
	if !m.Down() {
		return time.Time{}
	}
	if r := m.Recorded; r != nil && r.Role == etcdv1beta1.RoleLearner && m.Voter() {
		// promoted since the status last listed it: etcd promotes only a learner in sync with the
		// leader, so it was not down then, whatever the checks of its learner days said
		return now
	}
	since := now
	if r := m.Recorded; r != nil && r.DownSince != nil {
		if r.DownSince.Time.Before(since) {
			since = r.DownSince.Time
		}
	} else if t := m.notReadySince(); !t.IsZero() && t.Before(since) {
		since = t
	}
	if m.Learner() && m.Pod != nil {
		switch scheduled, refused := podScheduled(m.Pod); {
		case !scheduled.IsZero() && scheduled.After(since):
			since = scheduled
		case scheduled.IsZero() && !refused:
			since = now
		}
	}
	return since
}

// podScheduled returns when p got a node (its PodScheduled condition turned True), the zero time when
// it has none yet, and whether the scheduler refused it (Unschedulable).
func podScheduled(p *corev1.Pod) (time.Time, bool) {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			if cond.Status == corev1.ConditionTrue {
				return cond.LastTransitionTime.Time, false
			}
			return time.Time{}, cond.Reason == corev1.PodReasonUnschedulable
		}
	}
	return time.Time{}, false
}

// Member returns the member of that name, nil when the model has none.
func (c *Cluster) Member(name string) *Member {
	i := sort.Search(len(c.Members), func(i int) bool { return c.Members[i].Name >= name })
	if i < len(c.Members) && c.Members[i].Name == name {
		return c.Members[i]
	}
	return nil
}

// NeverStarted reports whether etcd lists member name as never started (it has no name yet): an initial
// member of a restored cluster whose restore did not finish still needs the snapshot, and the cluster
// token the others were restored with.
func (c *Cluster) NeverStarted(name string) bool {
	m := c.Member(name)
	return m != nil && m.Listed() && !m.Started()
}

// JoinInitialCluster returns the --initial-cluster a member joining cluster c starts with: every member
// of members (etcd's member list, the joining member included) as "<name>=<peer URL>", sorted, so that
// the same members give the same pod spec.
func JoinInitialCluster(opts resources.Options, c *etcdv1beta1.EtcdCluster, members []etcd.Member) string {
	var parts []string
	for _, em := range members {
		if len(em.PeerURLs) > 0 {
			parts = append(parts, MemberName(opts, c, em)+"="+em.PeerURLs[0])
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Answered reports whether etcd answered in this pass.
func (c *Cluster) Answered() bool { return c.Etcd != nil }

// Formed reports whether the cluster has ever formed: etcd answered, now or in an earlier pass. A formed
// cluster never bootstraps again: a lost member is replaced, never started as "new".
func (c *Cluster) Formed() bool { return c.Etcd != nil || c.Object.Status.ClusterID != "" }

// Listed returns the members etcd lists, in etcd's order; none when etcd did not answer.
func (c *Cluster) Listed() []*Member {
	if c.Etcd == nil {
		return nil
	}
	out := make([]*Member, 0, len(c.Etcd.Members))
	for _, em := range c.Etcd.Members {
		for _, m := range c.Members {
			if m.Etcd != nil && m.Etcd.ID == em.ID {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// Registered returns the members the cluster has, by name: those etcd lists when it answered,
// otherwise those the status last listed.
func (c *Cluster) Registered() []*Member {
	return c.filter(func(m *Member) bool { return (c.Etcd != nil && m.Etcd != nil) || (c.Etcd == nil && m.Recorded != nil) })
}

// count returns how many members satisfy keep.
func (c *Cluster) count(keep func(*Member) bool) int { return len(c.filter(keep)) }

// Voters is the number of voting members (see Member.Voter).
func (c *Cluster) Voters() int { return c.count((*Member).Voter) }

// HealthyVoters is the number of voting members that are healthy.
func (c *Cluster) HealthyVoters() int {
	return c.count(func(m *Member) bool { return m.Voter() && m.Healthy() })
}

// ServingVoters is the number of voting members that are serving (healthy but for NOSPACE included).
func (c *Cluster) ServingVoters() int {
	return c.count(func(m *Member) bool { return m.Voter() && m.Serving() })
}

// Learners is the number of learners etcd lists.
func (c *Cluster) Learners() int { return c.count((*Member).Learner) }

// Quorum is the number of healthy voters the cluster's voters need to commit.
func (c *Cluster) Quorum() int { return membership.Quorum(c.Voters()) }

// Corrupt returns the IDs of the members etcd raised the CORRUPT alarm for (see etcd.ErrCorrupt),
// whether it still lists them or not, in the order etcd gave them.
func (c *Cluster) Corrupt() []uint64 {
	if c.Etcd == nil {
		return nil
	}
	var out []uint64
	for _, a := range c.Etcd.Alarms {
		if a.Type == etcd.AlarmCorrupt && !slices.Contains(out, a.MemberID) {
			out = append(out, a.MemberID)
		}
	}
	return out
}

// AnyNoSpace reports whether a member reported a NOSPACE alarm: one is enough for every member to refuse
// writes.
func (c *Cluster) AnyNoSpace() bool {
	return c.count((*Member).NoSpace) > 0
}

// Leader returns the member etcd agrees leads, nil when there is none.
func (c *Cluster) Leader() *Member {
	if c.Etcd == nil || c.Etcd.Leader == 0 {
		return nil
	}
	for _, m := range c.Members {
		if m.Etcd != nil && m.Etcd.ID == c.Etcd.Leader {
			return m
		}
	}
	return nil
}

// Pods returns the members that have a pod (terminating or not).
func (c *Cluster) Pods() []*Member { return c.filter(func(m *Member) bool { return m.Pod != nil }) }

// Claims returns the members that have a claim (being deleted or not).
func (c *Cluster) Claims() []*Member { return c.filter(func(m *Member) bool { return m.Claim != nil }) }

// filter returns the members that satisfy keep, by name.
func (c *Cluster) filter(keep func(*Member) bool) []*Member {
	var out []*Member
	for _, m := range c.Members {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

// MemberName returns the name of an etcd member: the name it reports, or, for a learner that has not
// started, the member name in its peer URL; its hex ID when neither is known.
func MemberName(opts resources.Options, c *etcdv1beta1.EtcdCluster, m etcd.Member) string {
	if m.Name != "" {
		return m.Name
	}
	for _, u := range m.PeerURLs {
		if pu, err := url.Parse(u); err == nil {
			host, _, _ := strings.Cut(pu.Hostname(), ".")
			if _, ok := resources.MemberOrdinal(c, host); ok && (u == opts.PeerURLScheme(c, host, true) || u == opts.PeerURLScheme(c, host, false)) {
				return host
			}
		}
	}
	return etcd.FormatID(m.ID)
}

// Created records a member pod the pass created, so that what the pass writes at its end (the status's
// replicas, the members without a running pod) counts it.
func (c *Cluster) Created(pod *corev1.Pod) {
	if m := c.Member(pod.Name); m != nil {
		m.Pod = pod
		return
	}
	c.Members = append(c.Members, &Member{Name: pod.Name, Pod: pod})
	sort.Slice(c.Members, func(i, j int) bool { return c.Members[i].Name < c.Members[j].Name })
}
