package v1beta1

// Condition reasons of an EtcdBackup (its types are BackupConditionComplete and BackupConditionFailed).
const (
	// BackupReasonRunning: the backup Job is taking the snapshot (Complete is False meanwhile).
	BackupReasonRunning = "BackupRunning"
	// BackupReasonSnapshotStored: the snapshot was verified and stored (Complete is True, Failed False).
	BackupReasonSnapshotStored = "SnapshotStored"
	// BackupReasonFailed: the backup failed and is not retried (Failed is True, Complete False); the
	// message says why and what to do.
	BackupReasonFailed = "BackupFailed"
)
