package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/observe"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// DefaultConsistencyCheckInterval is how often the members' key-value hashes are compared.
const DefaultConsistencyCheckInterval = 10 * time.Minute

// inconsistentCheckInterval is how often the hashes are compared while the DataInconsistent condition
// is True, when that is more often than the interval.
const inconsistentCheckInterval = time.Minute

// restartedCheckInterval is how soon after the last comparison a member's restart brings the next
// one forward (consistencyDue): at most once a minute, so that a rolling restart of a large store does
// not hash it once per member.
const restartedCheckInterval = time.Minute

// hashKVTimeout bounds each member's HashKV, which reads its whole key-value store.
const hashKVTimeout = 10 * time.Second

// checkConsistency compares the key-value hashes of every voting member at one revision (the lowest
// any of them has applied), at most once per ConsistencyCheckInterval (once a minute while the
// members disagree), and again within about a minute of a member's restart, or of a member joining or
// leaving (consistencyDue), only while the cluster is settled and healthy, and records the outcome in
// the DataInconsistent condition. When they disagree and a strict majority shares one hash, the
// members that differ from it (all running one etcd release) are recorded as diverged on their pods
// (recordDiverged), which has them replaced at once.
func (r *EtcdClusterReconciler) checkConsistency(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	interval := r.ConsistencyCheckInterval
	if interval < 0 || !s.m.Answered() {
		return nil, nil
	}
	if interval == 0 {
		interval = DefaultConsistencyCheckInterval
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionDataInconsistent); cond != nil && cond.Status == metav1.ConditionTrue {
		// while the members disagree (a diverged member being replaced, say), look again soon
		interval = min(interval, inconsistentCheckInterval)
	}
	now := time.Now()
	last, compared, ran := r.consistency.Last(string(c.UID))
	members := listedNames(s.m)
	restarted := time.Time{}
	switch {
	case !sameVersion(s.m): // during an upgrade, members on two releases are compared only every interval
	case ran && compared != members:
		restarted = now // a member joined or left since: compare the members there are now, as after a restart
	default:
		restarted = lastEtcdStart(s.m)
	}
	if wait := consistencyDue(last, ran, interval, restarted, now); wait != 0 {
		if wait > 0 {
			s.report.CheckAfter = wait
		}
		return nil, nil
	}
	rev, endpoints := verdict.HashTarget(s.m)
	if rev == 0 {
		return nil, nil // not settled: check later
	}
	hashes := observe.Hashes(ctx, s.etcdClient, rev, endpoints, hashKVTimeout)
	v := verdict.CompareHashes(rev, hashes, len(endpoints))
	// an inconclusive comparison counts as a check too: hashing a large store on every member is not
	// retried more often than the interval
	r.consistency.Done(string(c.UID), now, members)
	if !v.Conclusive {
		return nil, nil
	}
	if v.Consistent {
		s.report.Consistency = &verdict.Progress{Reason: etcdv1beta1.ReasonHashesMatch, Message: v.Message}
		return nil, nil
	}
	if !sameVersion(s.m) {
		v.Diverged = nil // hashes of two etcd releases: not grounds to replace a member
	}
	msg := verdict.MismatchMessage(c, v)
	s.report.Consistency = &verdict.Progress{Reason: etcdv1beta1.ReasonHashMismatch, Message: msg}
	if !verdict.HasCondition(c, etcdv1beta1.ConditionDataInconsistent, metav1.ConditionTrue, msg) {
		r.event(c, corev1.EventTypeWarning, etcdv1beta1.ReasonHashMismatch, "CheckConsistency", "%s", msg)
	}
	return nil, r.recordDiverged(ctx, s, v.Diverged)
}

// consistencyDue says whether the members' hashes are to be compared at now: 0 when they are (the
// comparison has not run since the operator started, ran false; or last ran interval or more before
// now; or a member's etcd started after it last ran, restarted being the latest start, zero when
// unknown, and that was restartedCheckInterval or more before now); how long until it is when only that
// spacing holds a restart's comparison back; -1 when it is not due. A member that restarts comes back
// on data that may have changed while it was down (a disk that returned other bytes, a file edited or
// copied by hand) and serves it at once: it is compared within about a minute of its restart, rather
// than at the next interval (10 minutes by default).
func consistencyDue(last time.Time, ran bool, interval time.Duration, restarted, now time.Time) time.Duration {
	switch {
	case !ran || now.Sub(last) >= interval:
		return 0
	case restarted.After(last):
		return max(0, restartedCheckInterval-now.Sub(last))
	}
	return -1
}

// listedNames returns the names of the members etcd lists, sorted and joined by commas.
func listedNames(m *model.Cluster) string {
	names := make([]string, 0, len(m.Members))
	for _, mem := range m.Listed() {
		names = append(names, mem.Name)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// lastEtcdStart returns when the etcd container that started last, of the members etcd lists, started
// (the kubelet's report); zero when none runs.
func lastEtcdStart(m *model.Cluster) time.Time {
	var latest time.Time
	for _, mem := range m.Listed() {
		if t := mem.EtcdRunningSince(); t.After(latest) {
			latest = t
		}
	}
	return latest
}

// sameVersion reports whether every member etcd lists reported the same server version.
func sameVersion(m *model.Cluster) bool {
	version := ""
	for _, mem := range m.Listed() {
		switch {
		case mem.Status == nil:
			return false
		case version == "":
			version = mem.Status.Version
		case mem.Status.Version != version:
			return false
		}
	}
	return version != ""
}

// recordDiverged records on the pod of each member of diverged (name → what its hash differs by) that
// its data diverged (etcdv1beta1.AnnotationDataDiverged), in the pass's model too: the membership
// planner replaces it at once (verdict.ReplaceDue), unless replacing is off.
func (r *EtcdClusterReconciler) recordDiverged(ctx context.Context, s *scope, diverged map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(diverged)) {
		m := s.m.Member(name)
		if m == nil || m.Pod == nil || m.Pod.Annotations[etcdv1beta1.AnnotationDataDiverged] == diverged[name] {
			continue
		}
		patch := client.MergeFrom(m.Pod.DeepCopy())
		m.Pod.Annotations = resources.Merged(m.Pod.Annotations, map[string]string{etcdv1beta1.AnnotationDataDiverged: diverged[name]})
		if err := r.Patch(ctx, m.Pod, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("record on pod %s that its data diverged: %w", m.Pod.Name, err)
		}
	}
	return nil
}
