package membership

import "testing"

// TestQuorum: a majority of the voters; an even count needs as many as the odd count above it.
func TestQuorum(t *testing.T) {
	for voters, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4, 9: 5} {
		if got := Quorum(voters); got != want {
			t.Errorf("Quorum(%d) = %d, want %d", voters, got, want)
		}
	}
}
