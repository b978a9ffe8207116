package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/kube"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/rollout"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups="",resources=resourcequotas;limitranges,verbs=list

// reconcileRollout rolls member pods that were built from an older spec, one member per pass, once
// membership is settled: followers first, then the leader after moving leadership away. A restart
// deletes the pod; recreateMembers recreates it on its data volume with the current spec in the next
// pass, and the next member goes only when every member is ready and healthy again. While a member's
// pod is rolled back from the current spec (model.Cluster.Rollback), it restarts none (the spec did
// not run), and leaves its RolloutFailed step for later in the pass (scope.rolloutFailed).
func (r *EtcdClusterReconciler) reconcileRollout(ctx context.Context, s *scope) (*verdict.Step, error) {
	if !s.m.Answered() {
		return nil, nil // a rollout needs an answering cluster; membership went first
	}
	c := s.cluster
	hash := r.Options.SpecHash(s.cluster)
	if rolledBack(s, hash) {
		return nil, nil
	}
	a := rollout.Next(s.m.Rollout(hash))
	logger := log.FromContext(ctx).WithValues("etcdcluster", klog.KObj(c), "member", a.Member)
	switch a.Kind {
	case rollout.None:
		return nil, nil
	case rollout.Wait:
		logger.V(1).Info("Rollout paused", "reason", a.Reason)
		return verdict.Acting(etcdv1beta1.ReasonRolloutPaused, a.Reason), nil
	case rollout.AwaitMember:
		return verdict.Acting(etcdv1beta1.ReasonRollingUpdate, "Rolling update: "+a.Reason), nil
	case rollout.MoveLeader:
		logger.Info("Rollout", "action", a.Kind, "to", a.Target, "reason", a.Reason)
		return r.moveLeader(ctx, s, a)
	case rollout.Restart:
		if verdict.RestartLosesData(c) {
			return r.pauseRollout(c, verdict.Blocked(etcdv1beta1.ReasonRolloutPaused, fmt.Sprintf(
				"Not restarting %s: it is the only member and runs on emptyDir, so a restart deletes the cluster's only copy of its data; scale to 3 members first (the new members copy the data), or restore a backup into a new EtcdCluster", a.Member))), nil
		}
		if mem := s.m.Member(a.Member); mem != nil && mem.ClaimDeletedUnderPod() && verdict.SoleMember(s.m) {
			return r.pauseRollout(c, verdict.Blocked(etcdv1beta1.ReasonRolloutPaused, fmt.Sprintf(
				"Not restarting %s: it is the only member and its claim %s is being deleted, so a restart deletes the cluster's only copy of its data; take a backup, or scale to 3 members (the new members copy its data, then it is replaced)", a.Member, mem.Claim.Name))), nil
		}
		if refused, err := r.restartRefused(ctx, s, hash, s.m.Member(a.Member)); err != nil || refused != "" {
			if refused == "" {
				return nil, err
			}
			// a policy relaxed, a quota raised or a service account created brings no event: look again soon
			st := verdict.Blocked(etcdv1beta1.ReasonRolloutPaused, fmt.Sprintf("Not restarting %s: %s. No member was restarted for it", a.Member, refused))
			st.After = verdict.RequeueRefused
			return r.pauseRollout(c, st), nil
		}
		logger.Info("Rollout", "action", a.Kind, "reason", a.Reason)
		image := imageChange(s.m.Member(a.Member).Image(), r.Options.Image(c))
		if err := r.recordRolledOnto(ctx, s.m, s.m.Member(a.Member), hash); err != nil {
			return nil, err
		}
		if refused, err := r.restartMember(ctx, c, s.m.Member(a.Member)); err != nil {
			return nil, err
		} else if refused != "" {
			why := "another member is down or being disrupted"
			if allServingReady(s.m) {
				// the disruption controller counts a pod healthy a moment after it turns Ready
				why = "every member serves and is Ready: the budget's status lags behind them (the disruption controller updates it within seconds)"
			}
			return verdict.Acting(etcdv1beta1.ReasonRolloutPaused, fmt.Sprintf(
				"Waiting to restart %s: the PodDisruptionBudget refuses its eviction (%s); %s", a.Member, refused, why)), nil
		}
		r.eventAbout(c, memberRef(c, a.Member), corev1.EventTypeNormal, "UpdatingMember", "Restart", "Restarting member %s with the current spec (%s): %s", a.Member, image, a.Reason)
		return verdict.Acting(etcdv1beta1.ReasonRollingUpdate, fmt.Sprintf("Restarting %s with the current spec: %s", a.Member, a.Reason)), nil
	}
	return nil, nil
}

// rolledBack reports whether a member's pod was rolled back from the spec of hash
// (model.Cluster.Rollback), and then leaves the RolloutFailed step for the end of the pass
// (scope.rolloutFailed) unless the membership planner left one there (a member it would add says more):
// the pass goes on to a NOSPACE alarm and a replacement requested by annotation, and stops before the
// phases that expect every member on the current spec (see reconcilePhases).
func rolledBack(s *scope, hash string) bool {
	rb := s.m.Rollback(hash)
	if rb == nil {
		return false
	}
	if s.rolloutFailed == nil {
		s.rolloutFailed = verdict.RolloutFailed(s.m, rb)
	}
	return true
}

// pauseRollout returns st, the step of a rollout that will not restart its next member until the user
// acts, after recording a Warning event RolloutPaused with its message when the pause begins or its
// message changes (the Progressing condition the last pass recorded says otherwise): an alert on
// events sees it without polling the status, and a pause that lasts adds no event per pass.
func (r *EtcdClusterReconciler) pauseRollout(c *etcdv1beta1.EtcdCluster, st *verdict.Step) *verdict.Step {
	if p := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionProgressing); p == nil || p.Reason != st.Reason || p.Message != st.Message {
		r.event(c, corev1.EventTypeWarning, st.Reason, "Restart", "%s", st.Message)
	}
	return st
}

// restartRefused says why the rollout must not restart m, a member about to be restarted onto the
// spec of hash ("" when it may), so that it never takes down a member it cannot bring back:
//   - the API server would refuse the pod the current spec makes for m, as a dry run of its creation
//     finds (kube.CheckPod): an invalid pod (requests above limits, a toleration's unknown operator),
//     one that admission refuses (a policy), or one that names a service account or priority class
//     that does not exist. A ResourceQuota's refusal of the dry run does not count, as the dry run's
//     pod is counted beside the old one, which the restart deletes first; nor does a dry run that
//     could not tell (a pod webhook without dry-run support): the rollout goes on as before there
//     was a check.
//   - a ResourceQuota has no room for the pods of m and of every other member still to roll, each
//     made after its old pod is deleted (kube.QuotaShortfall): a spec that asks for more cpu or
//     memory than the quota has left is found out before the first restart, not at the last one.
//
// Other errors are returned.
func (r *EtcdClusterReconciler) restartRefused(ctx context.Context, s *scope, hash string, m *model.Member) (string, error) {
	if m == nil {
		return "", nil
	}
	check, err := kube.CheckPod(ctx, r.Client, r.memberPod(s, m.StartedAs()))
	switch {
	case err != nil:
		return "", fmt.Errorf("create pod %s (dry run, before restarting it): %w", m.Name, err)
	case check.Refused != "" || (check.NotNow != "" && !check.Quota): // one or the other is set
		return fmt.Sprintf("the API server refuses the pod the current spec makes for it (%s); %s, and the rollout goes on", check.Refused+check.NotNow, fixRefusedPod), nil
	}
	var steps []kube.PodReplacement
	for _, mem := range s.m.Listed() {
		if mem.Pod != nil && !mem.PodTerminating() && !s.m.PodCurrent(mem, hash) {
			steps = append(steps, kube.PodReplacement{Old: mem.Pod, New: r.memberPod(s, mem.StartedAs())})
		}
	}
	short, err := kube.QuotaShortfall(ctx, r.uncached(), s.cluster.Namespace, steps)
	if err != nil {
		return "", fmt.Errorf("check the namespace's ResourceQuotas before restarting %s: %w", m.Name, err)
	}
	if short != "" {
		return fmt.Sprintf("%s; raise the quota, or lower spec.podTemplate.resources, and the rollout goes on (the quota is looked at again every %s)",
			short, verdict.RequeueRefused), nil
	}
	return "", nil
}

// allServingReady reports whether every member etcd lists serves and has a Ready pod.
func allServingReady(m *model.Cluster) bool {
	for _, mem := range m.Listed() {
		if !mem.Serving() || !mem.PodReady() {
			return false
		}
	}
	return true
}

// imageChange says what a restart does to a member's image, from the one its pod runs (old, "" when it
// has no pod) to the current spec's (cur): "image A → B", or "image B, unchanged" when the spec changed
// elsewhere (resources, flags, labels).
func imageChange(old, cur string) string {
	switch old {
	case "":
		return "image " + cur
	case cur:
		return "image " + cur + ", unchanged"
	}
	return "image " + old + " → " + cur
}

// moveLeader hands leadership from a.Member to a.Target before a step that takes the leader down, with
// an event that gives a.Reason.
func (r *EtcdClusterReconciler) moveLeader(ctx context.Context, s *scope, a rollout.Action) (*verdict.Step, error) {
	callCtx, cancel := context.WithTimeout(ctx, r.etcdTimeout())
	defer cancel()
	if err := s.etcdClient.MoveLeader(callCtx, a.TargetID); err != nil {
		return retryLater(s.cluster, "move_leader", err, fmt.Sprintf("move leadership from %s to %s", a.Member, a.Target))
	}
	metrics.CountMembership(s.cluster.Namespace, s.cluster.Name, "move_leader", nil, false)
	r.eventAbout(s.cluster, memberRef(s.cluster, a.Member), corev1.EventTypeNormal, "MovedLeader", "MoveLeader", "Moved leadership from %s to %s (ID %s): %s", a.Member, a.Target, etcd.FormatID(a.TargetID), a.Reason)
	return verdict.Acting(etcdv1beta1.ReasonMovingLeader, a.Reason), nil
}

// recordRolledOnto records on the claim of m, a member of c whose pod is about to be recreated with the
// spec of hash (by the rollout, or by the repair of a member down on an older spec), that it goes onto
// that spec (etcdv1beta1.AnnotationRolledOnto) when m serves, or when it is down on a spec no member has
// run (model.Cluster.DownOnUntriedSpec: the spec changed again before it ever served, and the record
// follows it onto the new one): if it is down on that spec while no other member serves on it, it is
// not replaced. With spec.recovery.rollBackFailedRollouts, a member that serves also gets the record of
// the spec hash of the pod it serves on (etcdv1beta1.AnnotationServedSpec), whose ControllerRevision
// it is rolled back to if it does not serve on the new spec (verdict.RollbackDue); one down on an
// untried spec keeps the record it has, and so does one down on a pod of the spec its claim records it
// served on (a change undone before it came back, and made again: the records follow it too). A
// member down for another reason gets no record (the spec is not why it is down), and a member without
// a claim (emptyDir) has nowhere to keep it. Nor does a member whose claim records the spec it served
// on while the spec of hash is rolled back (model.Cluster.Rollback): the repair of a member down
// meanwhile (a pod evicted, a crash loop on the spec it was rolled back to) makes its next pod from
// the spec it served on (verdict.SpecToRestore), never from the spec that did not run.
func (r *EtcdClusterReconciler) recordRolledOnto(ctx context.Context, c *model.Cluster, m *model.Member, hash string) error {
	if m == nil || !m.HasClaim() || (m.ServedSpec() != "" && c.Rollback(hash) != nil) {
		return nil
	}
	back := !m.Serving() && m.Pod != nil && m.ServedSpec() != "" && m.PodSpecHash() == m.ServedSpec()
	if !m.Serving() && !c.DownOnUntriedSpec(m) && !back {
		return nil
	}
	recordPod := c.Object.Spec.RollsBackFailedRollouts() && m.Serving() && m.Pod != nil && m.PodSpecHash() != hash
	// the pod about to go ran etcd on a spec no member has served on: no rollback to another minor
	ran := c.DownOnUntriedSpec(m) && !m.EtcdNeverRan() && m.Claim.Annotations[etcdv1beta1.AnnotationUntriedSpecRan] == ""
	if m.Claim.Annotations[etcdv1beta1.AnnotationRolledOnto] == hash && (!recordPod || m.ServedSpec() != "") && !ran {
		return nil
	}
	records := map[string]string{etcdv1beta1.AnnotationRolledOnto: hash}
	if recordPod {
		records[etcdv1beta1.AnnotationServedSpec] = m.PodSpecHash()
	}
	if ran {
		records[etcdv1beta1.AnnotationUntriedSpecRan] = "true"
	}
	if err := r.patchAnnotations(ctx, m.Claim, records); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("record on persistentvolumeclaim %s the spec its member is restarted onto: %w", m.Claim.Name, err)
	}
	return nil
}

// restartMember takes a member's pod down so that it is recreated on its claim with the current spec:
// through the Eviction API for a member of a multi-member cluster (kube.Evict says why the cluster's
// PodDisruptionBudget has no room); deleted when it is the only member (its restart is the downtime a
// single member always has) or its pod is not Ready (a member already down, such as one whose image
// cannot be pulled).
func (r *EtcdClusterReconciler) restartMember(ctx context.Context, c *etcdv1beta1.EtcdCluster, m *model.Member) (refused string, err error) {
	if m == nil || m.Pod == nil {
		return "", nil // gone meanwhile: it is recreated with the current spec
	}
	refused, err = kube.Evict(ctx, r.Client, m.Pod, c.Name, c.Spec.ReplicasOrDefault() == 1 || !m.PodReady())
	if err != nil {
		return "", fmt.Errorf("restart member %s: %w", m.Name, err)
	}
	return refused, nil
}
