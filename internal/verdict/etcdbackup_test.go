package verdict

import (
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a longer message", 10, "a longe..."},
		{"ab→cd and more", 7, "ab..."}, // "→" is bytes 2-4: a cut at byte 4 would split it
	} {
		got := Truncate(tc.s, tc.n)
		if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q, want %q (at most %d bytes, valid UTF-8)", tc.s, tc.n, got, tc.want, tc.n)
		}
	}
}
