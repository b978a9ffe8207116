package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	etcdv1beta1 "github.com/etcdkit/etcd-operator/api/v1beta1"
	"github.com/etcdkit/etcd-operator/internal/backup/policy"
)

// validateBackup returns what is wrong with spec.backup b (old is the previous one, nil on create):
// a schedule that does not parse (five cron fields or a descriptor such as @daily or @every 6h, see
// policy.ParseSchedule) or fires more often than once a minute, a timeZone that is not an IANA name the operator knows, a retention with
// neither maxCount nor maxAge, or a maxAge that is not positive. An unchanged spec.backup is not
// checked again.
func validateBackup(old, b *etcdv1beta1.BackupSpec) field.ErrorList {
	if b == nil || equality.Semantic.DeepEqual(old, b) {
		return nil
	}
	p := specPath.Child("backup")
	errs := validateSchedule(p, b.Schedule, b.TimeZone)
	if r := b.Retention; r != nil {
		rp := p.Child("retention")
		switch {
		case r.MaxCount == nil && r.MaxAge == nil:
			errs = append(errs, field.Required(rp, "set maxCount (how many scheduled backups to keep) or maxAge (how long to keep them, such as 168h), or remove retention to keep every backup"))
		case r.MaxAge != nil && r.MaxAge.Duration <= 0:
			errs = append(errs, field.Invalid(rp.Child("maxAge"), r.MaxAge.Duration.String(), "must be positive, such as 168h"))
		}
	}
	return errs
}

// validateSchedules returns what is wrong with the policies of spec s that run on a schedule,
// spec.backup and spec.maintenance (old is the previous spec, nil on create).
func validateSchedules(old, s *etcdv1beta1.EtcdClusterSpec) field.ErrorList {
	if old == nil {
		return append(validateBackup(nil, s.Backup), validateMaintenance(nil, s.Maintenance)...)
	}
	return append(validateBackup(old.Backup, s.Backup), validateMaintenance(old.Maintenance, s.Maintenance)...)
}

// validateMaintenance returns what is wrong with spec.maintenance m (old is the previous one, nil on
// create): a defragmentation schedule that does not parse or fires more often than once a minute, or a
// timeZone the operator does not know (as for spec.backup). An unchanged spec.maintenance is not
// checked again.
func validateMaintenance(old, m *etcdv1beta1.MaintenanceSpec) field.ErrorList {
	if m == nil || m.Defragmentation == nil || equality.Semantic.DeepEqual(old, m) {
		return nil
	}
	d, p := m.Defragmentation, specPath.Child("maintenance", "defragmentation")
	return validateSchedule(p, d.Schedule, d.TimeZone)
}

// validateSchedule returns what is wrong with the schedule and timeZone fields under p (see
// policy.ParseSchedule); empty ones are not checked.
func validateSchedule(p *field.Path, schedule, timeZone string) field.ErrorList {
	var errs field.ErrorList
	if timeZone != "" {
		if _, err := policy.ParseSchedule("@daily", timeZone); err != nil {
			errs = append(errs, field.Invalid(p.Child("timeZone"), timeZone, err.Error()))
		}
	}
	if schedule != "" {
		if _, err := policy.ParseSchedule(schedule, ""); err != nil {
			errs = append(errs, field.Invalid(p.Child("schedule"), schedule, err.Error()))
		}
	}
	return errs
}
