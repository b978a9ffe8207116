package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/rollout"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// The requests of the annotations AnnotationDefragment, AnnotationMoveLeader and
// AnnotationReplaceMember. refuseRequests removes, early in a pass, those that can never be carried
// out; the others wait, annotation kept, until the phase that carries them out runs on a cluster fit
// for them: reconcileReplaceRequest once no membership change, rollout or NOSPACE alarm is under way
// (its member may be down), reconcileMoveLeaderRequest and reconcileDefragRequest once every member is
// healthy and nothing else is under way. A request carried out is removed with an event. Nothing is
// done while the cluster is paused: holdPaused ends the pass before.

// refuseRequests removes the move-leader and replace-member requests that can never be carried out
// (verdict.RefuseMoveLeader, verdict.RefuseReplace), with a RequestRefused event each. It takes no
// step: the pass goes on.
func (r *EtcdClusterReconciler) refuseRequests(ctx context.Context, s *scope) (*verdict.Step, error) {
	if !s.m.Answered() {
		return nil, nil // whether a member is a learner is etcd's to say
	}
	for key, refuse := range map[string]func(*model.Cluster, string) string{
		etcdv1beta1.AnnotationMoveLeader:    verdict.RefuseMoveLeader,
		etcdv1beta1.AnnotationReplaceMember: verdict.RefuseReplace,
	} {
		name, ok := s.cluster.Annotations[key]
		if !ok {
			continue
		}
		if why := refuse(s.m, name); why != "" {
			if err := r.finishRequest(ctx, s.cluster, key); err != nil {
				return nil, err
			}
			r.event(s.cluster, corev1.EventTypeWarning, etcdv1beta1.ReasonRequestRefused, "Refuse", "Refused %s", why)
		}
	}
	return nil, nil
}

// finishRequest removes annotation key from cluster c, as long as it still has the value this pass
// read (a JSON patch that tests it first: a request made again meanwhile stays), and updates c's
// annotations and resourceVersion so that the pass's status patch applies. A request already gone,
// or changed meanwhile, is no error: the next pass sees what is there.
func (r *EtcdClusterReconciler) finishRequest(ctx context.Context, c *etcdv1beta1.EtcdCluster, key string) error {
	value, ok := c.Annotations[key]
	if !ok {
		return nil
	}
	path := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
	body, err := json.Marshal([]map[string]string{{"op": "test", "path": path, "value": value}, {"op": "remove", "path": path}})
	if err != nil {
		return err
	}
	patched := c.DeepCopy()
	err = r.Patch(ctx, patched, client.RawPatch(types.JSONPatchType, body))
	switch {
	case apierrors.IsInvalid(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		log.FromContext(ctx).Info("Request changed before it was removed", "etcdcluster", klog.KObj(c), "annotation", key, "error", err.Error())
	case err != nil:
		return fmt.Errorf("remove annotation %s: %w", key, err)
	default:
		c.ResourceVersion = patched.ResourceVersion
	}
	delete(c.Annotations, key)
	return nil
}

// reconcileReplaceRequest carries out AnnotationReplaceMember once verdict.ReplaceWait allows it:
// leadership first moves away from the member when it leads; then its claim and its pod are deleted,
// the claim first (kubernetes.io/pvc-protection keeps it until the pod is gone, so that no pass sees the
// pod gone and the claim kept, which would recreate the pod on it). The phases before this one then
// replace the member as they replace one whose data is gone: removed from etcd, added back as a new
// learner under a new member ID on an empty claim, promoted once it caught up. Under storage
// .retainPolicy Retain the claim is deleted too: the request asks for the member's data to go. Nothing
// is deleted unless the pass's copy of the cluster is the newest (latest).
func (r *EtcdClusterReconciler) reconcileReplaceRequest(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	name, ok := c.Annotations[etcdv1beta1.AnnotationReplaceMember]
	if !ok {
		return nil, nil
	}
	if why := verdict.ReplaceWait(s.m, name); why != "" {
		log.FromContext(ctx).V(1).Info("Replacement waits", "etcdcluster", klog.KObj(c), "member", name, "reason", why)
		return nil, nil
	}
	mem := s.m.Member(name)
	if mem == nil {
		return nil, nil // ReplaceWait holds while etcd does not list it
	}
	if st, err := r.dropMemberData(ctx, s, mem, fmt.Sprintf("%s is to be replaced (%s), and leads", name, etcdv1beta1.AnnotationReplaceMember)); err != nil || st != nil {
		return st, err
	}
	if err := r.finishRequest(ctx, c, etcdv1beta1.AnnotationReplaceMember); err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("Replacing member %s (ID %s) as %s asked: deleted its claim and pod; it is removed from etcd and a new member of that name joins with a new ID and copies the data from the leader",
		name, etcd.FormatID(mem.ID()), etcdv1beta1.AnnotationReplaceMember)
	r.eventAbout(c, memberRef(c, name), corev1.EventTypeNormal, etcdv1beta1.ReasonReplacingMember, "Replace", "%s", msg)
	return verdict.Acting(etcdv1beta1.ReasonReplacingMember, msg), nil
}

// reconcileMoveLeaderRequest carries out AnnotationMoveLeader on a settled cluster: etcd's MoveLeader
// to the member named, which returns once the member leads; then the annotation is removed with a
// MovedLeader event. A member that leads already needs no move.
func (r *EtcdClusterReconciler) reconcileMoveLeaderRequest(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	name, ok := c.Annotations[etcdv1beta1.AnnotationMoveLeader]
	if !ok || !s.m.Answered() {
		return nil, nil
	}
	target, leader := s.m.Member(name), s.m.Leader()
	if target == nil || !target.Voter() || !target.Healthy() || leader == nil {
		return nil, nil // not yet a healthy voter (refuseRequests removed what never will be), or no leader
	}
	var st *verdict.Step
	if leader != target {
		var err error
		st, err = r.moveLeader(ctx, s, rollout.Action{Member: leader.Name, ID: leader.ID(), Target: name, TargetID: target.ID(),
			Reason: fmt.Sprintf("%s asked for %s to lead", etcdv1beta1.AnnotationMoveLeader, name)})
		if err != nil || st.Reason != etcdv1beta1.ReasonMovingLeader {
			return st, err // not moved yet (retryLater)
		}
	} else {
		r.eventAbout(c, memberRef(c, name), corev1.EventTypeNormal, "MovedLeader", "MoveLeader", "%s (ID %s) leads already, as %s asked", name, etcd.FormatID(target.ID()), etcdv1beta1.AnnotationMoveLeader)
	}
	if err := r.finishRequest(ctx, c, etcdv1beta1.AnnotationMoveLeader); err != nil {
		return nil, err
	}
	return st, nil
}

// reconcileDefragRequest carries out AnnotationDefragment on a settled cluster: at a new request
// (a value status.maintenance.requestedDefragmentation does not record) every voter becomes pending;
// the pending members are defragmented one per pass, followers first, the leader last after
// leadership moved to a follower (defragmentOne). Once none is pending the annotation is removed with
// a Defragmented event. A request withdrawn (the annotation removed) is forgotten.
func (r *EtcdClusterReconciler) reconcileDefragRequest(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	token, ok := c.Annotations[etcdv1beta1.AnnotationDefragment]
	st := c.Status.Maintenance
	if !ok {
		if st != nil {
			st.RequestedDefragmentation = ""
		}
		return nil, nil
	}
	if !s.m.Answered() {
		return nil, nil
	}
	if st == nil {
		st = &etcdv1beta1.MaintenanceStatus{}
		c.Status.Maintenance = st
	}
	underway := st.RequestedDefragmentation == token
	if !underway {
		log.FromContext(ctx).Info("Defragmentation requested", "etcdcluster", klog.KObj(c), "request", token)
	}
	st.RequestedDefragmentation = token
	st.PendingDefragmentation = verdict.RequestedDefragmentation(s.m, st.PendingDefragmentation, underway)
	if len(st.PendingDefragmentation) > 0 {
		return r.defragmentOne(ctx, s, s.m.Member(st.PendingDefragmentation[0]), etcdv1beta1.AnnotationDefragment+" asked")
	}
	if err := r.finishRequest(ctx, c, etcdv1beta1.AnnotationDefragment); err != nil {
		return nil, err
	}
	st.RequestedDefragmentation = ""
	r.event(c, corev1.EventTypeNormal, "Defragmented", "Defragment", "Defragmented every voting member as %s=%s asked", etcdv1beta1.AnnotationDefragment, token)
	return nil, nil
}

// dropMemberData deletes the claim and then the pod of mem, a member to be replaced once verdict
// .ReplaceWait allows it, so that the phases before this one replace it as one whose data is gone:
// removed from etcd, added back as a new learner under a new member ID on an empty claim, promoted once
// it caught up. The claim goes first (kubernetes.io/pvc-protection keeps it until the pod is gone, so
// that no pass sees the pod gone and the claim kept, which would recreate the pod on it). When mem
// leads, leadership moves to a serving voter instead (the step returned, with lead as its reason),
// and the deletion waits for a later pass; nothing is deleted unless the pass's copy of the cluster
// is the newest (verdict.StaleCopy otherwise). A nil step means both are deleted.
func (r *EtcdClusterReconciler) dropMemberData(ctx context.Context, s *scope, mem *model.Member, lead string) (*verdict.Step, error) {
	if leader := s.m.Leader(); leader == mem {
		for _, f := range s.m.Listed() {
			if f != mem && f.Voter() && f.Serving() {
				return r.moveLeader(ctx, s, rollout.Action{Member: mem.Name, ID: mem.ID(), Target: f.Name, TargetID: f.ID(), Reason: lead})
			}
		}
	}
	// the member's data goes only on the newest cluster: a stale copy may show a request since withdrawn
	if ok, err := r.latest(ctx, s.cluster); err != nil || !ok {
		return verdict.StaleCopy(), err
	}
	if mem.Claim != nil && mem.Claim.DeletionTimestamp == nil {
		if err := r.Delete(ctx, mem.Claim, client.Preconditions{UID: &mem.Claim.UID}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete persistentvolumeclaim %s of %s, to be replaced: %w", mem.Claim.Name, mem.Name, err)
		}
	}
	if mem.Pod != nil {
		if err := r.Delete(ctx, mem.Pod, client.Preconditions{UID: &mem.Pod.UID}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete pod %s, to be replaced: %w", mem.Name, err)
		}
	}
	return nil, nil
}

// reconcileClaimDeleted replaces a member whose claim is being deleted while its pod runs on it (a
// `kubectl delete pvc` by mistake, a cleanup by label): kubernetes.io/pvc-protection keeps the claim
// until the pod is gone, so the member goes on serving, but its data goes the moment its pod stops,
// for whatever reason and at whatever time (a node drain, an eviction, a crash, perhaps while another
// member is down). The operator replaces it while that costs least: once verdict.ReplaceWait allows
// (every other member serving, no membership change or other long change under way), as a
// replace-member request does (dropMemberData), with a Warning event. A pod some other actor is
// already deleting (its deletion not yet in the cache) is left to it: the pod is read uncached first.
// Members on emptyDir have no claim. The only member of a cluster is never replaced (verdict
// .RefuseReplace: its data would go with its pod, with no other copy); a learner is removed at once,
// whatever else is under way (dropLearnerOfDeletedClaim). Which members are due is claimRepairDue.
// With spec.recovery.replaceUnhealthyMemberAfter 0s (never replace a member on its own) nothing is
// done: the member is replaced as one whose data is gone once its pod stops.
func (r *EtcdClusterReconciler) reconcileClaimDeleted(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	for _, mem := range s.m.Listed() {
		if !claimRepairDue(s, mem) {
			continue // no claim deleted under its pod, replacement off, or the only member (its pod keeps the only copy)
		}
		if mem.Learner() {
			// a learner's data is a copy of the voters' and it does not vote: removing it costs the
			// cluster nothing, whatever else is under way, and a new learner is added on a new claim (a
			// scale-up waiting for it goes on)
			return r.dropLearnerOfDeletedClaim(ctx, s, mem)
		}
		if why := verdict.ReplaceWait(s.m, mem.Name); why != "" {
			log.FromContext(ctx).V(1).Info("Replacement of a member whose claim is being deleted waits", "etcdcluster", klog.KObj(c), "member", mem.Name, "reason", why)
			continue
		}
		if r.APIReader != nil {
			pod := &corev1.Pod{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(mem.Pod), pod); err != nil || pod.DeletionTimestamp != nil || pod.UID != mem.Pod.UID {
				return nil, client.IgnoreNotFound(err) // going already: the next pass sees it
			}
		}
		since := mem.Claim.DeletionTimestamp.UTC().Format(time.RFC3339)
		if st, err := r.dropMemberData(ctx, s, mem, fmt.Sprintf("%s is to be replaced (its claim %s is being deleted), and leads", mem.Name, mem.Claim.Name)); err != nil || st != nil {
			return st, err
		}
		msg := fmt.Sprintf("Replacing member %s (ID %s): its claim %s was deleted at %s while the member ran on it (Kubernetes keeps the claim until the pod stops), and its data would go whenever its pod next stopped; "+
			"deleted its pod now, while every other member serves: it is removed from etcd and a new member of that name joins with a new ID on a new claim and copies the data from the leader",
			mem.Name, etcd.FormatID(mem.ID()), mem.Claim.Name, since)
		r.eventAbout(c, memberRef(c, mem.Name), corev1.EventTypeWarning, etcdv1beta1.ReasonReplacingMember, "Replace", "%s", msg)
		return verdict.Acting(etcdv1beta1.ReasonReplacingMember, msg), nil
	}
	return nil, nil
}

// claimRepairDue reports whether reconcileClaimDeleted is to act on mem, once the cluster lets it:
// its claim is being deleted while its pod runs, replacement is on (replaceUnhealthyMemberAfter above
// 0s), and it is a learner, or a voter that may be replaced (verdict.RefuseReplace: not the only
// member).
func claimRepairDue(s *scope, mem *model.Member) bool {
	return mem.ClaimDeletedUnderPod() && s.cluster.Spec.ReplaceAfter() > 0 &&
		(mem.Learner() || verdict.RefuseReplace(s.m, mem.Name) == "")
}

// dropLearnerOfDeletedClaim removes learner mem, whose claim is being deleted while its pod runs on
// it, from etcd and then deletes its pod (read uncached first: a deletion already under way is left
// alone), with a Warning ReplacingMember event. It is removed, not restarted under its member ID: the
// leader's record of what that ID has caught up would let it be promoted on empty data, a voter
// without the log it acknowledged. A learner does not vote, so its removal never costs quorum; the
// membership planner then adds a new learner of that name with a new ID on a new claim.
func (r *EtcdClusterReconciler) dropLearnerOfDeletedClaim(ctx context.Context, s *scope, mem *model.Member) (*verdict.Step, error) {
	pod := &corev1.Pod{}
	if err := r.uncached().Get(ctx, client.ObjectKeyFromObject(mem.Pod), pod); err != nil || pod.DeletionTimestamp != nil || pod.UID != mem.Pod.UID {
		return nil, client.IgnoreNotFound(err) // going already: the next pass sees it
	}
	callCtx, cancel := context.WithTimeout(ctx, r.etcdTimeout())
	defer cancel()
	if err := s.etcdClient.RemoveMember(callCtx, mem.ID()); err != nil {
		return retryLater(s.cluster, "remove", err, "remove learner "+mem.Name)
	}
	metrics.CountMembership(s.cluster.Namespace, s.cluster.Name, "remove", nil, false)
	if err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("delete pod %s of learner %s (removed from etcd; its claim is being deleted): %w", pod.Name, mem.Name, err)
	}
	msg := fmt.Sprintf("Replacing learner %s (ID %s): its claim %s was deleted at %s while the learner ran on it; removed it from etcd and deleted its pod (a learner's data is a copy of the voters'): a new learner of that name joins with a new ID on a new claim",
		mem.Name, etcd.FormatID(mem.ID()), mem.Claim.Name, mem.Claim.DeletionTimestamp.UTC().Format(time.RFC3339))
	r.eventAbout(s.cluster, memberRef(s.cluster, mem.Name), corev1.EventTypeWarning, etcdv1beta1.ReasonReplacingMember, "Replace", "%s", msg)
	return verdict.Acting(etcdv1beta1.ReasonReplacingMember, msg), nil
}
