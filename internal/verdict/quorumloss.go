package verdict

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/membership"
	"github.com/etcdkit/etcd-operator/internal/model"
	"github.com/etcdkit/etcd-operator/internal/resources"
	"github.com/etcdkit/etcd-operator/internal/version"
)

// DataLoss is the verdict on a cluster that does not answer: which of its voting members still have
// their data.
type DataLoss struct {
	// Voters are the voting members etcd last listed (status.members), by name.
	Voters []string
	// Lost are the voters whose data is gone: their claim is missing or being deleted, or, for
	// storage.emptyDir, their pod is (an emptyDir lives and dies with its pod).
	Lost []string
}

// Quorum is the number of voters a quorum of the last listed voters needs.
func (d DataLoss) Quorum() int { return membership.Quorum(len(d.Voters)) }

// Kept is the number of voters whose data is still there.
func (d DataLoss) Kept() int { return len(d.Voters) - len(d.Lost) }

// Permanent reports whether quorum can never come back by itself: fewer voters than a quorum keep
// their data. A voter without its data must never vote again (it would have forgotten what it
// acknowledged), so no restart of any pod can bring the quorum back.
func (d DataLoss) Permanent() bool { return len(d.Voters) > 0 && d.Kept() < d.Quorum() }

// JudgeDataLoss judges, from the pods and claims of the pass, which of the voters the status last
// listed have lost their data. It is meant for a cluster none of whose members answered: only members
// etcd listed count (a pod recorded while etcd did not answer, such as a removed member's pod still
// terminating or a learner's, has no member ID and is no voter).
func JudgeDataLoss(m *model.Cluster) DataLoss {
	var d DataLoss
	emptyDir := m.Object.Spec.Storage.EmptyDir != nil
	for _, mem := range m.Members {
		if !mem.Voter() {
			continue
		}
		d.Voters = append(d.Voters, mem.Name)
		if !hasData(mem, emptyDir) {
			d.Lost = append(d.Lost, mem.Name)
		}
	}
	return d
}

// hasData reports whether a member's data directory may still exist: its claim for persistent
// storage, its pod for storage.emptyDir. Only what is certainly gone counts as lost: an emptyDir pod
// that is terminating still has its volume, and a claim that is being deleted is kept while the
// member's pod exists (Kubernetes does not delete a claim a pod uses).
func hasData(m *model.Member, emptyDir bool) bool {
	if emptyDir {
		return m.Pod != nil
	}
	return m.HasClaim() || (m.Claim != nil && m.Pod != nil)
}

// DataLostSince returns when the persisted status first reported quorum lost without data (the
// QuorumDataLost condition's lastTransitionTime), or the zero time when it does not report it.
func DataLostSince(c *etcdv1beta1.EtcdCluster) time.Time {
	cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1beta1.ConditionQuorumDataLost)
	if cond == nil || cond.Status != metav1.ConditionTrue {
		return time.Time{}
	}
	return cond.LastTransitionTime.Time
}

// Message says which members lost their data and why quorum cannot come back.
func (d DataLoss) Message(emptyDir bool) string {
	what := "claims gone"
	if emptyDir {
		what = "emptyDir pods gone"
	}
	return fmt.Sprintf("Quorum is lost for good: members %s lost their data (%s); only %d of the %d voting members keep theirs, fewer than the quorum of %d",
		strings.Join(d.Lost, ", "), what, d.Kept(), len(d.Voters), d.Quorum())
}

// OptedIn reports whether spec.recovery.restoreOnQuorumLoss is set.
func OptedIn(c *etcdv1beta1.EtcdCluster) bool {
	return c.Spec.Recovery != nil && c.Spec.Recovery.RestoreOnQuorumLoss
}

// RetainedClaims names the claims the operator may not delete before a restore because
// storage.retainPolicy is Retain (a claim the user deleted goes once its pod does); none under Delete.
func RetainedClaims(m *model.Cluster) []string {
	var kept []string
	if m.Object.Spec.Storage.RetainPolicy != etcdv1beta1.RetainPolicyRetain {
		return nil
	}
	for _, mem := range m.Claims() {
		if mem.HasClaim() {
			kept = append(kept, mem.Claim.Name)
		}
	}
	return kept
}

// Survivors names the voters whose data is kept, in the order of Voters.
func (d DataLoss) Survivors() []string {
	var out []string
	for _, v := range d.Voters {
		if !slices.Contains(d.Lost, v) {
			out = append(out, v)
		}
	}
	return out
}

// SurvivorRetryAfter is how long after a copy of a survivor failed the operator deletes it to take it
// again (the survivor's pod may have been restarting).
const SurvivorRetryAfter = 30 * time.Second

// SurvivorCopies is the verdict on the copies of the survivors of a quorum loss (EtcdBackups named by
// resources.SurvivorSnapshotName) that must exist before the cluster is recreated.
type SurvivorCopies struct {
	// Missing are the survivors that have no copy yet: the operator creates one for each.
	Missing []string
	// Waiting and Failed describe the copies not finished, and those that failed with why.
	Waiting, Failed []string
	// Retry are the failed copies old enough to be deleted and taken again.
	Retry []*etcdv1beta1.EtcdBackup
	// Taken are the EtcdBackups that copied a survivor.
	Taken []string
}

// JudgeSurvivorCopies judges the copies, among backups, of the survivors of the quorum loss that began
// at since, as of now.
func JudgeSurvivorCopies(survivors []string, since, now time.Time, backups []etcdv1beta1.EtcdBackup) SurvivorCopies {
	var sc SurvivorCopies
	for _, name := range survivors {
		want := resources.SurvivorSnapshotName(name, since)
		i := slices.IndexFunc(backups, func(b etcdv1beta1.EtcdBackup) bool { return b.Name == want })
		if i < 0 || backups[i].DeletionTimestamp != nil {
			sc.Missing = append(sc.Missing, name)
			continue
		}
		b := &backups[i]
		switch b.Status.Phase {
		case etcdv1beta1.BackupSucceeded:
			sc.Taken = append(sc.Taken, b.Name)
		case etcdv1beta1.BackupFailed:
			sc.Failed = append(sc.Failed, fmt.Sprintf("%s (EtcdBackup %s: %s)", name, b.Name, b.Status.Message))
			if t := b.Status.CompletionTime; t != nil && now.Sub(t.Time) >= SurvivorRetryAfter {
				sc.Retry = append(sc.Retry, b)
			}
		default:
			sc.Waiting = append(sc.Waiting, fmt.Sprintf("%s (EtcdBackup %s)", name, b.Name))
		}
	}
	return sc
}

// Done reports whether every survivor is copied.
func (sc SurvivorCopies) Done() bool { return len(sc.Missing)+len(sc.Waiting)+len(sc.Failed) == 0 }

// Message says what the recovery waits for while not every survivor is copied.
func (sc SurvivorCopies) Message() string {
	var parts []string
	if len(sc.Missing)+len(sc.Waiting) > 0 {
		parts = append(parts, "copying the members that kept their data before anything is deleted: "+strings.Join(append(slices.Clone(sc.Missing), sc.Waiting...), ", "))
	}
	if len(sc.Failed) > 0 {
		parts = append(parts, fmt.Sprintf("the copy of %s failed, and a survivor that was not copied is never deleted; the copy is taken again %s after it failed (a survivor's pod must run etcd on its data), or delete the survivor's claim to give its data up",
			strings.Join(sc.Failed, "; "), SurvivorRetryAfter))
	}
	return strings.Join(parts, "; ")
}

// LostRevisions is how many revisions are known to be lost when chosen is restored: the highest
// revision known (status.revision from before the loss, the survivors' copies and every backup)
// minus chosen's, 0 when none is higher.
func LostRevisions(c *etcdv1beta1.EtcdCluster, chosen *etcdv1beta1.EtcdBackup, backups []etcdv1beta1.EtcdBackup) int64 {
	highest := c.Status.Revision
	for _, b := range backups {
		if b.Spec.ClusterRef.Name == c.Name && b.Status.Phase == etcdv1beta1.BackupSucceeded && !b.CreationTimestamp.Before(&c.CreationTimestamp) {
			highest = max(highest, b.Status.Revision)
		}
	}
	return max(0, highest-chosen.Status.Revision)
}

// PickRestoreBackup returns, of backups, the most up-to-date (highest revision, then newest by
// completion time) Succeeded backup of cluster c
// created after c whose snapshot c's version can restore and whose destination is known (its own, or,
// for one that names none, c's spec.backup.destination, if that is where status.location says it
// went), with that destination; otherwise nil and why.
func PickRestoreBackup(c *etcdv1beta1.EtcdCluster, backups []etcdv1beta1.EtcdBackup) (*etcdv1beta1.EtcdBackup, *etcdv1beta1.BackupDestination, string) {
	var best *etcdv1beta1.EtcdBackup
	var bestDest *etcdv1beta1.BackupDestination
	var refused, earlier []string
	for i := range backups {
		b := &backups[i]
		if b.Spec.ClusterRef.Name != c.Name || b.Status.Phase != etcdv1beta1.BackupSucceeded || b.Status.Key == "" || b.Status.CompletionTime == nil ||
			b.DeletionTimestamp != nil {
			continue
		}
		if b.CreationTimestamp.Before(&c.CreationTimestamp) {
			earlier = append(earlier, b.Name)
			continue
		}
		if err := version.CheckRestore(b.Status.EtcdVersion, c.Spec.VersionOrDefault()); err != nil {
			refused = append(refused, fmt.Sprintf("%s (%v)", b.Name, err))
			continue
		}
		dest := b.Spec.Destination
		if dest == nil && c.Spec.Backup != nil {
			dest = &c.Spec.Backup.Destination
		}
		// a backup that named no destination went to the cluster's destination of its day: use the
		// cluster's only if it still leads there
		if loc := resources.DestinationLocation(dest, b.Status.Key); dest == nil || (b.Spec.Destination == nil && loc != b.Status.Location) {
			refused = append(refused, fmt.Sprintf("%s (stored at %s, which spec.backup.destination no longer names)", b.Name, b.Status.Location))
			continue
		}
		if best == nil || b.Status.Revision > best.Status.Revision ||
			(b.Status.Revision == best.Status.Revision && b.Status.CompletionTime.After(best.Status.CompletionTime.Time)) {
			best, bestDest = b, dest
		}
	}
	if best != nil {
		return best, bestDest.DeepCopy(), ""
	}
	if len(refused) > 0 {
		sort.Strings(refused)
		return nil, nil, "no successful EtcdBackup of this cluster can be restored: " + strings.Join(refused, "; ") + "; restore one by hand into a new EtcdCluster with spec.bootstrap.restore.source"
	}
	why := "no EtcdBackup of this cluster succeeded: there is nothing to restore"
	if len(earlier) > 0 {
		sort.Strings(earlier)
		why += fmt.Sprintf(" (EtcdBackups %s are of an earlier cluster of the same name: if one is what you want, restore it by hand into a new EtcdCluster with spec.bootstrap.restore)", strings.Join(earlier, ", "))
	}
	return nil, nil, why
}

// Recovering reports whether an automatic restore is under way (status.recovery not Succeeded).
func Recovering(c *etcdv1beta1.EtcdCluster) bool {
	return c.Status.Recovery != nil && c.Status.Recovery.Phase != etcdv1beta1.RecoverySucceeded
}

// RecoveryPlan returns the snapshot the members of an automatic restore restore: the one
// status.recovery names, where it was when the restore was decided, with a cluster token of its own so
// that the recreated cluster (same member names and peer URLs) gets a new cluster ID.
func RecoveryPlan(c *etcdv1beta1.EtcdCluster) (*resources.RestorePlan, *Step) {
	rec := c.Status.Recovery
	if rec.Destination == nil {
		return nil, Blocked(etcdv1beta1.ReasonInvalidSpec, fmt.Sprintf(
			"Recreating the cluster from EtcdBackup %s: status.recovery records no destination for key %s; create a new EtcdCluster with spec.bootstrap.restore.source naming where it is", rec.Backup, rec.Key))
	}
	return &resources.RestorePlan{Destination: *rec.Destination, Key: rec.Key, SHA256: rec.SHA256,
		ClusterToken: fmt.Sprintf("%s-%s-%d", c.UID, rec.PreviousClusterID, rec.StartTime.Unix())}, nil
}
