package etcd

import (
	"errors"
	"testing"
)

func TestFormatID(t *testing.T) {
	for _, tc := range []struct {
		id   uint64
		want string
	}{
		{0x8e9e05c52164694d, "8e9e05c52164694d"},
		{0x1, "0000000000000001"},
		{0xffffffffffffffff, "ffffffffffffffff"},
	} {
		if got := FormatID(tc.id); got != tc.want {
			t.Errorf("FormatID(%#x) = %q, want %q", tc.id, got, tc.want)
		}
	}
}

func TestParseID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"8e9e05c52164694d", 0x8e9e05c52164694d},
		{"8E9E05C52164694D", 0x8e9e05c52164694d},
		{"0000000000000001", 1},
		{"1", 1}, // etcdctl does not pad
		{"ffffffffffffffff", 0xffffffffffffffff},
	} {
		got, err := ParseID(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseID(%q) = %#x, %v; want %#x", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "0", "0000000000000000", "0x1", "g", "-1", "+1", " 1", "1_0", "10000000000000000", "00000000000000001"} {
		if got, err := ParseID(in); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseID(%q) = %#x, %v; want ErrInvalidID", in, got, err)
		}
	}
}

func TestIDRoundTrip(t *testing.T) {
	for _, id := range []uint64{1, 0xabc, 0x8e9e05c52164694d, 1 << 63} {
		got, err := ParseID(FormatID(id))
		if err != nil || got != id {
			t.Errorf("ParseID(FormatID(%#x)) = %#x, %v", id, got, err)
		}
	}
}
