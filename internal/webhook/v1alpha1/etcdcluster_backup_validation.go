package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	etcdv1alpha1 "github.com/etcdkit/etcd-operator/api/v1alpha1"
	"github.com/etcdkit/etcd-operator/internal/backup/policy"
)

// validateBackup returns what is wrong with spec.backup b (old is the previous one, nil on create):
// a schedule that does not parse (five cron fields or a descriptor such as @daily or @every 6h, see
// policy.ParseSchedule) or fires more often than once a minute, a timeZone that is not an IANA name the operator knows, a retention with
// neither maxCount nor maxAge, or a maxAge that is not positive. An unchanged spec.backup is not
// checked again.
func validateBackup(old, b *etcdv1alpha1.BackupSpec) field.ErrorList {
	if b == nil || equality.Semantic.DeepEqual(old, b) {
		return nil
	}
	p := specPath.Child("backup")
	var errs field.ErrorList
	if b.TimeZone != "" {
		if _, err := policy.ParseSchedule("@daily", b.TimeZone); err != nil {
			errs = append(errs, field.Invalid(p.Child("timeZone"), b.TimeZone, err.Error()))
		}
	}
	if b.Schedule != "" {
		if _, err := policy.ParseSchedule(b.Schedule, ""); err != nil {
			errs = append(errs, field.Invalid(p.Child("schedule"), b.Schedule, err.Error()))
		}
	}
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
