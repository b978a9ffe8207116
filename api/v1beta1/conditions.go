package v1beta1

// Condition types of an EtcdCluster.
const (
	// ConditionAvailable is True when a quorum of voting members is healthy, there is a leader, and the
	// pod of at least one healthy voter is Ready (the client Service routes to it): the cluster serves
	// reads and writes, through the client Service too.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while the operator is changing the cluster (creating, replacing or
	// scaling members); the reason names the step and the message says what it waits for.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when a desired member is missing, unhealthy or not yet a voter.
	ConditionDegraded = "Degraded"
	// ConditionValid is False when the spec cannot be acted on; the message says what to change.
	ConditionValid = "Valid"
	// ConditionVolumesResized is True when every member's claim has the size spec.storage.size asks
	// for; False while claims are being expanded, or when their StorageClass cannot expand them.
	ConditionVolumesResized = "VolumesResized"
	// ConditionDataInconsistent is True when the members' key-value hashes at one revision differ: their
	// data diverged. It is checked periodically while the cluster is healthy, and within about a minute
	// of a member's etcd starting, joining or leaving.
	ConditionDataInconsistent = "DataInconsistent"
	// ConditionBackupFailing is True when scheduled backups keep failing: the newest scheduled backups
	// all failed, or the newest successful backup is older than three schedule periods. Set only while
	// spec.backup.schedule is.
	ConditionBackupFailing = "BackupFailing"
	// ConditionCertificatesExpiring is True when a certificate of the cluster's TLS expires soon: a leaf
	// within 30 days (its renewal, due months earlier, keeps failing) or the CA within a year (the CA is
	// not rotated automatically yet). Set only on clusters with TLS.
	ConditionCertificatesExpiring = "CertificatesExpiring"
	// ConditionQuorumDataLost is True when no quorum answers and fewer than a quorum of the voting
	// members etcd last listed still have their data (their claim, or for storage.emptyDir their pod):
	// quorum cannot come back by itself. Its lastTransitionTime is when that was first seen; an
	// automatic restore (spec.recovery.restoreOnQuorumLoss) waits until it has lasted a while.
	ConditionQuorumDataLost = "QuorumDataLost"
)

// Condition types of an EtcdBackup.
const (
	// BackupConditionComplete is True once the snapshot is verified and stored.
	BackupConditionComplete = "Complete"
	// BackupConditionFailed is True when the backup failed; the message says why and what to do.
	BackupConditionFailed = "Failed"
)

// Condition reasons of an EtcdCluster.
const (
	ReasonQuorumHealthy = "QuorumHealthy"
	ReasonQuorumLost    = "QuorumLost"
	// ReasonMemberJoining: Available is False for a moment because a voter promoted moments ago has
	// not shown yet (its readiness probe) that it takes part in raft; with it, the voters make a quorum.
	ReasonMemberJoining     = "MemberJoining"
	ReasonBootstrapping     = "Bootstrapping"
	ReasonCreatingMembers   = "CreatingMembers"
	ReasonWaitingForMembers = "WaitingForMembers"
	ReasonRecreatingMember  = "RecreatingMember"
	ReasonReconciled        = "Reconciled"
	ReasonMembersUnhealthy  = "MembersUnhealthy"
	ReasonAllMembersHealthy = "AllMembersHealthy"
	ReasonWaiting           = "Waiting"
	ReasonAddingMember      = "AddingMember"
	ReasonPromotingLearner  = "PromotingLearner"
	ReasonRemovingMember    = "RemovingMember"
	ReasonMemberDataLost    = "MemberDataLost"
	ReasonEtcdUnreachable   = "EtcdUnreachable"
	ReasonSpecValid         = "SpecValid"
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonDeleting          = "Deleting"
	ReasonReconcileError    = "ReconcileError"
	ReasonForeignObject     = "ForeignObject"
	ReasonRollingUpdate     = "RollingUpdate"
	ReasonMovingLeader      = "MovingLeader"
	ReasonRolloutPaused     = "RolloutPaused"
	// ReasonRolloutFailed (spec.recovery.rollBackFailedRollouts): a rolling update restarted a member
	// onto the current spec, the member did not serve on it for
	// spec.recovery.replaceUnhealthyMemberAfter while no other member served on it, and the operator
	// recreated the member's pod as it last served (AnnotationRolledBackFrom): the rollout restarts no
	// member onto this spec (Progressing False) until the spec changes.
	ReasonRolloutFailed = "RolloutFailed"
	// ReasonDefragmenting: a member was defragmented (spec.maintenance.defragmentation).
	ReasonDefragmenting = "Defragmenting"
	// ReasonPaused: spec.paused is true, so the operator changes nothing (Progressing False).
	ReasonPaused            = "Paused"
	ReasonVolumesMatchSpec  = "VolumesMatchSpec"
	ReasonExpandingVolumes  = "ExpandingVolumes"
	ReasonExpansionRefused  = "VolumeExpansionNotSupported"
	ReasonHashesMatch       = "HashesMatch"
	ReasonHashMismatch      = "HashMismatch"
	ReasonBackupsFailing    = "BackupsFailing"
	ReasonBackupTooOld      = "LastBackupTooOld"
	ReasonBackupsSucceeding = "BackupsSucceeding"
	ReasonNoBackupYet       = "NoBackupYet"

	ReasonCertificatesCurrent = "CertificatesCurrent"
	// ReasonCALost: the cluster's CA Secret is gone while certificates it issued are in use.
	ReasonCALost = "CertificateAuthorityLost"
	// ReasonTLSSecretUnusable: a Secret of spec.tls.secrets is missing or cannot serve the cluster.
	ReasonTLSSecretUnusable = "TLSSecretUnusable"
	// ReasonCertificateNotReady: a cert-manager Certificate of spec.tls.issuerRef is not Ready and not
	// being issued, or cert-manager is not installed.
	ReasonCertificateNotReady = "CertificateNotReady"
	// ReasonWaitingForCertificates: cert-manager is issuing a certificate of spec.tls.issuerRef that the
	// cluster needs.
	ReasonWaitingForCertificates = "WaitingForCertificates"
	// ReasonRotatingCA: the cluster's CA is being rotated (status.tls.caRotation says how far).
	ReasonRotatingCA = "RotatingCA"
	// ReasonSwitchingTLS: spec.tls is being switched on or off for the running cluster, member by member.
	ReasonSwitchingTLS        = "SwitchingTLS"
	ReasonCertificateExpiring = "CertificateExpiring"
	// ReasonQuorumDataLost: quorum is lost and cannot come back, because fewer than a quorum of the
	// voting members still have their data.
	ReasonQuorumDataLost = "QuorumDataLost"
	// ReasonRestoringFromBackup: the cluster is being recreated from a backup after ReasonQuorumDataLost
	// (spec.recovery.restoreOnQuorumLoss).
	ReasonRestoringFromBackup = "RestoringFromBackup"
	// ReasonNoSpace: etcd raised its NOSPACE alarm (a database reached --quota-backend-bytes): the
	// cluster serves reads and refuses writes until the alarm is disarmed.
	ReasonNoSpace = "NoSpace"
	// ReasonCorrupt: etcd raised its CORRUPT alarm for a member whose data diverged from its peers':
	// the cluster refuses writes until the member is replaced and the alarm disarmed.
	ReasonCorrupt = "Corrupt"
	// ReasonDataKept: a quorum of the voting members keeps its data (or answers).
	ReasonDataKept = "DataKept"
	// ReasonRestoreCancelled: an automatic restore was cancelled before it deleted the lost cluster.
	ReasonRestoreCancelled = "RestoreCancelled"
	// ReasonEnablingAuth: the operator turned etcd authentication on (spec.auth), with user root.
	ReasonEnablingAuth = "EnablingAuth"
	// ReasonRootSecretUnusable: the Secret with the root password (spec.auth) is missing, has no
	// password, or is not the cluster's.
	ReasonRootSecretUnusable = "RootSecretUnusable"
	// ReasonAuthFailed: etcd refuses the root password of the cluster's Secret (for example a cluster
	// restored from a snapshot whose root password is another).
	ReasonAuthFailed = "AuthenticationFailed"
	// ReasonReplacingMember: a member is being replaced as AnnotationReplaceMember asked: its claim and
	// pod were deleted, and the membership steps that follow (remove, add, promote) give the cluster a
	// new member of that name.
	ReasonReplacingMember = "ReplacingMember"
	// ReasonRequestRefused is the reason of the Warning event recorded when the operator removes an
	// AnnotationMoveLeader or AnnotationReplaceMember request it can never carry out (an unknown
	// member, a learner, a cluster of one member); the event's note says why and what to do instead.
	ReasonRequestRefused = "RequestRefused"
	// ReasonHoldingEvictions is the reason of the Normal event recorded when a scale-down makes the
	// cluster's PodDisruptionBudget refuse every eviction before it takes the members it removes out of
	// the client Service (AnnotationEvictionsHeldSince).
	ReasonHoldingEvictions = "HoldingEvictions"
	// ReasonDrainSkipped is the reason of the Warning event recorded when the PodDisruptionBudget's
	// hold of evictions did not take effect in time (its status was not computed from it), and a
	// scale-down removes its members without taking them out of the client Service first.
	ReasonDrainSkipped = "DrainSkipped"
	// ReasonEvictionHoldExpired is the reason of the Warning event recorded when a hold of evictions
	// ends after its longest time, before the scale-down removed every member it took out of the client
	// Service.
	ReasonEvictionHoldExpired = "EvictionHoldExpired"

	// ReasonClientServiceNotReady: Available is False while a quorum of voters is healthy but none of
	// their pods is Ready yet, so the client Service routes to none of them (the readiness probe runs
	// every second once the startup probe, also every second, has passed, and the operator sets the
	// pod's readiness gate once the member served it: seconds after etcd serves).
	ReasonClientServiceNotReady = "ClientServiceNotReady"

	// ReasonNamespaceTerminating: Progressing is False because the cluster's namespace is being
	// deleted. The API server refuses every new object in it, so the operator stops making any (and
	// recording events) and waits for the namespace controller to delete the cluster.
	ReasonNamespaceTerminating = "NamespaceTerminating"
)

// Labels and annotations the operator puts on the objects it owns.
const (
	// LabelCluster names the EtcdCluster an object belongs to.
	LabelCluster = "etcd.etcdkit.dev/cluster"
	// LabelMember names the member (pod name) an object belongs to.
	LabelMember = "etcd.etcdkit.dev/member"
	// AnnotationInitialClusterState records how a member's data directory was first created: "new"
	// (initial bootstrap) or "existing" (joined a running cluster).
	AnnotationInitialClusterState = "etcd.etcdkit.dev/initial-cluster-state"
	// AnnotationInitialCluster records the --initial-cluster a member was first started with.
	AnnotationInitialCluster = "etcd.etcdkit.dev/initial-cluster"
	// AnnotationMemberID and AnnotationClusterID, on a member's claim, record (in hex) the member ID and
	// cluster ID the member had when it first started on the claim: its pod checks its data directory
	// against them before etcd starts.
	AnnotationMemberID  = "etcd.etcdkit.dev/member-id"
	AnnotationClusterID = "etcd.etcdkit.dev/cluster-id"
	// AnnotationAwaitsAdd marks the claim of a member created before the member is added to etcd (its
	// pod waits until etcd lists it): until the member's etcd has started on it, the claim holds no data.
	AnnotationAwaitsAdd = "etcd.etcdkit.dev/awaits-add"
	// AnnotationPeersAddressed, set to "true" on the pods of a cluster's initial members once every one
	// of them has its address (and so its DNS name): their init container await-peers waits for it, so
	// that no etcd looks up a peer's name before it exists (see resources.AwaitPeersContainerName).
	AnnotationPeersAddressed = "etcd.etcdkit.dev/peers-addressed"
	// AnnotationClusterUID records the UID of the EtcdCluster a member's claim was created for, so that
	// a cluster never starts a member on a claim left by another cluster of the same name.
	AnnotationClusterUID = "etcd.etcdkit.dev/cluster-uid"
	// AnnotationSpecHash on a member pod is the hash of the spec fields the pod was built from; a pod
	// with another hash than the current spec's is rolled.
	AnnotationSpecHash = "etcd.etcdkit.dev/spec-hash"
	// AnnotationRolledOnto on a member's claim is the spec hash (AnnotationSpecHash) a rolling update
	// last restarted the member onto while the member served: a member that is down on a pod of that
	// hash, while no other member serves on one, went down on a spec no member has run, and is not
	// replaced (a new member would be made from the same spec).
	AnnotationRolledOnto = "etcd.etcdkit.dev/rolled-onto"
	// AnnotationServedSpec (spec.recovery.rollBackFailedRollouts) on a member's claim is the spec hash
	// (AnnotationSpecHash) of the pod the member served on when a rolling update restarted it onto the
	// spec of AnnotationRolledOnto; written and removed with it. The operator keeps the spec of that
	// hash in a ControllerRevision named "<cluster>-<hash>" (labelled LabelSpecHash). If the member does
	// not serve on the new spec for spec.recovery.replaceUnhealthyMemberAfter while no other member
	// serves on it, its pod is recreated on its data from that revision's spec: it is rolled back. While
	// that holds, every member that serves gets this record too, and a member whose pod goes is recreated
	// the same way.
	AnnotationServedSpec = "etcd.etcdkit.dev/served-spec"
	// AnnotationUntriedSpecRan, "true" on a member's claim, says that the member's etcd ran on a pod
	// of the spec of AnnotationRolledOnto (or of one the records followed from) while it did not serve:
	// a rollback to another etcd minor version would start an older etcd on data a newer one opened,
	// so there is none. Removed with AnnotationRolledOnto.
	AnnotationUntriedSpecRan = "etcd.etcdkit.dev/untried-spec-ran"
	// LabelSpecHash on a cluster's ControllerRevision is the spec hash (AnnotationSpecHash) of the spec
	// it keeps.
	LabelSpecHash = "etcd.etcdkit.dev/spec-hash"
	// AnnotationRolledBackFrom on a member's claim is the spec hash (AnnotationSpecHash) its pod was
	// rolled back from (see AnnotationServedSpec). While the current spec has that hash, the member's pod
	// is made from the spec of AnnotationServedSpec and the rolling update restarts no member (Progressing says
	// ReasonRolloutFailed); once the spec changes, the record goes. Remove it to have the rollout try the
	// same spec again.
	AnnotationRolledBackFrom = "etcd.etcdkit.dev/rolled-back-from"
	// AnnotationRolledBackClaim on the ControllerRevision of a spec a member was rolled back from
	// (AnnotationRolledBackFrom) is "<member>/<claim UID>": the member and the claim that recorded the
	// rollback, written with that record along with AnnotationServedSpec and AnnotationRollbackReason.
	// When that claim is lost (deleted, or replaced by a claim of another UID) while the cluster's spec
	// still has that hash, the rollback still holds: the member's replacement is made from the spec of
	// AnnotationServedSpec, and its claim gets the record once it serves. When the claim is there without
	// the record (removed to have the rollout try the same spec again), the operator removes these.
	AnnotationRolledBackClaim = "etcd.etcdkit.dev/rolled-back-claim"
	// AnnotationRollbackReason on a member's claim says, with AnnotationRolledBackFrom, why the member was
	// rolled back: what kept it from serving on the spec (its status problem at the time).
	AnnotationRollbackReason = "etcd.etcdkit.dev/rollback-reason"
	// AnnotationDataDiverged on a member's pod says that the operator's comparison of the members'
	// key-value hashes found the member's hash to differ from the one a strict majority of the members
	// agree on, at one revision (its value says which): its data diverged, and it is replaced at once
	// unless spec.recovery.replaceUnhealthyMemberAfter is 0s.
	AnnotationDataDiverged = "etcd.etcdkit.dev/data-diverged"
	// AnnotationEvictionsHeldSince on a cluster's PodDisruptionBudget is when (RFC 3339) the operator
	// made it refuse every eviction, for a scale-down that takes members out of the client Service
	// before removing them (see resources.HoldEvictions); it goes with the hold.
	AnnotationEvictionsHeldSince = "etcd.etcdkit.dev/evictions-held-since"
	// Finalizer lets the operator finish its own clean-up before an EtcdCluster goes away.
	Finalizer = "etcd.etcdkit.dev/finalizer"
	// LabelBackup names the EtcdBackup a Job or pod belongs to (shortened with a hash when the name
	// is longer than a label value may be).
	LabelBackup = "etcd.etcdkit.dev/backup"
	// LabelScheduled is "true" on the EtcdBackups a cluster's spec.backup.schedule created; only
	// those are pruned by spec.backup.retention.
	LabelScheduled = "etcd.etcdkit.dev/scheduled"
	// LabelSurvivorSnapshot is "true" on the EtcdBackups that copy the survivors of a quorum loss
	// before the operator recreates the cluster (spec.recovery.restoreOnQuorumLoss).
	LabelSurvivorSnapshot = "etcd.etcdkit.dev/survivor-snapshot"
	// LabelFinalSnapshot is "true" on the EtcdBackup taken when its cluster was deleted.
	LabelFinalSnapshot = "etcd.etcdkit.dev/final-snapshot"
	// AnnotationDeleteSnapshot set to "true" on an EtcdBackup makes deleting it delete its stored
	// snapshot and manifest too. Retention sets it on the backups it prunes; without it, deleting an
	// EtcdBackup keeps the stored data.
	AnnotationDeleteSnapshot = "etcd.etcdkit.dev/delete-snapshot"
	// AnnotationScheduledTime on a scheduled EtcdBackup is the schedule time (RFC 3339) it was
	// created for.
	AnnotationScheduledTime = "etcd.etcdkit.dev/scheduled-time"

	// AnnotationRenewCertificates, on an EtcdCluster, asks for every leaf certificate of the cluster
	// issued before its value (an RFC 3339 time, e.g. `date -u +%FT%TZ`) to be issued again at once,
	// without restarting a member: after a key may have leaked, or to try renewal out.
	AnnotationRenewCertificates = "etcd.etcdkit.dev/renew-certificates"
	// AnnotationRotateCA, on an EtcdCluster, asks for the cluster's CA to be rotated when it was issued
	// before its value (an RFC 3339 time): a new CA is trusted by every member, then issues every
	// certificate, then the old CA is dropped; each member restarts twice, one at a time. The operator
	// also rotates a CA on its own two years before it expires.
	AnnotationRotateCA = "etcd.etcdkit.dev/rotate-ca"
	// AnnotationCARotationPhase, AnnotationCARotationStarted and AnnotationCARotationPhaseSince, on a
	// cluster's CA Secret, record the phase of a CA rotation under way (a CARotation* phase), when the
	// rotation began and when the phase did (RFC 3339).
	AnnotationCARotationPhase      = "etcd.etcdkit.dev/ca-rotation-phase"
	AnnotationCARotationStarted    = "etcd.etcdkit.dev/ca-rotation-started"
	AnnotationCARotationPhaseSince = "etcd.etcdkit.dev/ca-rotation-phase-since"

	// AnnotationDefragment, on an EtcdCluster, asks for every voting member to be defragmented now, one
	// at a time, followers first and the leader last after leadership moved to a defragmented follower,
	// whatever spec.maintenance says. Its value is any token (`kubectl etcd defrag` writes the time, RFC
	// 3339); a new value while a request is under way starts over. The request waits while the cluster
	// is paused, rolls, or has a member that is not healthy; once every member is done the operator
	// removes the annotation and records a Defragmented event (status.maintenance records the members
	// still to do and the last one done).
	AnnotationDefragment = "etcd.etcdkit.dev/defragment"
	// AnnotationMoveLeader, on an EtcdCluster, asks for etcd's leadership to move to the member its
	// value names (a pod name, such as demo-1). The request waits while the cluster is paused, rolls,
	// or has a member that is not healthy. Once the member leads the operator removes the annotation
	// and records a MovedLeader event; a member that is not one of the cluster's, or is a learner, is
	// refused: the annotation is removed with a RequestRefused event.
	AnnotationMoveLeader = "etcd.etcdkit.dev/move-leader"
	// AnnotationReplaceMember, on an EtcdCluster, asks for the member its value names (a pod name) to
	// be replaced: its claim and pod are deleted (its data with them), it is removed from etcd, and a
	// new member of that name joins with a new member ID and copies the data from the leader. The
	// request waits while the cluster is paused, rolls, restores, changes its membership, or has
	// another member that is not healthy (replacing one then could lose quorum); the member itself may
	// be down. A leader first hands its leadership to a follower. Once the claim and pod are deleted
	// the operator removes the annotation and records a ReplacingMember event. A member that is not one
	// of the cluster's, a learner, or the member of a one-member cluster is refused (RequestRefused).
	AnnotationReplaceMember = "etcd.etcdkit.dev/replace-member"
	// BackupFinalizer lets the operator delete an EtcdBackup's stored snapshot (when
	// AnnotationDeleteSnapshot asks for it) before the EtcdBackup goes away.
	BackupFinalizer = "etcd.etcdkit.dev/backup-finalizer"
)

// ReplicasOrDefault returns spec.replicas, or 3 when unset (the API server defaults it).
func (s *EtcdClusterSpec) ReplicasOrDefault() int32 {
	if s.Replicas == nil {
		return 3
	}
	return *s.Replicas
}

// VersionOrDefault returns spec.version, or DefaultVersion when unset.
func (s *EtcdClusterSpec) VersionOrDefault() string {
	if s.Version == "" {
		return DefaultVersion
	}
	return s.Version
}

// Requests returns the day-2 requests c's annotations make (AnnotationMoveLeader,
// AnnotationDefragment, AnnotationReplaceMember) that the operator has not carried out yet, as
// "annotation=value", in that order.
func (c *EtcdCluster) Requests() []string {
	var out []string
	for _, key := range []string{AnnotationMoveLeader, AnnotationDefragment, AnnotationReplaceMember} {
		if v, ok := c.Annotations[key]; ok {
			out = append(out, key+"="+v)
		}
	}
	return out
}
