package backup

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// trailerHash must give the same answers however the stream is cut into writes.
func TestTrailerHashProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		db := rapid.SliceOfN(rapid.Byte(), 0, 4*512).Draw(t, "db")
		db = db[:len(db)/512*512] // whole sectors, as databases are
		stream := withTrailer(db)
		damage := rapid.IntRange(-1, len(stream)-1).Draw(t, "damage")
		if damage >= 0 {
			stream[damage] ^= 0x5a
		}
		th := &trailerHash{h: sha256.New()}
		for rest := stream; len(rest) > 0; {
			n := rapid.IntRange(1, min(len(rest), 100)).Draw(t, "write")
			if w, err := th.Write(rest[:n]); w != n || err != nil {
				t.Fatalf("Write = %d, %v", w, err)
			}
			rest = rest[n:]
		}
		sum, err := th.finish(int64(len(stream)))
		if damage >= 0 {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("damaged byte %d not detected: %v", damage, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("finish: %v", err)
		}
		if want := sha256.Sum256(stream); !bytes.Equal(sum, want[:]) {
			t.Fatalf("sha256 %x, want %x", sum, want)
		}
	})
}
