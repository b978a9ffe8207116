package policy

import (
	"testing"
	"time"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMissedSchedule: the newest missed time only (one catch-up however many were missed), how many
// were missed, and the next time; nothing missed before the first time comes.
func TestMissedSchedule(t *testing.T) {
	hourly, err := ParseSchedule("0 * * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, earliest, now, last, next string
		missed                          int
	}{
		{"nothing due yet", "2026-01-10T02:00:00Z", "2026-01-10T02:59:59Z", "", "2026-01-10T03:00:00Z", 0},
		{"exactly due", "2026-01-10T02:00:00Z", "2026-01-10T03:00:00Z", "2026-01-10T03:00:00Z", "2026-01-10T04:00:00Z", 1},
		{"operator down 10 hours: one catch-up for the newest", "2026-01-10T02:00:00Z", "2026-01-10T12:30:00Z", "2026-01-10T12:00:00Z", "2026-01-10T13:00:00Z", 10},
		{"down for two years: bounded look-back", "2024-01-01T00:00:00Z", "2026-01-10T12:30:00Z", "2026-01-10T12:00:00Z", "2026-01-10T13:00:00Z", 366 * 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last, missed, next := MissedSchedule(hourly, mustTime(t, tc.earliest), mustTime(t, tc.now))
			if tc.last == "" && !last.IsZero() || tc.last != "" && !last.Equal(mustTime(t, tc.last)) {
				t.Errorf("last = %v, want %s", last, tc.last)
			}
			if missed != tc.missed || !next.Equal(mustTime(t, tc.next)) {
				t.Errorf("missed %d next %v, want %d %s", missed, next, tc.missed, tc.next)
			}
		})
	}
}

// TestScheduleTimeZone: a schedule runs in its time zone: 02:00 in Berlin is 01:00 UTC in winter
// and 00:00 UTC in summer; without a time zone it is UTC.
func TestScheduleTimeZone(t *testing.T) {
	berlin, err := ParseSchedule("0 2 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	if got := berlin.Next(mustTime(t, "2026-01-10T00:00:00Z")).UTC(); !got.Equal(mustTime(t, "2026-01-10T01:00:00Z")) {
		t.Errorf("winter: %v", got)
	}
	if got := berlin.Next(mustTime(t, "2026-07-10T00:30:00Z")).UTC(); !got.Equal(mustTime(t, "2026-07-11T00:00:00Z")) {
		t.Errorf("summer: %v", got)
	}
	utc, _ := ParseSchedule("@daily", "")
	if got := utc.Next(mustTime(t, "2026-01-10T12:00:00Z")); !got.Equal(mustTime(t, "2026-01-11T00:00:00Z")) {
		t.Errorf("@daily without a time zone: %v", got)
	}
	if p := SchedulePeriod(utc, mustTime(t, "2026-01-10T12:00:00Z")); p != 24*time.Hour {
		t.Errorf("period of @daily = %v", p)
	}
	every, _ := ParseSchedule("@every 90m", "")
	if p := SchedulePeriod(every, mustTime(t, "2026-01-10T12:00:00Z")); p != 90*time.Minute {
		t.Errorf("period of @every 90m = %v", p)
	}
}

// TestParseScheduleErrors: what is wrong is named.
func TestParseScheduleErrors(t *testing.T) {
	for in, tz := range map[string]string{"0 0 * * * *": "", "nope": "", "TZ=UTC 0 * * * *": "", "@daily": "Nowhere/Else"} {
		if _, err := ParseSchedule(in, tz); err == nil {
			t.Errorf("ParseSchedule(%q, %q) accepted", in, tz)
		}
	}
}

// TestScheduleAtMostOncePerMinute: "@every" below a minute is refused with what to write instead (a
// negative or zero one too: robfig/cron would fire it every second); a minute and more is accepted, as
// is every cron expression (five fields cannot fire more often than once a minute).
func TestScheduleAtMostOncePerMinute(t *testing.T) {
	for _, in := range []string{"@every 1s", "@every 59s", "@every 59.9s", "@every 0s", "@every -5m", "@every 500ms"} {
		_, err := ParseSchedule(in, "")
		want := `schedule "` + in + `" fires more often than once a minute: a backup (a snapshot of the whole database) or a defragmentation would not finish before the next one is due; use an interval of at least 1m, such as "@every 15m" or "*/15 * * * *"`
		if err == nil || err.Error() != want {
			t.Errorf("ParseSchedule(%q) = %v, want %q", in, err, want)
		}
	}
	for _, in := range []string{"@every 1m", "@every 60s", "@every 1m30s", "* * * * *", "*/1 * * * *", "@hourly"} {
		if _, err := ParseSchedule(in, ""); err != nil {
			t.Errorf("ParseSchedule(%q): %v", in, err)
		}
	}
}
