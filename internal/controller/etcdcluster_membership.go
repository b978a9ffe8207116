package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/kube"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/metrics"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/observe"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/verdict"
)

// holdAddition reports whether a, the membership planner's next action, adds a member while no member
// can be added: the current spec is rolled back (model.Cluster.Rollback) and the spec the rolled-back
// member serves on, which new members are made from meanwhile (verdict.SpecToAdd), cannot be built
// again; a new member made from the current spec, which did not run, would never start, and be
// replaced again and again. The pass goes on (the rest of the cluster is served as usual), with a
// RolloutFailed step that says so (scope.rolloutFailed).
func (r *EtcdClusterReconciler) holdAddition(s *scope, a membership.Action) bool {
	if a.Kind != membership.AddLearner && a.Kind != membership.CreateAwaitingPod {
		return false
	}
	rb := s.m.Rollback(s.m.SpecHash)
	if spec, _ := verdict.SpecToAdd(s.m); rb == nil || spec != nil {
		return false
	}
	_, err := s.m.RevisionSpec(rb.ServedSpec, rb.Member)
	s.rolloutFailed = verdict.Blocked(etcdv1beta1.ReasonRolloutFailed, fmt.Sprintf(
		"Not adding %s (%s): %s was rolled back from the current spec, which did not run, and the spec it serves on cannot be built again for a new member (%v); fix the spec, and the member is added",
		a.Member, a.Reason, rb.Member, err))
	return true
}

// waitMembership is reconcileMembership's step for a, a Wait: stalled without quorum; the pod of the
// member a waits for made again when it awaits its add and was built from an older spec
// (verdict.AwaitingPodOutdated); else waiting, saying why.
func (r *EtcdClusterReconciler) waitMembership(ctx context.Context, s *scope, a membership.Action) (*verdict.Step, error) {
	if a.Member == "" { // quorum lost: nothing to do until it is back
		return verdict.Stalled(etcdv1beta1.ReasonQuorumLost, a.Reason), nil
	}
	if m := s.m.Member(a.Member); verdict.AwaitingPodOutdated(s.m, m) {
		return r.deleteAwaitingPod(ctx, s, m)
	}
	return verdict.Acting(etcdv1beta1.ReasonWaiting, a.Reason+r.claimHeldBy(ctx, s, a.Member)), nil
}

// deleteAwaitingPod deletes the pod of m, made before m was added to etcd from another spec than new
// members are made from now (verdict.AwaitingPodOutdated), so that the planner makes it again from that
// spec (newMemberPod).
func (r *EtcdClusterReconciler) deleteAwaitingPod(ctx context.Context, s *scope, m *model.Member) (*verdict.Step, error) {
	if err := r.Delete(ctx, m.Pod, client.Preconditions{UID: &m.Pod.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return nil, fmt.Errorf("delete pod %s, made before its member was added from another spec than new members are made from: %w", m.Name, err)
	}
	from := "the current spec"
	if _, hash := verdict.SpecToAdd(s.m); hash != s.m.SpecHash {
		if rb := s.m.Rollback(s.m.SpecHash); rb != nil {
			from = "the spec " + rb.Member + " serves on (hash " + hash + "), since the current spec was rolled back"
		} else if t := s.m.Trial(s.m.SpecHash); t != nil {
			from = "the spec " + t.Name + " served on (hash " + hash + "), since the rolling update is trying the current spec on it, which has not served on it yet"
		}
	}
	was := "hash " + m.PodSpecHash()
	if p := m.PodProblem(); p != "" {
		was += "; " + p
	}
	r.eventAbout(s.cluster, memberRef(s.cluster, m.Name), corev1.EventTypeNormal, "RecreatingMember", "Delete",
		"Deleted pod %s, made before its member was added from another spec (%s), to make it again from %s", m.Name, was, from)
	return verdict.Acting(etcdv1beta1.ReasonWaiting, "recreating the pod of "+m.Name+" from "+from+" before adding it to etcd"), nil
}

// reconcileMembership carries out the planner's next action.
func (r *EtcdClusterReconciler) reconcileMembership(ctx context.Context, s *scope) (*verdict.Step, error) {
	c := s.cluster
	if !s.m.Answered() {
		return nil, nil // a membership change needs a quorum that answers
	}
	a := membership.Next(s.m.Membership(verdict.Replacements(s.m)))
	logMembership(ctx, c, a)
	if r.holdAddition(s, a) {
		return nil, nil
	}
	callCtx, cancel := context.WithTimeout(ctx, r.etcdTimeout())
	defer cancel()
	cli := s.etcdClient
	switch a.Kind {
	case membership.None:
		return nil, nil
	case membership.Wait:
		return r.waitMembership(ctx, s, a)

	case membership.AddLearner:
		return r.addLearner(ctx, s, a)

	case membership.CreateAwaitingPod:
		return r.createAwaitingMember(ctx, s, a)

	case membership.CreatePod:
		if st, err := r.createJoiningMember(ctx, s, a.Member, s.m.Etcd.Members); err != nil || st != nil {
			return st, err
		}
		r.eventAbout(c, memberRef(c, a.Member), corev1.EventTypeNormal, "CreatedMember", "Create", "Created pod %s for the learner added earlier", a.Member)
		return verdict.Acting(etcdv1beta1.ReasonAddingMember, fmt.Sprintf("Created the pod of learner %s; waiting for it to catch up", a.Member)), nil

	case membership.Promote:
		if err := cli.PromoteLearner(callCtx, a.ID); err != nil {
			return retryLater(c, "promote", err, "promote learner "+a.Member)
		}
		metrics.CountMembership(c.Namespace, c.Name, "promote", nil, false)
		r.eventAbout(c, memberRef(c, a.Member), corev1.EventTypeNormal, "MemberPromoted", "Promote", "Promoted learner %s (ID %s) to a voting member", a.Member, etcd.FormatID(a.ID))
		return verdict.Acting(etcdv1beta1.ReasonPromotingLearner, fmt.Sprintf("Promoted %s to a voting member", a.Member)).Within(verdict.RequeueChanged), nil

	case membership.Remove:
		return r.removeMembers(ctx, s, a)

	case membership.DeleteResources:
		if err := r.deleteMemberResources(ctx, s, a.Member); err != nil {
			return nil, err
		}
		r.eventAbout(c, memberRef(c, a.Member), corev1.EventTypeNormal, "DeletedMemberResources", "Delete", "Deleted the pod and claim of %s: %s", a.Member, a.Reason)
		return verdict.Acting(etcdv1beta1.ReasonRemovingMember, fmt.Sprintf("Deleting the pod and claim of %s: %s", a.Member, a.Reason)), nil
	}
	return nil, nil
}

// logMembership logs the planner's action: at V(1) when it waits or has nothing to do, and for an
// AddLearner, which may wait for the member's pod over several passes and is logged once made (addLearner).
func logMembership(ctx context.Context, c *etcdv1beta1.EtcdCluster, a membership.Action) {
	logger := log.FromContext(ctx).WithValues("etcdcluster", klog.KObj(c), "member", a.Member)
	if a.Kind == membership.Wait || a.Kind == membership.None || a.Kind == membership.AddLearner {
		logger.V(1).Info("Membership", "action", a.Kind, "reason", a.Reason)
		return
	}
	logger.Info("Membership", "action", a.Kind, "reason", a.Reason)
}

// addLearner adds member a.Member as a learner and creates its claim and pod, unless a claim of that
// name holds a removed member's data (storage.retainPolicy Retain): then s says the user must delete it.
func (r *EtcdClusterReconciler) addLearner(ctx context.Context, s *scope, a membership.Action) (*verdict.Step, error) {
	c := s.cluster
	callCtx, cancel := context.WithTimeout(ctx, r.etcdTimeout())
	defer cancel()
	pvcName := resources.PVCName(a.Member)
	if have := s.m.Member(a.Member); have == nil || have.Claim == nil {
		existing := &corev1.PersistentVolumeClaim{}
		err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: pvcName}, existing)
		if err == nil {
			return verdict.Blocked(etcdv1beta1.ReasonWaiting, fmt.Sprintf(
				"Cannot add member %s: claim %s holds data of a removed member (storage.retainPolicy Retain); delete the claim to let the member be added", a.Member, pvcName)), nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get persistentvolumeclaim %s: %w", pvcName, err)
		}
	}
	peerURL := r.Options.PeerURLScheme(c, a.Member, s.m.NewMemberPeerHTTPS())
	waiting := s.m.Member(a.Member)
	if waiting != nil && (!waiting.HasPod() || !waiting.AwaitsAdd()) {
		waiting = nil
	}
	if waiting != nil {
		// the pod was created to wait for this add: its etcd joins with the flags it was given, which
		// must still be what etcd will list, and its name must resolve before the leader first dials it
		if st, err := r.checkAwaitingPod(ctx, s, waiting, peerURL); err != nil || st != nil {
			return st, err
		}
		if st, err := r.awaitPublished(ctx, s, waiting); err != nil || st != nil {
			return st, err
		}
	}
	leader, done := r.leaderClient(ctx, s)
	defer done()
	added, members, err := leader.AddLearner(callCtx, peerURL)
	if err != nil {
		return retryLater(c, "add_learner", err, "add member "+a.Member+" as a learner")
	}
	metrics.CountMembership(c.Namespace, c.Name, "add_learner", nil, false)
	log.FromContext(ctx).Info("Membership", "etcdcluster", klog.KObj(c), "member", a.Member, "action", a.Kind, "id", etcd.FormatID(added.ID), "reason", a.Reason)
	r.eventAbout(c, memberRef(c, a.Member), corev1.EventTypeNormal, "MemberAdded", "AddLearner", "Added member %s (ID %s) as a learner: %s", a.Member, etcd.FormatID(added.ID), a.Reason)
	if waiting != nil {
		return verdict.Acting(etcdv1beta1.ReasonAddingMember, fmt.Sprintf("Added %s as a learner; its pod starts etcd and catches up", a.Member)), nil
	}
	if st, err := r.createJoiningMember(ctx, s, a.Member, members); err != nil || st != nil {
		return st, err
	}
	return verdict.Acting(etcdv1beta1.ReasonAddingMember, fmt.Sprintf("Added %s as a learner; waiting for it to start and catch up", a.Member)), nil
}

// awaitingInitialCluster is the --initial-cluster of the last of names, members to be added in that
// order, each under peerURL's scheme: etcd's member list with them.
func (r *EtcdClusterReconciler) awaitingInitialCluster(s *scope, peerHTTPS bool, names ...string) string {
	members := slices.Clone(s.m.Etcd.Members)
	for _, n := range names {
		members = append(members, etcd.Member{Name: n, PeerURLs: []string{r.Options.PeerURLScheme(s.cluster, n, peerHTTPS)}})
	}
	return model.JoinInitialCluster(r.Options, s.cluster, members)
}

// checkAwaitingPod checks that the pod of m, created to wait for its add (createAwaitingMember), was
// given the peer URL and --initial-cluster etcd will list once m is added under peerURL: etcd refuses to
// join otherwise. A pod that was not (the members or the TLS scheme changed since) is deleted, its etcd
// never having run, and the next pass creates another; the step says so.
func (r *EtcdClusterReconciler) checkAwaitingPod(ctx context.Context, s *scope, m *model.Member, peerURL string) (*verdict.Step, error) {
	want := r.awaitingInitialCluster(s, s.m.NewMemberPeerHTTPS(), m.Name)
	if resources.PodFlag(m.Pod, "initial-cluster") == want && resources.PodFlag(m.Pod, "initial-advertise-peer-urls") == peerURL {
		return nil, nil
	}
	if err := r.Delete(ctx, m.Pod, client.Preconditions{UID: &m.Pod.UID}); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("delete pod %s: %w", m.Name, err)
	}
	if m.Claim != nil { // never used: its etcd never ran
		if err := r.Delete(ctx, m.Claim, client.Preconditions{UID: &m.Claim.UID}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete persistentvolumeclaim %s: %w", m.Claim.Name, err)
		}
	}
	msg := fmt.Sprintf("Deleted the waiting pod and claim of %s, created for a membership that has changed since; others are created", m.Name)
	r.eventAbout(s.cluster, memberRef(s.cluster, m.Name), corev1.EventTypeNormal, "DeletedMemberResources", "Delete", "%s", msg)
	return verdict.Acting(etcdv1beta1.ReasonAddingMember, msg), nil
}

// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list

// awaitPublished returns a step that waits while the peer Service's EndpointSlices do not list the pod
// of m under its name and address, and waits itself until publishSettle after a pass first saw them
// list it (at most that long; an error only when ctx ends): the cluster's DNS serves the member's name
// from them, and a name the leader looks up before it exists is answered "no such host" from the DNS
// server's negative cache for seconds afterwards (5 to 30 s with the usual CoreDNS settings), during
// which the new member cannot catch up. It reads the API server, not the cache: EndpointSlices are
// read only here.
func (r *EtcdClusterReconciler) awaitPublished(ctx context.Context, s *scope, m *model.Member) (*verdict.Step, error) {
	reader := r.uncached()
	list := &discoveryv1.EndpointSliceList{}
	if err := reader.List(ctx, list, client.InNamespace(s.cluster.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: resources.PeerServiceName(s.cluster)}); err != nil {
		return nil, fmt.Errorf("list the endpoint slices of Service %s: %w", resources.PeerServiceName(s.cluster), err)
	}
	for _, sl := range list.Items {
		for _, ep := range sl.Endpoints {
			if ep.Hostname == nil || *ep.Hostname != m.Name || !slices.Contains(ep.Addresses, m.Pod.Status.PodIP) {
				continue
			}
			// the DNS server learns of the address through its own watch of the same EndpointSlices; the
			// pass waits out the rest of publishSettle itself: another pass would observe every member
			// again first, which takes far longer while a member does not answer
			now := time.Now()
			if wait := publishSettle - now.Sub(r.published.since(string(m.Pod.UID)+"/"+m.Pod.Status.PodIP, now)); wait > 0 {
				t := time.NewTimer(wait)
				defer t.Stop()
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-t.C:
				}
			}
			return nil, nil
		}
	}
	return verdict.Acting(etcdv1beta1.ReasonWaiting, fmt.Sprintf("waiting for Service %s to publish the address of %s (its DNS name) before adding it to etcd",
		resources.PeerServiceName(s.cluster), m.Name)), nil
}

// publishSettle is how long after a pass first saw the peer Service's EndpointSlices list a pod's
// address its member is added to etcd at the earliest: the DNS server's own watch of them must have
// seen it too (it takes milliseconds), or the leader's first lookup caches "no such host".
const publishSettle = 300 * time.Millisecond

// firstSeen remembers when each key was first seen, for a while: an in-memory record that a restart
// of the operator forgets (the wait it times then starts again).
type firstSeen struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// firstSeenKept is how long firstSeen keeps a key: far longer than any wait it times.
const firstSeenKept = 10 * time.Minute

// since returns when key was first seen, recording now when it was not seen within firstSeenKept.
func (f *firstSeen) since(key string, now time.Time) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]time.Time{}
	}
	for k, t := range f.seen {
		if now.Sub(t) > firstSeenKept {
			delete(f.seen, k)
		}
	}
	t, ok := f.seen[key]
	if !ok {
		f.seen[key], t = now, now
	}
	return t
}

// createAwaitingMember creates a new claim and the pod of a.Member, a member still to be added, before
// it is added to etcd (membership.CreateAwaitingPod): its volume is provisioned and it gets its address,
// and so its DNS name, while an init container holds its etcd back until etcd lists it. Its
// --initial-cluster is etcd's member list now with the members to be added before it (a.Before) and
// itself; addLearner adds it only if that is what etcd lists then. A claim of that name that the pass did not see (a removed member's, kept by
// storage.retainPolicy Retain) blocks, as for addLearner.
func (r *EtcdClusterReconciler) createAwaitingMember(ctx context.Context, s *scope, a membership.Action) (*verdict.Step, error) {
	c := s.cluster
	reader := r.uncached() // what exists now: the caches of claims and pods are filled by separate watches
	existing := &corev1.PersistentVolumeClaim{}
	pvcName := resources.PVCName(a.Member)
	claimMade := false
	if err := reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: pvcName}, existing); err == nil {
		if !(&model.Member{Claim: existing}).AwaitingClaim() || existing.Annotations[etcdv1beta1.AnnotationClusterUID] != string(c.UID) {
			return verdict.Blocked(etcdv1beta1.ReasonWaiting, fmt.Sprintf(
				"Cannot add member %s: claim %s holds data of a removed member (storage.retainPolicy Retain); delete the claim to let the member be added", a.Member, pvcName)), nil
		}
		claimMade = true // made for this add by an earlier pass, its pod not made or gone since
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get persistentvolumeclaim %s: %w", pvcName, err)
	}
	if pod := (&corev1.Pod{}); reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: a.Member}, pod) == nil &&
		pod.DeletionTimestamp == nil && pod.Labels[etcdv1beta1.LabelCluster] == c.Name && (&model.Member{Pod: pod}).AwaitsAdd() {
		// made by an earlier pass and not yet in this pass's cache
		return verdict.Acting(etcdv1beta1.ReasonAddingMember, fmt.Sprintf("Created the pod of %s; it is added to etcd once it has its address", a.Member)), nil
	}
	m := resources.Member{Name: a.Member, InitialClusterState: resources.StateExisting,
		InitialCluster: r.awaitingInitialCluster(s, s.m.NewMemberPeerHTTPS(), append(slices.Clone(a.Before), a.Member)...), AwaitAdd: true}
	for _, em := range s.m.Etcd.Members {
		m.AwaitPeers = append(m.AwaitPeers, em.PeerURLs...)
	}
	// a pod that admission refuses (a ResourceQuota, a LimitRange, a policy) is found out first, by a dry
	// run, so that no claim is made for it: a claim left without its pod would be deleted as a stray and
	// made again, pass after pass
	if check, err := kube.CheckPod(ctx, r.Client, r.newMemberPod(s, m)); err != nil {
		return nil, fmt.Errorf("create pod %s (dry run): %w", a.Member, err)
	} else if !check.Accepted() {
		return podRefused(a.Member, ", to be added to etcd", check), nil
	}
	pvc := r.Options.BuildPVC(c, m)
	if claimMade {
		pvc = nil
	}
	if pvc != nil {
		if err := r.Create(ctx, pvc); err != nil {
			return nil, fmt.Errorf("create persistentvolumeclaim %s: %w", pvc.Name, err)
		}
	}
	st, err := r.createMemberPod(ctx, s, r.newMemberPod(s, m))
	if (err != nil || st != nil) && pvc != nil {
		// refused since the dry run: no claim is left without its pod
		_ = r.Delete(ctx, pvc)
	}
	if err != nil || st != nil { // a refusal since the dry run is createPod's step
		return st, err
	}
	r.eventAbout(c, memberRef(c, a.Member), corev1.EventTypeNormal, "CreatedMember", "Create", "Created pod %s before adding it to etcd: it waits until etcd lists it (%s)", a.Member, a.Reason)
	return verdict.Acting(etcdv1beta1.ReasonAddingMember, fmt.Sprintf("Created the pod of %s; it is added to etcd once it has its address", a.Member)), nil
}

// fixRefusedPod says what to do about a member pod the API server refuses, in the messages of
// podRefused and of the rollout's pause.
const fixRefusedPod = "fix spec.podTemplate, or what the API server names (a policy, a missing service account)"

// podRefused is the step when the API server refuses the pod of member (purpose says what for, such
// as ", to be added to etcd"; check says why: a ResourceQuota, a LimitRange, an admission policy, a
// missing service account, an invalid pod): retrying at once changes nothing, and a quota raised or
// freed, or a policy relaxed, brings no event the operator watches, so the pass looks again after
// verdict.RequeueRefused.
func podRefused(member, purpose string, check kube.PodCheck) *verdict.Step {
	if check.NamespaceTerminating {
		// final: Reconcile reports it as such (refusedAsTerminating)
		return verdict.Blocked(etcdv1beta1.ReasonNamespaceTerminating, fmt.Sprintf("Cannot create the pod of %s%s: %s", member, purpose, check.NotNow))
	}
	what := "it is created once that allows it (raise the quota, or lower spec.replicas or spec.podTemplate.resources)"
	if check.Refused != "" || !check.Quota {
		what = fixRefusedPod + ", and it is created"
	}
	st := verdict.Blocked(etcdv1beta1.ReasonWaiting, fmt.Sprintf("Cannot create the pod of %s%s: %s; %s",
		member, purpose, check.Refused+check.NotNow, what))
	st.After = verdict.RequeueRefused
	return st
}

// removeMembers removes member a.Member and, while the planner's next action on the member list
// without it is another removal (a scale-down by more than one member), that one too, in this pass:
// once etcd has removed a member, the member list without it is what the next pass would list. The
// pods of the members a scale-down removes are first taken out of the client Service
// (drainForRemoval), over a pass or more.
func (r *EtcdClusterReconciler) removeMembers(ctx context.Context, s *scope, a membership.Action) (*verdict.Step, error) {
	if st := r.drainForRemoval(ctx, s, membership.Removals(s.m.Membership(verdict.Replacements(s.m)), a)); st != nil {
		return st, nil
	}
	leader, done := r.leaderClient(ctx, s) // one dial for the chain: a scale-down never removes the leader
	defer done()
	for {
		st, removed, err := r.removeMember(ctx, s, leader, a)
		if err != nil || !removed {
			return st, err
		}
		s.forgetMember(a.ID)
		next := membership.Next(s.m.Membership(verdict.Replacements(s.m)))
		if next.Kind != membership.Remove {
			return st, nil
		}
		logMembership(ctx, s.cluster, next)
		a = next
	}
}

// removeMember removes member a.Member from etcd's membership, through leader (leaderClient), and
// reports whether it did; a change etcd cannot make yet (retryLater) is a step and no error. A call
// that failed although etcd made the removal (goneFromMembership) counts as made, with its event.
func (r *EtcdClusterReconciler) removeMember(ctx context.Context, s *scope, leader etcd.Client, a membership.Action) (*verdict.Step, bool, error) {
	callCtx, cancel := context.WithTimeout(ctx, r.etcdTimeout())
	defer cancel()
	if err := leader.RemoveMember(callCtx, a.ID); err != nil && (leader == s.etcdClient || !r.goneFromMembership(ctx, s, a.ID)) {
		st, err := retryLater(s.cluster, "remove", err, "remove member "+a.Member)
		return st, false, err
	}
	metrics.CountMembership(s.cluster.Namespace, s.cluster.Name, "remove", nil, false)
	// a replacement deletes the member's data next: a warning, where a scale-down's removal is normal
	kind := corev1.EventTypeNormal
	if a.Replacing {
		kind = corev1.EventTypeWarning
	}
	r.eventAbout(s.cluster, memberRef(s.cluster, a.Member), kind, "MemberRemoved", "Remove", "Removed member %s (ID %s): %s", a.Member, etcd.FormatID(a.ID), a.Reason)
	return verdict.Acting(etcdv1beta1.ReasonRemovingMember, fmt.Sprintf("Removed member %s (%s)", a.Member, a.Reason)), true, nil
}

// claimHeldAfter is how long a member's claim may be terminating before claimHeldBy looks for the pods
// that hold it: an ordinary deletion is over well before.
const claimHeldAfter = 10 * time.Second

// claimHeldBy says, for a pass that waits for the claim of member name to be deleted, which pods other
// than the member's own still use it ("; claim data-demo-1 is still used by pod …"), once the claim
// has been terminating for claimHeldAfter; "" otherwise. Kubernetes deletes a claim only once no pod
// uses it (the kubernetes.io/pvc-protection finalizer), a Completed pod included, so a pod a user ran
// on the claim (to look at or salvage the data) holds the replacement back until it is deleted. The
// operator's cache holds only its own pods: the namespace's pods are listed uncached.
func (r *EtcdClusterReconciler) claimHeldBy(ctx context.Context, s *scope, name string) string {
	m := s.m.Member(name)
	if m == nil || m.Claim == nil || m.Claim.DeletionTimestamp == nil || time.Since(m.Claim.DeletionTimestamp.Time) < claimHeldAfter || r.APIReader == nil {
		return ""
	}
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.InNamespace(m.Claim.Namespace)); err != nil {
		return ""
	}
	var users []string
	for _, p := range pods.Items {
		if m.Pod != nil && p.UID == m.Pod.UID {
			continue
		}
		if slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
			return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == m.Claim.Name
		}) {
			users = append(users, fmt.Sprintf("%s (%s)", p.Name, p.Status.Phase))
		}
	}
	if len(users) == 0 {
		return ""
	}
	return fmt.Sprintf("; claim %s is still used by pod %s: Kubernetes deletes a claim only once no pod uses it, a Completed one included: delete that pod",
		m.Claim.Name, strings.Join(users, ", "))
}

// goneFromMembership reports whether etcd no longer lists member id, asked through the pass's client,
// which reaches every member that runs. A removal made through the leader alone can fail although
// etcd made it: the leader that removes itself may answer "etcdserver: server stopped" once it has
// applied the removal, and cannot list the members after that (etcd.Client.RemoveMember looks only
// through its own endpoints).
func (r *EtcdClusterReconciler) goneFromMembership(ctx context.Context, s *scope, id uint64) bool {
	if s.etcdClient == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, r.etcdTimeout())
	defer cancel()
	_, members, err := s.etcdClient.MemberList(ctx)
	return err == nil && !slices.ContainsFunc(members, func(m etcd.Member) bool { return m.ID == id })
}

// forgetMember rebuilds the pass's model as if etcd had not listed member id: what the pass observed
// once etcd removed it. The other members' answers are this pass's.
func (s *scope) forgetMember(id uint64) {
	if s.in.Etcd == nil {
		return
	}
	e := *s.in.Etcd
	e.Members = slices.DeleteFunc(slices.Clone(e.Members), func(m etcd.Member) bool { return m.ID == id })
	e.Status, e.Health = maps.Clone(e.Status), maps.Clone(e.Health)
	delete(e.Status, id)
	delete(e.Health, id)
	s.in.Etcd = &e
	s.m = model.Build(s.in)
}

// leaderClient returns a client of the leader alone, for a member add or remove, and what closes it.
// etcd checks such a change against how long the member that takes the call has been connected to its
// peers (its strict reconfiguration check: at least 5 s, etcdserver.HealthInterval), so a member that
// joined or restarted moments ago refuses it ("unhealthy cluster"), and the pass's client, which
// balances its calls over every member, would hand the call to such a member now and then; the leader
// has been connected for longest. Without an agreed leader, or when it cannot be dialled, it returns
// the pass's client.
func (r *EtcdClusterReconciler) leaderClient(ctx context.Context, s *scope) (etcd.Client, func()) {
	ep := observe.MemberEndpoint(s.m, s.m.Leader())
	if ep == "" {
		return s.etcdClient, func() {}
	}
	cfg := s.etcdBase
	cfg.Endpoints, cfg.DialTimeout = []string{ep}, r.etcdTimeout()
	cli, err := r.EtcdClient(ctx, cfg)
	if err != nil {
		log.FromContext(ctx).V(1).Info("Dialling the leader alone failed; using every member", "endpoint", ep, "error", err.Error())
		return s.etcdClient, func() {}
	}
	return cli, func() { _ = cli.Close() }
}

// retryLater turns the errors etcd gives while a change cannot be made yet (a learner catching up, a
// member connected for less than 5 s, no leader) into progress to look at again soon: within
// verdict.RequeueRetry for the first two, which end at a moment no event tells; other errors are
// returned. The call is counted for cluster c.
func retryLater(c *etcdv1beta1.EtcdCluster, operation string, err error, what string) (*verdict.Step, error) {
	for _, transient := range []error{etcd.ErrLearnerNotReady, etcd.ErrUnhealthyCluster, etcd.ErrNoLeader, etcd.ErrTooManyLearners} {
		if errors.Is(err, transient) {
			metrics.CountMembership(c.Namespace, c.Name, operation, err, true)
			st := verdict.Acting(etcdv1beta1.ReasonWaiting, fmt.Sprintf("Cannot %s yet: %v", what, err))
			if errors.Is(err, etcd.ErrLearnerNotReady) || errors.Is(err, etcd.ErrUnhealthyCluster) {
				st = st.Within(verdict.RequeueRetry)
			}
			return st, nil
		}
	}
	metrics.CountMembership(c.Namespace, c.Name, operation, err, false)
	return nil, fmt.Errorf("%s: %w", what, err)
}

// createJoiningMember creates the pod of a member added to the running cluster (newMemberPod), and its
// claim unless it has one, with --initial-cluster-state=existing and every member etcd lists now in
// --initial-cluster (members, etcd's member list with the joining member): a learner that never started
// is given the current list, never a stale one (a member that has started ignores the flag: it restarts
// from its data).
func (r *EtcdClusterReconciler) createJoiningMember(ctx context.Context, s *scope, name string, members []etcd.Member) (*verdict.Step, error) {
	m := resources.Member{Name: name, InitialClusterState: resources.StateExisting,
		InitialCluster: model.JoinInitialCluster(r.Options, s.cluster, members)}
	if have := s.m.Member(name); have == nil || have.Claim == nil {
		if pvc := r.Options.BuildPVC(s.cluster, m); pvc != nil {
			// AlreadyExists included: a claim this pass did not see as ours is never used
			if err := r.Create(ctx, pvc); err != nil {
				return nil, fmt.Errorf("create persistentvolumeclaim %s: %w", pvc.Name, err)
			}
		}
	}
	return r.createMemberPod(ctx, s, r.newMemberPod(s, m))
}

// newMemberPod builds the pod of m, a member to be added or a learner that has not started, from the
// spec new members are made from (verdict.SpecToAdd): the current spec, or while it is rolled back the
// spec the rolled-back member serves on, or while the rolling update tries it on a member that has not
// served on it yet the spec that member served on. holdAddition adds no member when there is none.
func (r *EtcdClusterReconciler) newMemberPod(s *scope, m resources.Member) *corev1.Pod {
	spec, _ := verdict.SpecToAdd(s.m)
	if spec == nil {
		spec = s.cluster
	}
	return r.memberPodOf(s, spec, m)
}

// deleteMemberResources deletes the pod (one stuck terminating at once) and claim of a member no longer
// in etcd; under retainPolicy Retain the claim is released instead (labels and owner removed).
func (r *EtcdClusterReconciler) deleteMemberResources(ctx context.Context, s *scope, name string) error {
	m := s.m.Member(name)
	if m == nil {
		return nil
	}
	// the claim of a pod that waited for its add and never ran etcd holds no data: deleted even under
	// retainPolicy Retain, where a kept empty claim would block the next add of that name
	unused := m.AwaitsAdd() || !m.HasPod() && m.AwaitingClaim()
	if m.HasPod() || m.PodStuck(s.m.Now) {
		var opts []client.DeleteOption
		if m.PodTerminating() { // stuck: its kubelet will not finish the deletion
			opts = append(opts, client.GracePeriodSeconds(0), client.Preconditions{UID: &m.Pod.UID})
		}
		if err := r.Delete(ctx, m.Pod, opts...); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s: %w", name, err)
		}
	}
	if !m.HasClaim() {
		return nil
	}
	pvc := m.Claim
	if s.cluster.Spec.Storage.RetainPolicy == etcdv1beta1.RetainPolicyRetain && !unused {
		patch := client.MergeFrom(pvc.DeepCopy())
		delete(pvc.Labels, etcdv1beta1.LabelCluster)
		delete(pvc.Labels, etcdv1beta1.LabelMember)
		pvc.OwnerReferences = nil
		if err := r.Patch(ctx, pvc, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("release persistentvolumeclaim %s: %w", pvc.Name, err)
		}
		return nil
	}
	if err := r.Delete(ctx, pvc); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete persistentvolumeclaim %s: %w", pvc.Name, err)
	}
	return nil
}
