package verdict

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/etcd"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
)

// The repair of a member that is present but down (model.Member.Down: etcd lists it, it does not
// serve), counted from when it went down (model.Member.DownSince), per spec.recovery
// .replaceUnhealthyMemberAfter: after half of it the member's pod is deleted once and recreated with the
// current spec on its own data (a crash-loop back-off, an image or a flag the spec no longer has, a
// transient fault); after all of it the member is replaced, which the membership planner carries out
// (remove it, delete its pod and claim, add a new member that copies the data from its peers). Neither
// ever takes a healthy member down, and neither happens without a quorum of healthy voters without the
// member.

// RecreateDue reports whether mem's pod is due to be deleted so that it is recreated: mem has been down
// for c's RecreateAfter, its pod exists, is not being deleted, and was created before that point (each
// spell down recreates the pod at most once), its etcd container does not wait for its image (a new
// pod would wait for the same image, and start its pull over), it is not starting on a new pod that
// shows no problem (model.Member.Starting: a restart coming back, its init containers running, is
// given model.MemberStartGrace), it is not to be rolled back (rollbackAt:
// a pod of the same untried spec would not help, and the rollback comes at the end of the policy), and
// the healthy voters make a quorum without it. A
// learner's pod is not recreated this way (PodToRecreate restarts one built from an older member list
// or spec): it has no data of its own to keep, and its down clock starts anew with each pod (see
// model.Member.DownSince), so it is replaced once down for the whole policy.
func RecreateDue(c *model.Cluster, mem *model.Member) bool {
	if !mem.Down() || !mem.HasPod() || mem.Learner() || mem.WaitsForImage() || mem.Starting(c.Now) || c.HealthyVoters() < c.Quorum() || !rollbackAt(c, mem).IsZero() {
		return false
	}
	due := mem.DownSince.Add(c.Object.Spec.RecreateAfter())
	return !c.Now.Before(due) && mem.Pod.CreationTimestamp.Time.Before(due)
}

// PodToRecreate returns the event reason and why mem's pod is to be deleted so that it is recreated on
// its claim, or "" when it is not: a failed pod (evicted, or its node gone: restartPolicy Always
// restarts containers in place, never a failed pod); a learner that has not started and whose pod
// names other members in --initial-cluster than etcd lists now (members were replaced since it was
// added: etcd refuses to start it, "error validating peerURLs"), recreated with the current list, or
// whose pod was built from an older spec (a fix of a spec that could not run reaches it at once); a
// member whose pod of an older spec does not run etcd (OutdatedPodDown); or a member RecreateDue holds
// for. A member RollbackDue holds for comes first, with reason etcdv1beta1.ReasonRolloutFailed: its pod
// is to be recreated from the spec it last served on (SpecToRestore).
func PodToRecreate(c *model.Cluster, mem *model.Member, opts resources.Options) (reason, why string) {
	if why := RollbackDue(c, mem); why != "" {
		return etcdv1beta1.ReasonRolloutFailed, why
	}
	if hash := c.SpecHash; mem.HasPod() && mem.RolledBackFrom() == hash && mem.PodSpecHash() == hash && !mem.Serving() && SpecToRestore(c, mem) != nil {
		// recorded as rolled back, but the deletion of its pod failed
		return etcdv1beta1.ReasonRolloutFailed, "rolled back from the current spec, its pod still of that spec"
	}
	switch {
	case mem.HasPod() && mem.Pod.Status.Phase == corev1.PodFailed:
		return "DeletedFailedPod", "failed: " + mem.Pod.Status.Reason
	case mem.Learner() && !mem.Started() && mem.HasPod() &&
		mem.PodFlag("initial-cluster") != model.JoinInitialCluster(opts, c.Object, c.Etcd.Members):
		return "RestartingLearner", "a learner that has not started, with a member list that is no longer the cluster's"
	case mem.Learner() && !mem.Started() && mem.HasPod() && learnerPodOutdated(c, mem):
		return "RestartingLearner", "a learner that has not started, built from an older spec"
	case OutdatedPodDown(c, mem, opts):
		return "RecreatingMember", "built from an older spec, its etcd not running: " + mem.PodProblem()
	case RecreateDue(c, mem):
		return "RecreatingMember", fmt.Sprintf("down since %s: %s", mem.DownSince.UTC().Format(time.RFC3339), mem.Problem())
	}
	return "", ""
}

// learnerPodOutdated reports whether the pod of mem, a learner, was built from another spec than new
// members are made from now (SpecToAdd), or serves TLS otherwise than it is to; never while no member
// may be added (the current spec rolled back and the spec to add from gone): its pod would be made
// from the spec that did not run.
func learnerPodOutdated(c *model.Cluster, mem *model.Member) bool {
	spec, hash := SpecToAdd(c)
	return spec != nil && !c.PodCurrent(mem, hash)
}

// OutdatedPodDown reports whether mem's pod was built from an older spec (or TLS settings) than the
// current one and its etcd does not run for a reason the pod shows (a crash loop, an image that cannot
// be pulled, an unschedulable pod; model.Member.PodProblem), and its data is on a claim, whether or not
// etcd answers: recreating it with the current spec on its data takes down nothing that serves, and is
// how a fix of the spec reaches a member that the change took down. The rollout, which restarts one
// member at a time and only while etcd answers, cannot: when a spec that let each member start took
// several down later (a memory limit etcd outgrew), the cluster has no quorum and the members
// crash-loop on the old spec until their pods are recreated. An emptyDir member's data goes with its
// pod: it is left to the rollout, which takes one at a time. Not while the current spec is rolled back
// or on trial (model.Cluster.Trial): the pod would be made again from the spec it has, or one that ran
// (SpecToRestore), and go down the same way; the member is repaired as any other (RecreateDue,
// ReplaceDue) until the rollout tried the spec.
func OutdatedPodDown(c *model.Cluster, mem *model.Member, opts resources.Options) bool {
	return mem.HasPod() && mem.HasClaim() && !mem.Serving() && !mem.EtcdRunning() && mem.PodProblem() != "" &&
		!c.PodCurrent(mem, c.SpecHash) && c.Rollback(c.SpecHash) == nil && c.Trial(c.SpecHash) == nil
}

// BootstrapPodToRebuild returns why the pod of mem, an initial member of a cluster that has not formed
// yet, is to be deleted so that the bootstrap recreates it with the current spec, or "" when it is not:
// its pod was built from an older spec (its spec-hash annotation differs) and its etcd container does
// not run (it waits for an image that cannot be pulled, crash-loops on a flag, or has not started). A
// fix of a spec the first members could not run with (a spec.version without an image, say) then
// reaches them at once; their claims, and any data on them, are kept. A pod whose etcd runs is left to
// the rolling update once the cluster has formed. So is the pod, its etcd not running, of a member
// whose claim is gone or being deleted (deleted while the pod waited to be scheduled, which does not
// protect a claim): it could never start, and the bootstrap makes a new claim and pod.
func BootstrapPodToRebuild(c *model.Cluster, mem *model.Member, opts resources.Options) string {
	if !mem.HasPod() || mem.EtcdRunning() {
		return ""
	}
	if c.Object.Spec.Storage.EmptyDir == nil && !mem.HasClaim() {
		return "its claim is gone or being deleted, so it can never start"
	}
	if mem.PodSpecHash() == c.SpecHash {
		return ""
	}
	if p := mem.PodProblem(); p != "" {
		return "built from an older spec, its etcd not running: " + p
	}
	return "built from an older spec, its etcd not started yet"
}

// ReplaceDue returns why mem is due to be replaced, or "" when it is not: a member whose key-value
// hash the operator found to differ from the one a strict majority of the members share
// (model.Member.DataDiverged) is due at once, serving or not, unless replacing is off; a member etcd
// raised the CORRUPT alarm for is due at once, pod or not (nothing heals diverged data but a copy from its peers),
// and so is one whose pod found its data directory not its own (model.Member.DataNotOwn: data loss),
// and one whose etcd last failed because its data on disk cannot be read (model.Member.DataUnreadable:
// a database or WAL that fails its checks, which no restart heals) or its raft log lost entries it had
// acknowledged (model.Member.RaftLogLost: raft's "tocommit(N) is out of range") unless replacing is off or it is
// down on a spec no member has served on (a rollout's new spec may be what cannot read it);
// another member when replacing is on (ReplaceAfter > 0), it has been down that long, its pod exists
// and does not wait for its image (model.Member.WaitsForImage: one the kubelet cannot get or is still
// pulling; a replacement would wait for the same image; fixing the spec heals it), and it is not down
// on a spec no member has served on (model.Cluster.DownOnUntriedSpec: a rollout restarted it onto a
// spec that may be what keeps it down, and a replacement would be made from the same spec; fixing or
// undoing the change heals it), and it is not held by a rollback (rollbackHolds) (a member without a pod is recreated on its claim, or replaced at once
// when its data is gone; one whose pod cannot be created, held back by a quota, is not helped by a
// replacement). The quorum is the planner's to check: it removes nothing without one.
func ReplaceDue(c *model.Cluster, mem *model.Member) string {
	if msg := mem.DataDiverged(); msg != "" && c.Object.Spec.ReplaceAfter() > 0 && mem.Listed() {
		return "its data diverged from its peers' (" + msg + ")"
	}
	if !mem.Down() {
		return ""
	}
	if why := replaceAtOnce(c, mem); why != "" {
		return why
	}
	after := c.Object.Spec.ReplaceAfter()
	if after <= 0 || mem.Pod == nil || mem.WaitsForImage() || c.DownOnUntriedSpec(mem) || rollbackHolds(c, mem) != nil || c.Now.Before(replaceAt(c, mem)) {
		return ""
	}
	return fmt.Sprintf("it has been down since %s, longer than spec.recovery.replaceUnhealthyMemberAfter (%s)",
		mem.DownSince.UTC().Format(time.RFC3339), after)
}

// rollbackHolds returns the rollback from the current spec (model.Cluster.Rollback) when that keeps
// mem, a member that is down, from being replaced at the end of the replacement policy, nil when
// nothing does: no member can be added now (SpecToAdd: the spec the rolled-back member served on cannot
// be built again, and a new member made from the current spec would never start). The rolled-back
// member itself is replaced like any other: the revision of the spec that did not run keeps the record
// of the rollback when its claim goes (model.Cluster.Rollback), and its replacement is made from the
// spec it served on. A member whose data is lost or cannot be read is replaced at once all the same
// (replaceAtOnce).
func rollbackHolds(c *model.Cluster, mem *model.Member) *model.Rollback {
	rb := c.Rollback(c.SpecHash)
	if rb == nil || !addHeld(c) {
		return nil
	}
	return rb
}

// replaceAtOnce returns why mem, a member that is down, is due to be replaced at once, whatever the
// policy says, or "": its data is lost or cannot be read, and only a copy from its peers heals it (see
// ReplaceDue).
func replaceAtOnce(c *model.Cluster, mem *model.Member) string {
	if slices.Contains(c.Corrupt(), mem.ID()) {
		return "etcd raised the CORRUPT alarm for it: its data diverged from its peers'"
	}
	if msg := mem.DataNotOwn(); msg != "" {
		return "its data directory is not its own (" + msg + ")"
	}
	// the data is still there: with replacement turned off (0s), the user may want to salvage it
	if msg := mem.DataUnreadable(); msg != "" && c.Object.Spec.ReplaceAfter() > 0 && !c.DownOnUntriedSpec(mem) {
		return "etcd cannot read its data (" + msg + ")"
	}
	if msg := mem.RaftLogLost(); msg != "" && c.Object.Spec.ReplaceAfter() > 0 && !c.DownOnUntriedSpec(mem) {
		return "its raft log lost entries it had acknowledged (" + msg + ")"
	}
	return ""
}

// replaceAt returns when a member that is down is due to be replaced if it stays as it is at the
// pass: the end of spec.recovery.replaceUnhealthyMemberAfter from its DownSince (of a member without a
// pod, that alone), or later, when its pod is too new by then: a pod being deleted (a rollout or a repair recreates it: the new pod
// gets its chance) counts as new for RecreateAfter from its deletion (one stuck terminating longer, on
// a lost node say, no longer counts); a pod is new for RecreateAfter from its creation (a pod recreated
// with a spec fixed since, which the member had been down on, for one; a pod RecreateDue recreated at
// half of the policy reaches that age at its end), and for model.MemberStartGrace while the member is
// starting on it (model.Member.Starting: it shows no problem; with a short policy, a new pod whose
// volume the kubelet mounts on a retry, seconds later, is given that long).
func replaceAt(c *model.Cluster, mem *model.Member) time.Time {
	at := mem.DownSince.Add(c.Object.Spec.ReplaceAfter())
	wait := c.Object.Spec.RecreateAfter()
	p := mem.Pod
	var newUntil time.Time
	switch {
	case p == nil:
		return at
	case p.DeletionTimestamp != nil:
		newUntil = p.DeletionTimestamp.Add(wait)
	case mem.Starting(c.Now):
		newUntil = p.CreationTimestamp.Add(max(wait, model.MemberStartGrace))
	default:
		newUntil = p.CreationTimestamp.Add(wait)
	}
	if newUntil.After(at) {
		return newUntil
	}
	return at
}

// Replacements returns, by member name, why ReplaceDue holds for each member it holds for.
func Replacements(c *model.Cluster) map[string]string {
	out := map[string]string{}
	for _, mem := range c.Listed() {
		if why := ReplaceDue(c, mem); why != "" {
			out[mem.Name] = why
		}
	}
	return out
}

// ServedOnRolledSpec reports whether mem serves on the spec a rolling update restarted it onto (its
// claim's AnnotationRolledOnto is its pod's spec hash): the spec has run, and the record, which keeps a
// member down on an untried spec from being replaced (model.Cluster.DownOnUntriedSpec), is to be
// removed.
func ServedOnRolledSpec(mem *model.Member) bool {
	if !mem.Serving() || mem.Pod == nil || mem.Claim == nil {
		return false
	}
	rolled := mem.Claim.Annotations[etcdv1beta1.AnnotationRolledOnto]
	return rolled != "" && rolled == mem.PodSpecHash()
}

// ServedOnThirdSpec reports whether mem serves, on a pod not being deleted, on a spec that is neither
// the one a rolling update restarted it onto nor the one its claim records it served on before
// (AnnotationRolledOnto, AnnotationServedSpec): the spec changed again while it was down and its pod
// was made from the newer spec without the records following it (a pass that saw no quorum cannot tell
// it is down). It has served since, so the records are obsolete, and are to be removed: kept, a later
// change back to the spec it was restarted onto would find them current, and roll it back, if that
// spec did not run, to a spec it has not served on since (an older etcd minor, say). A member that
// serves on the pod it had before the restart (its claim records that spec) keeps them: the pass that
// recorded them deletes that pod next.
func ServedOnThirdSpec(mem *model.Member) bool {
	if !mem.Serving() || !mem.HasPod() || mem.Claim == nil {
		return false
	}
	rolled, served, hash := mem.Claim.Annotations[etcdv1beta1.AnnotationRolledOnto], mem.ServedSpec(), mem.PodSpecHash()
	return rolled != "" && served != "" && hash != "" && hash != rolled && hash != served
}

// rollbackAt returns when mem, a member down on a spec no member has served on
// (model.Cluster.DownOnUntriedSpec), is due to be rolled back to the spec it last served on if it
// stays as it is, zero when it is not to be: spec.recovery.rollBackFailedRollouts is off, the spec's
// etcd minor version is not the one the serving members run (sameMinor), or not the one of the spec it
// served on, and the member's etcd ran on
// its pod or on an earlier pod the operator recreated meanwhile (its claim's AnnotationUntriedSpecRan:
// an etcd of another minor may have written to its data; one that never ran, waiting for its image or
// not scheduled, did not), replacing is off
// (spec.recovery.replaceUnhealthyMemberAfter 0s: a person decides), its claim is being deleted (its
// data goes: it is replaced), or the spec it served on cannot be rebuilt (model.Cluster.ServedSpecOf:
// the rollout moved it onto the spec while it was already down, so its claim records none; the
// cluster keeps no ControllerRevision of that spec; or the TLS settings changed since). It is when a
// replacement would be due (replaceAt): the end of the policy from when the member went down, or
// later for a pod that is new.
func rollbackAt(c *model.Cluster, mem *model.Member) time.Time {
	if !c.Object.Spec.RollsBackFailedRollouts() || c.Object.Spec.ReplaceAfter() <= 0 || !c.DownOnUntriedSpec(mem) || !mem.HasClaim() ||
		mem.ServedSpec() == "" {
		return time.Time{}
	}
	served, err := c.ServedSpecOf(mem)
	if err != nil {
		return time.Time{}
	}
	// the spec it goes back to runs another minor than the one it was restarted onto (the spec changed
	// twice, 3.5 to 3.6 on the others, then again before its restart): the same as the others running
	// another minor
	across := !sameMinor(c) || minorOf(served.Spec.VersionOrDefault()) != minorOf(c.Object.Spec.VersionOrDefault())
	if across && (!mem.EtcdNeverRan() || mem.Claim.Annotations[etcdv1beta1.AnnotationUntriedSpecRan] != "") {
		return time.Time{}
	}
	return replaceAt(c, mem)
}

// minorOf returns the major.minor of an etcd version ("3.6.16" and "3.6.99" are "3.6").
func minorOf(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// sameMinor reports whether every member that serves runs the etcd minor version of the spec
// (etcd's status, "3.6.16" and spec.version "3.6.99" are the same minor), and one at least does.
func sameMinor(c *model.Cluster) bool {
	return serveMinor(c, minorOf(c.Object.Spec.VersionOrDefault()))
}

// serveMinor reports whether every member that serves runs the etcd minor version want ("3.6"), and
// one at least does.
func serveMinor(c *model.Cluster, want string) bool {
	n := 0
	for _, m := range c.Listed() {
		if !m.Serving() || m.Status == nil {
			continue
		}
		if minorOf(m.Status.Version) != want {
			return false
		}
		n++
	}
	return n > 0
}

// SpecToRestore returns the cluster to build mem's pod from instead of the current spec, nil when
// there is none, for mem, a registered member whose pod is gone and whose claim does not record a
// rollout's restart onto a spec (no AnnotationRolledOnto): the spec its claim records it served on
// (etcdv1beta1.AnnotationServedSpec), as the cluster's ControllerRevision of that spec keeps it
// (model.Cluster.ServedSpecOf), while
//   - a member's pod is rolled back from the current spec (model.Cluster.Rollback). The rolled-back
//     member's claim records it from the rollout's restart; every other member that serves on a pod of
//     an older spec gets its record while the rollback holds (ServedSpecToRecord), so that a member
//     whose pod goes meanwhile (a node drained) comes back as it served, not on the spec that did not
//     run;
//   - or the rolling update tries the current spec on another member, which has not served on it yet
//     (model.Cluster.Trial), and mem is not a learner (its pod is a new member's: SpecToAdd). Every
//     other member that serves on a pod of an older spec gets its record then too: a member whose pod is
//     lost meanwhile (deleted, its node gone) comes back as it served, not as a second member on a spec
//     nothing says runs (with the tried member down, one of three would serve: no quorum). A member
//     that serves on a pod of the current spec gets no record, and comes back on it.
func SpecToRestore(c *model.Cluster, mem *model.Member) *etcdv1beta1.EtcdCluster {
	if mem.Claim == nil || mem.ServedSpec() == "" || mem.Claim.Annotations[etcdv1beta1.AnnotationRolledOnto] != "" {
		return nil
	}
	if c.Rollback(c.SpecHash) == nil && (c.Trial(c.SpecHash) == nil || mem.Learner()) {
		return nil
	}
	spec, err := c.ServedSpecOf(mem)
	if err != nil {
		return nil
	}
	return spec
}

// TrialSpec returns, while the rolling update tries the current spec on a member that has not served
// on it yet (model.Cluster.Trial), the cluster to build other members' pods from instead, and its spec
// hash: the spec that member served on before its restart, as the ControllerRevision of that hash
// keeps it (model.Cluster.RevisionSpec), which ran. nil and "" when there is no trial, that spec
// cannot be built again (its revision is gone, or the TLS settings changed since), or the members that
// serve run another etcd minor than it (the spec changed again during a rollout): pods are made from
// the current spec then.
func TrialSpec(c *model.Cluster) (*etcdv1beta1.EtcdCluster, string) {
	t := c.Trial(c.SpecHash)
	if t == nil {
		return nil, ""
	}
	spec, err := c.RevisionSpec(t.ServedSpec(), t.Name)
	if err != nil || !serveMinor(c, minorOf(spec.Spec.VersionOrDefault())) {
		// a new member would run another minor than the members that serve (the spec changed twice)
		return nil, ""
	}
	return spec, t.ServedSpec()
}

// SpecToAdd returns the cluster a new member's pod is built from (a member to be added, a learner's pod
// made again), and the spec hash such a pod has: the current spec; or, while a member's pod is rolled
// back from it (model.Cluster.Rollback), the spec that member served on (its claim's
// AnnotationServedSpec, or the revision's record when that claim was lost, as the cluster's
// ControllerRevision of that hash keeps it; model.Cluster.RevisionSpec), which ran, so that a member
// lost meanwhile is replaced, and a scale-up goes on, without waiting for the spec to be fixed; or, while
// the rolling update tries the current spec on a member that has not served on it yet, the spec that
// member served on (TrialSpec), when it can be built. It returns nil and "" when the current spec is
// rolled back and that spec cannot be built again (its revision is gone, or the TLS settings changed
// since): no member is added until the spec changes.
func SpecToAdd(c *model.Cluster) (*etcdv1beta1.EtcdCluster, string) {
	rb := c.Rollback(c.SpecHash)
	if rb == nil {
		if spec, hash := TrialSpec(c); spec != nil {
			return spec, hash
		}
		return c.Object, c.SpecHash
	}
	spec, err := c.RevisionSpec(rb.ServedSpec, rb.Member)
	if err != nil {
		return nil, ""
	}
	return spec, rb.ServedSpec
}

// addHeld reports whether no member may be added now: the current spec is rolled back and the spec the
// rolled-back member served on cannot be built again (SpecToAdd).
func addHeld(c *model.Cluster) bool {
	spec, _ := SpecToAdd(c)
	return spec == nil
}

// PodSpecToKeep reports whether, before mem's pod is deleted to be recreated on its claim (PodToRecreate)
// while a member is rolled back from the current spec (model.Cluster.Rollback), its claim is to
// record the spec hash of that pod as the spec it served on (etcdv1beta1.AnnotationServedSpec), so that
// the pod is made again from that spec's revision (SpecToRestore), not from the spec that did not run:
// its claim records no served spec and no restart onto a spec, the pod was built from another spec
// than the current one, and a revision keeps that spec. A member that has not served since the
// rollback (added meanwhile and down before a pass recorded it, ServedSpecToRecord) has no record
// otherwise.
func PodSpecToKeep(c *model.Cluster, mem *model.Member) bool {
	return mem.HasClaim() && mem.HasPod() && mem.ServedSpec() == "" && mem.Claim.Annotations[etcdv1beta1.AnnotationRolledOnto] == "" &&
		mem.PodSpecHash() != "" && mem.PodSpecHash() != c.SpecHash && c.Revisions[mem.PodSpecHash()] != nil && c.Rollback(c.SpecHash) != nil
}

// UntriedSpecRanToRecord reports whether mem's claim is to record that etcd ran on a pod of the spec a
// rolling update restarted it onto, which no member has served on (model.Cluster.DownOnUntriedSpec):
// its etcd container ran or restarted on the pod it has (model.Member.EtcdNeverRan is false), and the
// claim does not record it yet (etcdv1beta1.AnnotationUntriedSpecRan). A later pod of that spec that
// never runs etcd (one not scheduled after an eviction) must not make the member look untouched by the
// newer etcd: a rollback to another minor needs its etcd never to have run (rollbackAt). Recorded when
// seen, whoever deletes the pod afterwards; the record goes with the rollout's (ClaimRecordsToDrop).
func UntriedSpecRanToRecord(c *model.Cluster, mem *model.Member) bool {
	return c.DownOnUntriedSpec(mem) && !mem.EtcdNeverRan() && mem.Claim.Annotations[etcdv1beta1.AnnotationUntriedSpecRan] == ""
}

// RollbackToRecord returns the record of the rollback from the current spec to write on mem's claim
// (etcdv1beta1.AnnotationRolledBackFrom, AnnotationRollbackReason, AnnotationServedSpec), nil when
// there is none to write: the claim the rolled-back member had was lost, and only the spec's
// ControllerRevision keeps the record (model.Rollback.Recorded is nil); mem has that member's name (its
// replacement), its own claim, and serves on a pod of the spec the record says it was rolled back to.
// The record is then on a claim again, where the user can remove it to have the rollout try the spec
// again, as before the loss; the revision's record follows the new claim (model.Cluster.RollbackMarkToWrite).
func RollbackToRecord(c *model.Cluster, mem *model.Member) map[string]string {
	rb := c.Rollback(c.SpecHash)
	if rb == nil || rb.Recorded != nil || rb.Member != mem.Name || rb.ServedSpec == "" || !mem.HasClaim() || !mem.HasPod() ||
		!mem.Serving() || mem.PodSpecHash() != rb.ServedSpec {
		return nil
	}
	return map[string]string{
		etcdv1beta1.AnnotationRolledBackFrom: c.SpecHash,
		etcdv1beta1.AnnotationRollbackReason: rb.Reason,
		etcdv1beta1.AnnotationServedSpec:     rb.ServedSpec,
	}
}

// ServedSpecToRecord reports whether the spec hash of the pod mem serves on is to be recorded on its
// claim (etcdv1beta1.AnnotationServedSpec; see SpecToRestore): a member's pod was rolled back from the
// current spec, or the rolling update tries it on a member that has not served on it yet
// (model.Cluster.Trial), and mem serves on a pod of an older spec, not being deleted, and its claim
// records none. ClaimRecordsToDrop removes the record once neither holds.
func ServedSpecToRecord(c *model.Cluster, mem *model.Member) bool {
	return mem.HasClaim() && mem.HasPod() && mem.Serving() && mem.ServedSpec() == "" && mem.PodSpecHash() != c.SpecHash &&
		(c.Rollback(c.SpecHash) != nil || c.Trial(c.SpecHash) != nil)
}

// RollbackDue returns why mem's pod is due to be rolled back, "" when it is not: a rolling update
// restarted mem, while it served, onto a spec no member has served on, and it has not served on it for
// spec.recovery.replaceUnhealthyMemberAfter (see rollbackAt), whatever keeps it down (an image that
// cannot be pulled or whose pull does not return, a crash loop, a pod that cannot be scheduled). Its pod
// is recreated, on its data, from the spec it served on (etcdv1beta1.AnnotationServedSpec, kept in a
// ControllerRevision), which ran; the member keeps its ID and data, and the rolling update restarts no member onto that spec
// until it changes. Neither needs a quorum: the member is down already.
func RollbackDue(c *model.Cluster, mem *model.Member) string {
	at := rollbackAt(c, mem)
	if at.IsZero() || c.Now.Before(at) {
		return ""
	}
	why := fmt.Sprintf("it has not served on the spec a rolling update restarted it onto (hash %s) since %s, longer than spec.recovery.replaceUnhealthyMemberAfter (%s), and no other member serves on that spec",
		mem.PodSpecHash(), mem.DownSince.UTC().Format(time.RFC3339), c.Object.Spec.ReplaceAfter())
	if p := mem.Problem(); p != "" {
		why += " (" + p + ")"
	}
	return why
}

// RolloutFailed returns the step of a rollout that restarts no member because of rb, a rollback from
// c's current spec (model.Cluster.Rollback): Blocked with reason RolloutFailed, saying why (the
// record's etcdv1beta1.AnnotationRollbackReason) and what to do: remove the record from the claim
// that has it, or, when that claim was lost, from the revision.
func RolloutFailed(c *model.Cluster, rb *model.Rollback) *Step {
	why := rb.Reason
	if why == "" {
		why = "it did not serve on it"
	}
	// scaled down to one member since the rollback: trying the spec again restarts the only member
	var alone string
	if c.Object.Spec.ReplicasOrDefault() == 1 {
		alone = " (with one member, the cluster is unavailable until it serves on it)"
	}
	if rb.Recorded == nil {
		return Blocked(etcdv1beta1.ReasonRolloutFailed, fmt.Sprintf(
			"Rolling update stopped: %s was rolled back to the pod it last served on, since %s; its claim, which recorded that, was lost, and the spec's revision keeps the record (a new member of that name gets it on its claim once it serves). No member is restarted onto this spec: fix the spec (or undo the change) and the rollout starts again; to try this same spec again%s, remove annotation %s from controllerrevision %s (a cluster administrator can)",
			rb.Member, why, alone, etcdv1beta1.AnnotationRolledBackClaim, resources.RevisionName(c.Object, c.SpecHash)))
	}
	return Blocked(etcdv1beta1.ReasonRolloutFailed, fmt.Sprintf(
		"Rolling update stopped: %s was rolled back to the pod it last served on, since %s. No member is restarted onto this spec: fix the spec (or undo the change) and the rollout starts again; to try this same spec again%s, remove annotation %s from persistentvolumeclaim %s",
		rb.Member, why, alone, etcdv1beta1.AnnotationRolledBackFrom, rb.Recorded.Claim.Name))
}

// ClaimRecordsToDrop returns the annotations of a rollout's records to remove from mem's claim, nil
// when none, hash being the current spec's: the record of the spec a rollout restarted mem onto and of
// the spec it served on before (etcdv1beta1.AnnotationRolledOnto, AnnotationServedSpec) once it serves
// on that spec (ServedOnRolledSpec) or on a third one (ServedOnThirdSpec); the record of a rollback (AnnotationRolledBackFrom,
// AnnotationRollbackReason) once the spec changed (and only then: neither turning
// spec.recovery.rollBackFailedRollouts off nor a revision deleted lets the rollout try the spec that
// did not run again); and the record of the spec a
// member served on once no rollback holds, the rollout tries no spec (model.Cluster.Trial), and no rollout restarts it (it would be out of date by the
// next one).
func ClaimRecordsToDrop(c *model.Cluster, mem *model.Member, hash string) []string {
	if mem.Claim == nil {
		return nil
	}
	var out []string
	rolledOnto := mem.Claim.Annotations[etcdv1beta1.AnnotationRolledOnto]
	if ServedOnRolledSpec(mem) || ServedOnThirdSpec(mem) {
		out = append(out, etcdv1beta1.AnnotationRolledOnto, etcdv1beta1.AnnotationServedSpec)
		rolledOnto = ""
	}
	if _, ok := mem.Claim.Annotations[etcdv1beta1.AnnotationUntriedSpecRan]; ok && rolledOnto == "" {
		out = append(out, etcdv1beta1.AnnotationUntriedSpecRan)
	}
	from := mem.RolledBackFrom()
	if from != "" && from != hash {
		out = append(out, etcdv1beta1.AnnotationRolledBackFrom, etcdv1beta1.AnnotationRollbackReason)
		from = ""
	} else if _, ok := mem.Claim.Annotations[etcdv1beta1.AnnotationRollbackReason]; ok && from == "" {
		out = append(out, etcdv1beta1.AnnotationRollbackReason) // the user removed the record of the rollback
	}
	if mem.ServedSpec() != "" && rolledOnto == "" && from == "" && !slices.Contains(out, etcdv1beta1.AnnotationServedSpec) {
		if rb := c.Rollback(hash); (rb == nil && c.Trial(hash) == nil) || (rb != nil && rb.Recorded == mem && slices.Contains(out, etcdv1beta1.AnnotationRolledBackFrom)) {
			out = append(out, etcdv1beta1.AnnotationServedSpec)
		}
	}
	return out
}

// AwaitingPodOutdated reports whether the pod of mem, made before its member is added to etcd (it
// awaits the add; model.Member.AwaitsAdd), is to be deleted so that it is made again from the spec new
// members are made from (SpecToAdd: the current spec, or while it is rolled back the spec the rolled-back
// member served on): it was built from another spec, it does not run etcd, it is not being deleted, and
// that spec can be built (no member is added otherwise). Such a pod holds no data. Without this a pod
// made from a spec that cannot run (a node selector no node matches) waits after the fix, and one made
// from a spec that was then rolled back is added and never starts.
func AwaitingPodOutdated(c *model.Cluster, mem *model.Member) bool {
	spec, hash := SpecToAdd(c)
	return mem != nil && mem.HasPod() && mem.AwaitsAdd() && !mem.Listed() && mem.Pod.DeletionTimestamp == nil && !mem.EtcdRunning() &&
		spec != nil && mem.PodSpecHash() != hash
}

// RevisionsToDelete returns the spec hashes of c's ControllerRevisions that nothing may be rolled back
// to any more, sorted: those of no spec that a member's claim records (etcdv1beta1.AnnotationServedSpec)
// and, with spec.recovery.rollBackFailedRollouts, that the current spec or a member's pod has (so that
// turning the field off and on again during a rollout keeps what a rollback needs); the current spec's
// is kept too while a rollback from it holds (its revision keeps a copy of the record:
// model.Cluster.Rollback).
func RevisionsToDelete(c *model.Cluster) []string {
	keep := map[string]bool{}
	for _, m := range c.Members {
		keep[m.ServedSpec()] = true
		if m.Pod != nil && c.Object.Spec.RollsBackFailedRollouts() {
			keep[m.PodSpecHash()] = true
		}
	}
	// a rollback from the current spec keeps its revision's record of it (model.Cluster.Rollback), even
	// with rollbacks turned off since
	rb := c.Rollback(c.SpecHash)
	keep[c.SpecHash] = c.Object.Spec.RollsBackFailedRollouts() || rb != nil
	if rb != nil {
		keep[rb.ServedSpec] = true // new members are made from it, whichever claims are left
	}
	var out []string
	for hash := range c.Revisions {
		if !keep[hash] {
			out = append(out, hash)
		}
	}
	sort.Strings(out)
	return out
}

// CorruptToDisarm returns the member IDs of the CORRUPT alarms that etcd keeps for members it no longer
// lists: once the member is replaced the alarm only keeps the cluster refusing writes.
func CorruptToDisarm(c *model.Cluster) []uint64 {
	var out []uint64
	for _, id := range c.Corrupt() {
		if !slices.ContainsFunc(c.Listed(), func(m *model.Member) bool { return m.ID() == id }) {
			out = append(out, id)
		}
	}
	return out
}

// ClaimIdentity returns the annotations to add to mem's claim to record the member and cluster ID the
// member has (etcdv1beta1.AnnotationMemberID and AnnotationClusterID), nil when there is nothing to
// add: etcd did not answer, the member has not started, or the claim already records an identity (the
// first one stays: a claim is never reassigned).
func ClaimIdentity(c *model.Cluster, mem *model.Member) map[string]string {
	if !c.Answered() || !mem.Started() || mem.Claim == nil || mem.Claim.Annotations[etcdv1beta1.AnnotationMemberID] != "" {
		return nil
	}
	return map[string]string{
		etcdv1beta1.AnnotationMemberID:  etcd.FormatID(mem.ID()),
		etcdv1beta1.AnnotationClusterID: etcd.FormatID(c.Etcd.ClusterID),
	}
}

// untriedSpecNote says what happens to a member down on a spec no member has served on
// (model.Cluster.DownOnUntriedSpec), and what to do.
const untriedSpecNote = "not replaced: a rolling update restarted it onto a spec no member has run, which may be what keeps it down, and a new member would be made from the same spec; " +
	"if the change of the spec is the cause (an etcd flag value, a memory limit, a node selector), fix or undo it and the member is recreated on its data; " +
	"if the spec is right, delete the member's claim and then its pod, and it is replaced with a copy of its peers' data"

// heldByRollbackNote says why a member that is down is not replaced while member rolledBack's pod is
// rolled back from the current spec and the spec it served on cannot be built again (rollbackHolds),
// and what to do.
func heldByRollbackNote(rolledBack string) string {
	return "not replaced while " + rolledBack + " is rolled back from the current spec: the spec it serves on cannot be built again (its ControllerRevision is gone, or the TLS settings changed), " +
		"so a new member would be made from the current spec, and is added only once it changes; fix the spec"
}

// rollbackNote says what happens to a member that a rolling update restarted onto a spec no member has
// served on, and that is rolled back at note.rollbackAt unless it serves (rollbackAt).
func rollbackNote(note memberNote) string {
	at := note.rollbackAt.UTC().Format(time.RFC3339)
	if note.state == memberStarting {
		// a member starting on its new pod shows no problem: it may well come up
		return "the first member on this spec: if it does not serve by " + at + ", it is rolled back to the pod it last served on, and the rolling update stops"
	}
	return "a rolling update restarted it onto a spec no member has run: unless it serves, it is rolled back at " + at +
		" to the pod it last served on (on its data), and the rolling update stops; it is not replaced, as a new member would be made from the same spec"
}

// downSummary says, for the Degraded condition, which members are down, since when, why, and what the
// operator will do about each: "demo-2 is down since 2026-12-01T15:20:01Z (etcd container
// CrashLoopBackOff (last exit code 2, Error)); replaced at 2026-12-01T15:25:01Z unless it recovers"
// (of a learner: "is joining as a learner, not serving yet, since …; replaced at … unless it serves");
// without a quorum (quorate false), that nothing is replaced; while the cluster is paused, that nothing
// is done. Of a voter starting on a new pod (notes[name].state is memberStarting, model.Member.Starting:
// a restart or a promotion coming back), that it is starting, with the same countdown; of one that a
// rolling update restarts onto the current spec (notes[name].rolling), that it is restarting onto it,
// with the same countdown, whether its old pod is still terminating or its new pod starting; of one on
// emptyDir whose pod of an older spec is stopping (notes[name].rollingReplace), that it is being
// replaced by a member of the current spec, with no countdown. Of a voter in
// joining (notes[name].state is memberJoining, model.Member.Joining: just promoted, its etcd started
// seconds ago and not serving yet), that it joined and when it serves at the latest, with no
// replacement countdown. Of a member down on a spec no member has served on
// (notes[name].untriedSpec), when it is rolled back to the pod it last served on unless it serves
// (notes[name].rollbackAt, rollbackNote), or, when it is not to be, that it is not replaced and what
// to do (untriedSpecNote; starting, only
// that it is not replaced if it does not start, which every rollout's first member is). The countdown
// ends at the end of the policy from DownSince, or at notes[name].replaceAt when that is later (a new
// pod is given its chance).
func downSummary(spec *etcdv1beta1.EtcdClusterSpec, members []etcdv1beta1.MemberStatus, quorate bool, notes map[string]memberNote) []string {
	var out []string
	for _, m := range members {
		if m.Healthy || m.DownSince == nil {
			continue
		}
		note := notes[m.Name]
		if note.state == memberJoining && m.Role != etcdv1beta1.RoleLearner {
			out = append(out, m.Name+" has joined as a voter and does not serve yet: etcd serves once it has published its name through raft, at the latest about 7 s after it started (its first try can be lost, etcd-io/etcd#16436)")
			continue
		}
		if note.rollingReplace {
			out = append(out, m.Name+" is being replaced by a member of the current spec since "+m.DownSince.UTC().Format(time.RFC3339)+
				" (rolling update: its data is on emptyDir and goes with its pod; the new member copies its peers' data)")
			continue
		}
		// a learner is a member joining (scaling up, or a replacement): it has not served yet
		s, until := m.Name+" is down since ", "recovers"
		if m.Role == etcdv1beta1.RoleLearner {
			s, until = m.Name+" is joining as a learner, not serving yet, since ", "serves"
		} else if note.rolling {
			s, until = m.Name+" is restarting onto the current spec (rolling update), not serving yet, since ", "serves"
		} else if note.state == memberStarting {
			s, until = m.Name+" is starting on a new pod, not serving yet, since ", "serves"
		}
		s += m.DownSince.UTC().Format(time.RFC3339)
		if m.Problem != "" {
			s += " (" + m.Problem + ")"
		}
		if after := spec.ReplaceAfter(); spec.Paused {
			s += "; not recreated or replaced while spec.paused is true"
		} else if !note.rollbackAt.IsZero() {
			s += "; " + rollbackNote(note)
		} else if !quorate {
			s += "; nothing is replaced without a quorum of healthy voters"
		} else if after > 0 && strings.HasPrefix(m.Problem, model.PullingImageProblem) {
			// the kubelet is pulling, or creating the container from a local image: nothing is wrong yet
			s += "; not replaced while its image is being pulled (a new member would wait for the same pull): if the pull does not finish (a registry that does not answer), fix spec.image"
		} else if after > 0 && model.ImagePullProblem(m.Problem) {
			s += "; not replaced while it waits for an image (a new member would wait the same way): if the image does not exist, fix spec.version or spec.image, and it is recreated on its data"
		} else if after > 0 && note.heldBy != "" {
			s += "; " + heldByRollbackNote(note.heldBy)
		} else if after > 0 && note.untriedSpec && note.state == memberStarting {
			// a member starting on its new pod shows no problem: it may well come up
			s += "; the first member on this spec: not replaced if it does not start either, since a new member would be made from the same spec"
		} else if after > 0 && note.untriedSpec {
			s += "; " + untriedSpecNote
		} else if note.podless {
			// recreated at once (recreateMembers); a pod the API server refuses is Progressing's
			s += "; its pod is recreated on its data, and it is not replaced meanwhile (a new member's pod would be made from the same spec): if Progressing says the pod cannot be created, fix what it names"
		} else if after > 0 {
			at := m.DownSince.Add(after)
			if note.replaceAt.After(at) {
				at = note.replaceAt
			}
			s += fmt.Sprintf("; replaced at %s unless it %s", at.UTC().Format(time.RFC3339), until)
		} else {
			s += "; not replaced automatically (spec.recovery.replaceUnhealthyMemberAfter is 0s)"
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
