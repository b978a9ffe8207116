package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Bounds of MissedSchedule.
const (
	// maxScheduleLookback bounds how far back missed schedule times are looked for: any standard
	// cron schedule fires at least once a year.
	maxScheduleLookback = 366 * 24 * time.Hour
	// maxScheduleSteps bounds the schedule times stepped through in one call.
	maxScheduleSteps = 600_000
)

// MinScheduleInterval is the shortest time between two scheduled backups. Five cron fields cannot fire
// more often; "@every <duration>" could, down to every second, and each backup snapshots the whole
// database and runs a Job: backups would pile up faster than they finish.
const MinScheduleInterval = time.Minute

// ParseSchedule parses spec.backup.schedule — five cron fields or a descriptor such as "@hourly"
// or "@every 6h" (robfig/cron's standard parser) — in spec.backup.timeZone (an IANA name; empty
// means UTC). It returns an error saying what is wrong with either, or that the schedule fires more
// often than MinScheduleInterval.
func ParseSchedule(schedule, timeZone string) (cron.Schedule, error) {
	loc := time.UTC
	if timeZone != "" {
		var err error
		if loc, err = time.LoadLocation(timeZone); err != nil {
			return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as \"Europe/Berlin\" or \"UTC\"", timeZone)
		}
	}
	if strings.HasPrefix(schedule, "TZ=") || strings.HasPrefix(schedule, "CRON_TZ=") {
		return nil, fmt.Errorf("schedule %q names a time zone: set the timeZone field beside it instead", schedule)
	}
	sched, err := cron.ParseStandard(schedule)
	if err != nil {
		return nil, fmt.Errorf("schedule %q is not a cron expression (\"minute hour day-of-month month day-of-week\", or @hourly, @daily, @every <duration>): %w", schedule, err)
	}
	if every, ok := sched.(cron.ConstantDelaySchedule); ok && every.Delay < MinScheduleInterval {
		return nil, fmt.Errorf("schedule %q fires more often than once a minute: a backup (a snapshot of the whole database) or a defragmentation would not finish before the next one is due; use an interval of at least 1m, such as \"@every 15m\" or \"*/15 * * * *\"", schedule)
	}
	if ss, ok := sched.(*cron.SpecSchedule); ok {
		ss.Location = loc
	}
	return sched, nil
}

// MissedSchedule returns the newest schedule time after earliest and not after now (zero when
// there is none), how many schedule times that span holds (bounded: it looks back at most a year),
// and the first schedule time after now (zero when the schedule never fires again). Like a CronJob,
// the caller runs one backup for the newest missed time only, however many were missed.
func MissedSchedule(sched cron.Schedule, earliest, now time.Time) (last time.Time, missed int, next time.Time) {
	if lb := now.Add(-maxScheduleLookback); earliest.Before(lb) {
		earliest = lb
	}
	t := sched.Next(earliest)
	for !t.IsZero() && !t.After(now) && missed < maxScheduleSteps {
		last, missed = t, missed+1
		t = sched.Next(t)
	}
	for !t.IsZero() && !t.After(now) { // only when maxScheduleSteps stopped the loop
		t = sched.Next(t)
	}
	return last, missed, t
}

// SchedulePeriod is the time between the two schedule times that follow now (zero when the schedule
// does not fire twice more).
func SchedulePeriod(sched cron.Schedule, now time.Time) time.Duration {
	a := sched.Next(now)
	if a.IsZero() {
		return 0
	}
	b := sched.Next(a)
	if b.IsZero() {
		return 0
	}
	return b.Sub(a)
}
