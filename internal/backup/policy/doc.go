// Package policy holds the pure parts of backups, which the controller and the admission webhooks
// need without the code that moves bytes (package backup: S3, directories, etcd's snapshot and
// restore libraries): the key a backup is stored under (Key, ManifestKey), the Result record a backup
// Job reports, when a schedule is due (ParseSchedule, MissedSchedule, SchedulePeriod) and which
// backups a retention policy deletes (Prune). It does no I/O and imports no storage or etcd package.
package policy
