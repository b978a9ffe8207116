package etcd

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrInvalidID is returned (wrapped) by ParseID when its input is not a
// member ID.
var ErrInvalidID = errors.New("invalid etcd member ID")

// FormatID renders a member ID as 16 lower-case hexadecimal digits, zero
// padded, e.g. "8e9e05c52164694d". etcdctl and etcd's own logs print the
// same hexadecimal value without padding (types.ID.String), so the two forms
// differ only for IDs below 1<<60; ParseID accepts both.
func FormatID(id uint64) string {
	return fmt.Sprintf("%016x", id)
}

// ParseID parses a member ID written in hexadecimal as FormatID or etcdctl
// print it: 1 to 16 hex digits, either case, with no "0x" prefix. Zero is
// rejected because etcd reserves it for "no member" (raft.None). Errors wrap
// ErrInvalidID.
func ParseID(s string) (uint64, error) {
	if s == "" || len(s) > 16 {
		return 0, fmt.Errorf("parse member ID %q: %w: want 1 to 16 hex digits", s, ErrInvalidID)
	}
	id, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("parse member ID %q: %w: %w", s, ErrInvalidID, err)
	}
	if id == 0 {
		return 0, fmt.Errorf("parse member ID %q: %w: zero is not a member ID", s, ErrInvalidID)
	}
	return id, nil
}
