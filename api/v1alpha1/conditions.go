package v1alpha1

// Condition types of an EtcdCluster.
const (
	// ConditionAvailable is True when a quorum of voting members is healthy and there is a leader: the
	// cluster serves reads and writes.
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
	// data diverged. It is checked periodically while the cluster is healthy.
	ConditionDataInconsistent = "DataInconsistent"
)

// Condition reasons of an EtcdCluster.
const (
	ReasonQuorumHealthy     = "QuorumHealthy"
	ReasonQuorumLost        = "QuorumLost"
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
	ReasonVolumesMatchSpec  = "VolumesMatchSpec"
	ReasonExpandingVolumes  = "ExpandingVolumes"
	ReasonExpansionRefused  = "VolumeExpansionNotSupported"
	ReasonHashesMatch       = "HashesMatch"
	ReasonHashMismatch      = "HashMismatch"
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
	// AnnotationClusterUID records the UID of the EtcdCluster a member's claim was created for, so that
	// a cluster never starts a member on a claim left by another cluster of the same name.
	AnnotationClusterUID = "etcd.etcdkit.dev/cluster-uid"
	// AnnotationSpecHash on a member pod is the hash of the spec fields the pod was built from; a pod
	// with another hash than the current spec's is rolled.
	AnnotationSpecHash = "etcd.etcdkit.dev/spec-hash"
	// Finalizer lets the operator finish its own clean-up before an EtcdCluster goes away.
	Finalizer = "etcd.etcdkit.dev/finalizer"
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
