package policy

import (
	"cmp"
	"slices"
	"time"
)

// BackupInfo is what retention needs to know about one backup.
type BackupInfo struct {
	// Name identifies the backup (e.g. the EtcdBackup's name); names are unique.
	Name string
	// CompletionTime is when the backup finished, successfully or not; zero while it is in progress.
	CompletionTime time.Time
	// Succeeded is true for a complete, verified backup.
	Succeeded bool
}

// Retention is a retention policy. Zero values mean no limit.
type Retention struct {
	// MaxCount is how many successful backups to keep, and separately how many failed ones.
	MaxCount int
	// MaxAge is how long after its completion a backup is kept.
	MaxAge time.Duration
}

// Prune returns the names of the backups that policy p deletes at now, oldest first:
//   - a backup in progress (zero CompletionTime) is never deleted;
//   - the newest successful backup is never deleted, however old;
//   - with MaxAge > 0, every other completed backup that completed more than MaxAge before now
//     is deleted;
//   - with MaxCount > 0, of the successful backups only the newest MaxCount are kept, and of the
//     failed ones only the newest MaxCount (a failing schedule does not pile up failures).
//
// "Newest" orders by CompletionTime, then by name for equal times. Prune is pure and
// idempotent: pruning what it keeps deletes nothing more.
func Prune(backups []BackupInfo, p Retention, now time.Time) []string {
	done := slices.DeleteFunc(slices.Clone(backups), func(b BackupInfo) bool { return b.CompletionTime.IsZero() })
	// newest first
	slices.SortFunc(done, func(a, b BackupInfo) int {
		if c := b.CompletionTime.Compare(a.CompletionTime); c != 0 {
			return c
		}
		return cmp.Compare(b.Name, a.Name)
	})
	var del []BackupInfo
	var succeeded, failed int
	for _, b := range done {
		rank := &failed
		if b.Succeeded {
			rank = &succeeded
		}
		*rank++
		newestSuccess := b.Succeeded && succeeded == 1
		switch {
		case newestSuccess:
		case p.MaxAge > 0 && now.Sub(b.CompletionTime) > p.MaxAge:
			del = append(del, b)
		case p.MaxCount > 0 && *rank > p.MaxCount:
			del = append(del, b)
		}
	}
	slices.Reverse(del)
	names := make([]string, len(del))
	for i, b := range del {
		names[i] = b.Name
	}
	return names
}
