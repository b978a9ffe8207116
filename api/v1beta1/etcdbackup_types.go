package v1beta1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupDestination is where snapshots are stored: exactly one of s3 or pvc.
//
// +kubebuilder:validation:XValidation:rule="has(self.s3) != has(self.pvc)",message="a backup destination needs exactly one of s3 or pvc"
type BackupDestination struct {
	// S3 stores snapshots in an S3-compatible object store.
	// +optional
	S3 *S3Destination `json:"s3,omitempty"`
	// PVC stores snapshots as files on a PersistentVolumeClaim in the cluster's namespace.
	// +optional
	PVC *PVCDestination `json:"pvc,omitempty"`
}

// S3Destination is a bucket (and key prefix) of an S3-compatible object store.
//
// +kubebuilder:validation:XValidation:rule="!has(self.caSecretRef) || self.endpoint.startsWith('https://')",message="s3.caSecretRef needs an https:// endpoint"
type S3Destination struct {
	// Endpoint is the object store's URL, such as "https://s3.eu-west-1.amazonaws.com" or
	// "http://minio.storage.svc:9000".
	//
	// +kubebuilder:validation:Pattern=`^https?://[^\s/]+(/.*)?$`
	// +kubebuilder:validation:MaxLength=512
	Endpoint string `json:"endpoint"`
	// Bucket is the bucket name.
	//
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	Bucket string `json:"bucket"`
	// Prefix is prepended to every key, such as "etcd/prod"; no leading or trailing "/", no empty, "."
	// or ".." segment, no control characters.
	//
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^([^/].*[^/]|[^/])?$`
	// +kubebuilder:validation:XValidation:rule=`self == '' || !self.split('/').exists(e, e == '' || e == '.' || e == '..')`,message="s3.prefix must be a relative path such as 'etcd/prod': no empty, '.' or '..' segment"
	// +kubebuilder:validation:XValidation:rule=`!self.matches('\\p{Cc}')`,message="s3.prefix must not contain control characters such as a newline or tab"
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Region of the bucket (default "us-east-1").
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Region string `json:"region,omitempty"`
	// ForcePathStyle addresses the bucket as <endpoint>/<bucket> instead of <bucket>.<endpoint>, as
	// most self-hosted object stores need.
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`
	// CredentialsSecretRef names a Secret in the cluster's namespace with the keys "accessKeyID" and
	// "secretAccessKey".
	CredentialsSecretRef LocalObjectReference `json:"credentialsSecretRef"`
	// CASecretRef names a Secret in the cluster's namespace whose key "ca.crt" holds PEM-encoded CA
	// certificates (one or more) to trust for an https:// Endpoint in addition to the system's, such as
	// the private CA that issued an in-house object store's certificate. Backup, restore and
	// snapshot-deletion pods mount it read-only. Default: the system's CAs only (the operator image
	// carries Debian's bundle).
	// +optional
	CASecretRef *LocalObjectReference `json:"caSecretRef,omitempty"`
}

// PVCDestination is a directory on a PersistentVolumeClaim.
type PVCDestination struct {
	// ClaimName is the claim, in the cluster's namespace. With a ReadWriteOnce claim, backup Jobs must
	// run on the node that mounts it.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName"`
	// SubPath is a directory inside the claim (default: its root).
	//
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.contains('..')",message="pvc.subPath must be a relative path without '..'"
	// +kubebuilder:validation:XValidation:rule=`!self.matches('\\p{Cc}')`,message="pvc.subPath must not contain control characters such as a newline or tab"
	// +optional
	SubPath string `json:"subPath,omitempty"`
}

// EtcdBackupSpec is a request for one snapshot of a cluster. It cannot change once created.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="an EtcdBackup's spec cannot change; create another EtcdBackup"
type EtcdBackupSpec struct {
	// ClusterRef names the EtcdCluster, in the same namespace, to back up.
	ClusterRef LocalObjectReference `json:"clusterRef"`
	// Destination is where the snapshot goes; default: the cluster's spec.backup.destination.
	// +optional
	Destination *BackupDestination `json:"destination,omitempty"`
	// Member names the one member to snapshot (its pod name, such as "demo-0"), even when it has no
	// leader: the snapshot holds what that member has applied. The operator sets it on the EtcdBackups
	// that copy the survivors of a quorum loss before it recreates the cluster; such a backup does not
	// wait for the cluster to be Available. Default: the cluster's most up-to-date healthy follower
	// (the leader when no follower is healthy).
	//
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Member string `json:"member,omitempty"`
}

// BackupPhase is where a backup is.
//
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type BackupPhase string

// The phases of an EtcdBackup.
const (
	BackupPending   BackupPhase = "Pending"
	BackupRunning   BackupPhase = "Running"
	BackupSucceeded BackupPhase = "Succeeded"
	BackupFailed    BackupPhase = "Failed"
)

// EtcdBackupStatus is what the backup did.
type EtcdBackupStatus struct {
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is Pending (waiting for the cluster or for another backup of it), Running, Succeeded or
	// Failed.
	// +optional
	Phase BackupPhase `json:"phase,omitempty"`
	// StartTime is when the snapshot started streaming.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the snapshot was verified and stored (Succeeded), or when the backup
	// was given up (Failed).
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Location is where the snapshot is: "s3://<bucket>/<prefix>/<key>" or
	// "pvc://<claim>/<subPath>/<key>".
	// +optional
	Location string `json:"location,omitempty"`
	// Key is the snapshot's key in the destination (under the prefix or subPath).
	// +optional
	Key string `json:"key,omitempty"`
	// SizeBytes is the snapshot's size in bytes.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// Revision is the etcd revision the snapshot holds.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// SHA256 is the hex sha256 of the snapshot file, checked again before a restore.
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// EtcdVersion is the server version of the member the snapshot was taken from.
	// +optional
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// Member is the member the snapshot was taken from.
	// +optional
	Member string `json:"member,omitempty"`
	// Message says what happened, and on failure what to do about it.
	// +optional
	Message string `json:"message,omitempty"`
	// Conditions: Complete (True once the snapshot is verified and stored), Failed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EtcdBackup is one verified snapshot of an EtcdCluster, taken by a Job, stored in S3 or on a PVC.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdbackup,categories=all
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.sizeBytes`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Completed",type=date,JSONPath=`.status.completionTime`
// +kubebuilder:printcolumn:name="Location",type=string,priority=1,JSONPath=`.status.location`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec EtcdBackupSpec `json:"spec"`
	// +optional
	Status EtcdBackupStatus `json:"status,omitempty"`
}

// EtcdBackupList is a list of EtcdBackups.
//
// +kubebuilder:object:root=true
type EtcdBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackup `json:"items"`
}

// BackupSpec schedules backups of a cluster and bounds how many are kept.
type BackupSpec struct {
	// Schedule is a cron expression ("0 * * * *": hourly; "@every 6h"), in TimeZone, firing at most once
	// a minute. Empty: no scheduled backups (EtcdBackups can still be created by hand). A schedule missed while the operator was down
	// runs once when it is back, not once per missed time.
	//
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Schedule string `json:"schedule,omitempty"`
	// TimeZone of Schedule, an IANA name such as "Europe/Berlin" (default UTC).
	//
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
	// Retention bounds the scheduled backups kept; older ones are deleted together with their stored
	// snapshots. The newest successful backup is always kept.
	// +optional
	Retention *BackupRetention `json:"retention,omitempty"`
	// Destination is where scheduled backups, and EtcdBackups that name none, are stored.
	Destination BackupDestination `json:"destination"`
	// FinalSnapshot takes a last backup when the EtcdCluster is deleted, if the cluster answers;
	// deletion never waits for a cluster that does not.
	// +optional
	FinalSnapshot bool `json:"finalSnapshot,omitempty"`
}

// BackupRetention bounds the scheduled backups kept: by count, by age, or both.
type BackupRetention struct {
	// MaxCount keeps at most this many scheduled backups.
	//
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxCount *int32 `json:"maxCount,omitempty"`
	// MaxAge deletes scheduled backups older than this, such as "168h".
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// BootstrapSpec is how a new cluster's data is initialised.
type BootstrapSpec struct {
	// Restore creates the cluster from a snapshot: every member restores the same snapshot before etcd
	// starts; the cluster gets a new cluster ID.
	// +optional
	Restore *RestoreSpec `json:"restore,omitempty"`
}

// RestoreSpec names the snapshot to restore: an EtcdBackup, or a key in a destination.
//
// +kubebuilder:validation:XValidation:rule="has(self.backupRef) != has(self.source)",message="bootstrap.restore needs exactly one of backupRef or source"
type RestoreSpec struct {
	// BackupRef names a Succeeded EtcdBackup in the same namespace.
	// +optional
	BackupRef *LocalObjectReference `json:"backupRef,omitempty"`
	// Source is a snapshot in a destination, by key.
	// +optional
	Source *RestoreSource `json:"source,omitempty"`
}

// RestoreSource is a stored snapshot.
type RestoreSource struct {
	// Destination holds the snapshot.
	Destination BackupDestination `json:"destination"`
	// Key of the snapshot in the destination (as EtcdBackup status.key reports it): a relative path
	// without empty, "." or ".." segments or control characters.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(e, e == '' || e == '.' || e == '..')",message="restore.source.key must be a relative path such as 'apps/demo/nightly-1.db', as an EtcdBackup's status.key reports it: no leading or trailing '/', no empty, '.' or '..' segment (the snapshot is looked up inside the destination, never outside it)"
	// +kubebuilder:validation:XValidation:rule=`!self.matches('\\p{Cc}')`,message="restore.source.key must not contain control characters such as a newline or tab"
	Key string `json:"key"`
	// SHA256 is the snapshot's expected hex sha256; when empty, the one recorded next to the snapshot
	// is used.
	//
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +optional
	SHA256 string `json:"sha256,omitempty"`
}

// RecoverySpec says what the operator may do on its own to repair a cluster: replace members that stay
// down, and recreate a cluster whose quorum is lost for good.
type RecoverySpec struct {
	// RestoreOnQuorumLoss lets the operator recreate the cluster from the most up-to-date copy of its
	// data when quorum is lost and cannot come back: the members whose data is kept (their claims, or
	// for storage.emptyDir their pods) are fewer than a quorum of the voting members etcd last listed.
	// First each of those survivors is copied by an EtcdBackup of its own (spec.member, to
	// spec.backup.destination, which must be set when a survivor exists); a survivor that cannot be
	// copied is never deleted, and the recovery waits, saying why. Then the copy with the highest
	// revision, among the survivors' snapshots and the cluster's successful backups, is chosen; the
	// members are deleted, with their claims, and recreated from it under a new cluster ID.
	// status.recovery records the copy used and the revisions known to be lost (0 when a survivor was
	// as current as anything the operator saw). Without it (the default) the operator reports the loss
	// in the Available condition and an event, and changes nothing: quorum loss with data kept is always
	// waited out, never restored over.
	// +optional
	RestoreOnQuorumLoss bool `json:"restoreOnQuorumLoss,omitempty"`
	// ReplaceUnhealthyMemberAfter is how long a member may be down, while etcd still lists it, before the
	// operator replaces it: its pod is present but etcd in it does not answer (a crash loop, a pod that
	// cannot be scheduled or pull its image, a corrupt or lost data directory, a pod stuck terminating
	// on a lost node, a member cut off from the network). After half of it the operator deletes the pod
	// once, so that it is recreated with the current spec on its own data; after all of it, it removes
	// the member from etcd, deletes its pod and claim, and adds a new member (a new member ID, an empty
	// data directory) that copies the data from its peers. A member is only ever replaced while the
	// healthy voters without it still make a quorum. Default 5m; "0s" never replaces a member on its own
	// (the pod is still recreated once, after 2m30s); otherwise at least 20s, since a new member that is
	// still starting (its claim provisioned, its image pulled) is down too. A member that is down because
	// its image cannot be pulled is never replaced: its replacement would run the same spec.
	//
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$') || duration(self) == duration('0s') || duration(self) >= duration('20s')",message="must be 0s (never replace) or at least 20s, such as 5m: a shorter one replaces members that are only restarting or still starting"
	// +optional
	ReplaceUnhealthyMemberAfter *metav1.Duration `json:"replaceUnhealthyMemberAfter,omitempty"`
	// RollBackFailedRollouts (default true) lets the operator roll back a rolling update onto a spec
	// that cannot run: a member the rollout restarted while it served, that has not served on the new
	// spec for replaceUnhealthyMemberAfter while no other member serves on it, has its pod recreated on
	// its own data from the spec it served on (which the operator keeps, while this is on, in a
	// ControllerRevision named <cluster>-<spec hash>), and the rollout restarts no member onto that spec
	// until it changes (Progressing RolloutFailed). Not for a change of the etcd minor version on which
	// the member's etcd ran. false: a member down on such a spec waits, not replaced, until the spec is
	// fixed or undone.
	// +optional
	RollBackFailedRollouts *bool `json:"rollBackFailedRollouts,omitempty"`
}

// RollsBackFailedRollouts reports whether spec.recovery.rollBackFailedRollouts is true or unset (its
// default).
func (s *EtcdClusterSpec) RollsBackFailedRollouts() bool {
	return s.Recovery == nil || s.Recovery.RollBackFailedRollouts == nil || *s.Recovery.RollBackFailedRollouts
}

// DefaultReplaceUnhealthyMemberAfter is spec.recovery.replaceUnhealthyMemberAfter when it is not set.
const DefaultReplaceUnhealthyMemberAfter = 5 * time.Minute

// ReplaceAfter returns how long a member may be down before it is replaced (spec.recovery
// .replaceUnhealthyMemberAfter, DefaultReplaceUnhealthyMemberAfter when unset); 0 means never.
func (s *EtcdClusterSpec) ReplaceAfter() time.Duration {
	if s.Recovery == nil || s.Recovery.ReplaceUnhealthyMemberAfter == nil {
		return DefaultReplaceUnhealthyMemberAfter
	}
	return s.Recovery.ReplaceUnhealthyMemberAfter.Duration
}

// RecreateAfter returns how long a member may be down before its pod is deleted once to be recreated:
// half of ReplaceAfter, or of the default when replacing is off.
func (s *EtcdClusterSpec) RecreateAfter() time.Duration {
	if d := s.ReplaceAfter(); d > 0 {
		return d / 2
	}
	return DefaultReplaceUnhealthyMemberAfter / 2
}

// RecoveryPhase is where an automatic restore after a quorum loss is.
//
// +kubebuilder:validation:Enum=Deleting;Restoring;Succeeded
type RecoveryPhase string

// The phases of an automatic restore.
const (
	// RecoveryDeleting: the lost cluster's member pods and claims are being deleted.
	RecoveryDeleting RecoveryPhase = "Deleting"
	// RecoveryRestoring: new members restore the snapshot and form a new cluster.
	RecoveryRestoring RecoveryPhase = "Restoring"
	// RecoverySucceeded: the new cluster answered.
	RecoverySucceeded RecoveryPhase = "Succeeded"
)

// RecoveryStatus is an automatic restore from a backup after a quorum loss without data.
type RecoveryStatus struct {
	// Phase is Deleting (the lost cluster's pods and claims are being deleted; turning
	// spec.recovery.restoreOnQuorumLoss off, or the lost cluster answering again, cancels the restore
	// then), Restoring (new members restore the snapshot; it runs to the end) or Succeeded.
	Phase RecoveryPhase `json:"phase"`
	// Backup is the EtcdBackup restored.
	Backup string `json:"backup"`
	// Key and SHA256 of the snapshot restored, as the backup reported them.
	Key    string `json:"key"`
	SHA256 string `json:"sha256,omitempty"`
	// Destination holds the snapshot, as resolved when the restore was decided (the backup's own, or
	// the cluster's spec.backup.destination then); later changes of the spec do not move it.
	// +optional
	Destination *BackupDestination `json:"destination,omitempty"`
	// Revision the snapshot holds: writes after it were lost.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// BackupCompletionTime is when the restored backup was taken.
	// +optional
	BackupCompletionTime *metav1.Time `json:"backupCompletionTime,omitempty"`
	// SurvivorSnapshots are the EtcdBackups that copied the members that kept their data, before any of
	// them was deleted.
	// +optional
	SurvivorSnapshots []string `json:"survivorSnapshots,omitempty"`
	// LostRevisions is how many revisions are known to be lost: the highest revision the operator saw
	// (status.revision before the loss, the survivors' snapshots, the backups) minus Revision; 0 when the
	// copy restored was as current as any of them. Writes acknowledged only by the members whose data
	// is gone, after the operator last looked, cannot be known. Set when the restore is decided.
	// +optional
	LostRevisions *int64 `json:"lostRevisions,omitempty"`
	// PreviousClusterID is the cluster ID (hex) of the cluster that was lost; the restored cluster has
	// another one.
	// +optional
	PreviousClusterID string `json:"previousClusterID,omitempty"`
	// LostMembers are the members whose data was gone.
	// +optional
	LostMembers []string `json:"lostMembers,omitempty"`
	// StartTime is when the operator decided to restore; CompletionTime when the new cluster answered.
	StartTime metav1.Time `json:"startTime"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// LocalObjectReference names an object in the namespace of the object that refers to it. Unlike
// Kubernetes' core LocalObjectReference, the name is required.
type LocalObjectReference struct {
	// Name of the object.
	//
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// LastBackup is the newest successful backup of a cluster.
type LastBackup struct {
	// Name of the EtcdBackup.
	Name string `json:"name"`
	// CompletionTime of the backup.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Location of the snapshot.
	// +optional
	Location string `json:"location,omitempty"`
	// Revision the snapshot holds.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// SizeBytes of the snapshot.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
}

func init() {
	SchemeBuilder.Register(&EtcdBackup{}, &EtcdBackupList{})
}
