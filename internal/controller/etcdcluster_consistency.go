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
	"sigs.k8s.io/controller-runtime/pkg/log"

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

// restartedCheckInterval is how soon after the last comparison the members' starting, joining or
// leaving brings the next one forward (consistencyDue): at most one such comparison a minute, however
// many members restart (a rollout by the operator is compared once, when it ends: its steps come first).
const restartedCheckInterval = time.Minute

// hashKVTimeout bounds each member's HashKV, which reads its whole key-value store.
const hashKVTimeout = 10 * time.Second

// checkConsistency compares the key-value hashes of every voting member at one revision (the lowest
// any of them has applied), once per ConsistencyCheckInterval (once a minute while the members
// disagree), and sooner when the members changed since the last comparison (consistencyDue): a
// member's etcd started (restarted, or made again), or a member joined or left; only while the
// cluster is settled and healthy. It records the outcome in the DataInconsistent condition. When they
// disagree and a strict majority shares one hash, the members that differ from it (all running one
// etcd release) are recorded as diverged on their pods (recordDiverged), which has them replaced at
// once.
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
	now := s.m.Now
	last, compared, ran := r.consistency.Last(string(c.UID))
	members, same := runningMembers(s.m), sameVersion(s.m)
	// during an upgrade (members on two releases) only the interval applies
	changed := ran && members != compared && same
	if wait := consistencyDue(last, ran, interval, changed, now); wait != 0 {
		if wait > 0 {
			s.report.CheckAfter = wait
		}
		return nil, nil
	}
	rev, endpoints := verdict.HashTarget(s.m)
	if rev == 0 {
		return nil, nil // not settled: check later
	}
	hashes, timedOut := observe.Hashes(ctx, s.etcdClient, rev, endpoints, hashKVTimeout)
	v := verdict.CompareHashes(rev, hashes, len(endpoints))
	if !v.Conclusive {
		r.inconclusive(ctx, s, now, members, timedOut, v.Message)
		return nil, nil
	}
	r.consistency.Done(string(c.UID), now, members)
	if v.Consistent {
		s.report.Consistency = &verdict.Progress{Reason: etcdv1beta1.ReasonHashesMatch, Message: v.Message}
		return nil, nil
	}
	if !same {
		v.Diverged = nil // hashes of two etcd releases: not grounds to replace a member
	}
	msg := verdict.MismatchMessage(c, v)
	s.report.Consistency = &verdict.Progress{Reason: etcdv1beta1.ReasonHashMismatch, Message: msg}
	if !verdict.HasCondition(c, etcdv1beta1.ConditionDataInconsistent, metav1.ConditionTrue, msg) {
		r.event(c, corev1.EventTypeWarning, etcdv1beta1.ReasonHashMismatch, "CheckConsistency", "%s", msg)
	}
	return nil, r.recordDiverged(ctx, s, v.Diverged)
}

// inconclusive records a comparison that could not conclude (why: a member did not answer, or a
// compaction came between the members' hashes), at now, and logs it. One that ran out of time
// (timedOut: a store too large to hash within hashKVTimeout) counts as a comparison of members, the
// members running now: it is tried again at the interval, not every minute. Any other is recorded as
// covering no member, so that the members count as changed and it is tried again after
// restartedCheckInterval.
func (r *EtcdClusterReconciler) inconclusive(ctx context.Context, s *scope, now time.Time, members string, timedOut bool, why string) {
	covered, next := "", "in about "+restartedCheckInterval.String()
	if timedOut {
		covered, next = members, "at the next interval (a member took longer than "+hashKVTimeout.String()+" to hash its store)"
	}
	r.consistency.Done(string(s.cluster.UID), now, covered)
	log.FromContext(ctx).Info("The members' hashes could not be compared; trying again "+next, "why", why)
}

// consistencyDue says when the members' hashes are to be compared, at now: 0 when they are, -1 when
// not, and how long until they are when only the spacing of restartedCheckInterval holds them back. They
// are compared when the comparison has not run since the operator started (ran false) or last ran
// interval or more before now; and when the members changed since it last ran (changed: a member's etcd
// started, or a member joined or left) and it last ran restartedCheckInterval or more before now. A
// member whose etcd starts comes back on data that may have changed while it was down (a disk that
// returned other bytes, a file edited or copied by hand) and serves it at once: it is compared within
// about a minute, rather than at the next interval (10 minutes by default).
func consistencyDue(last time.Time, ran bool, interval time.Duration, changed bool, now time.Time) time.Duration {
	switch {
	case !ran || now.Sub(last) >= interval:
		return 0
	case changed:
		return max(0, restartedCheckInterval-now.Sub(last))
	}
	return -1
}

// runningMembers says which members etcd lists and which etcd container each runs: "name=container
// ID" sorted and joined by commas (a member without a running container has an empty ID). It differs
// from one pass to another when a member's etcd starts again (a new container ID), or a member joins or
// leaves, whatever the clocks of the nodes say.
func runningMembers(m *model.Cluster) string {
	parts := make([]string, 0, len(m.Members))
	for _, mem := range m.Listed() {
		parts = append(parts, mem.Name+"="+mem.EtcdContainerID())
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
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
