package resumable

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// readAll reads the ring from off to its end.
func readAll(t *testing.T, r *Ring, off int64) []byte {
	t.Helper()
	p := make([]byte, r.End()-off+1) // one spare byte: ReadAt must stop at the end
	n, err := r.ReadAt(p, off)
	if err != nil {
		t.Fatalf("ReadAt(%d): %v", off, err)
	}
	return p[:n]
}

func TestRingLinear(t *testing.T) {
	r := NewRing(8)
	r.Write([]byte("abc"))
	r.Write([]byte("de"))
	if r.Start() != 0 || r.End() != 5 {
		t.Fatalf("start %d end %d, want 0 5", r.Start(), r.End())
	}
	if got := readAll(t, r, 0); string(got) != "abcde" {
		t.Errorf("from 0: %q", got)
	}
	if got := readAll(t, r, 3); string(got) != "de" {
		t.Errorf("from 3: %q", got)
	}
	if got := readAll(t, r, 5); len(got) != 0 {
		t.Errorf("from the end: %q, want nothing", got)
	}
	p := make([]byte, 2)
	if n, _ := r.ReadAt(p, 1); n != 2 || string(p) != "bc" {
		t.Errorf("short buffer: %d %q", n, p)
	}
}

func TestRingWraparound(t *testing.T) {
	r := NewRing(8)
	r.Write([]byte("abcdef"))  // 0..5
	r.Write([]byte("ghijk"))   // 6..10: drops abc, wraps
	r.Write([]byte("lmnopqr")) // 11..17: wraps again
	if r.Start() != 10 || r.End() != 18 {
		t.Fatalf("start %d end %d, want 10 18", r.Start(), r.End())
	}
	if got := readAll(t, r, 10); string(got) != "klmnopqr" {
		t.Errorf("from start: %q", got)
	}
	if got := readAll(t, r, 15); string(got) != "pqr" {
		t.Errorf("from 15: %q", got)
	}
}

func TestRingOffsets(t *testing.T) {
	r := NewRing(4)
	r.Write([]byte("abcdefgh"))
	tests := []struct {
		off  int64
		want error
	}{{0, ErrDropped}, {3, ErrDropped}, {4, nil}, {8, nil}, {9, ErrBeyondEnd}}
	for _, tt := range tests {
		if _, err := r.ReadAt(make([]byte, 4), tt.off); !errors.Is(err, tt.want) {
			t.Errorf("ReadAt(%d) = %v, want %v", tt.off, err, tt.want)
		}
	}
}

func TestRingWriteLargerThanCapacity(t *testing.T) {
	r := NewRing(4)
	r.Write([]byte("ab"))
	if n, err := r.Write([]byte("cdefghij")); n != 8 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if r.Start() != 6 || r.End() != 10 {
		t.Fatalf("start %d end %d, want 6 10", r.Start(), r.End())
	}
	if got := readAll(t, r, 6); string(got) != "ghij" {
		t.Errorf("kept %q, want ghij", got)
	}
}

// TestRingMatchesModel writes random pieces and checks every offset against a plain slice of
// everything written.
func TestRingMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, capacity := range []int{1, 7, 64} {
		r := NewRing(capacity)
		var all []byte
		for range 300 {
			p := make([]byte, rng.IntN(2*capacity+2))
			for i := range p {
				p[i] = byte(rng.IntN(256))
			}
			r.Write(p)
			all = append(all, p...)
			if r.End() != int64(len(all)) || r.Start() != max(0, int64(len(all)-capacity)) {
				t.Fatalf("cap %d: start %d end %d after %d bytes", capacity, r.Start(), r.End(), len(all))
			}
			off := r.Start() + rng.Int64N(r.End()-r.Start()+1)
			if got := readAll(t, r, off); !bytes.Equal(got, all[off:]) {
				t.Fatalf("cap %d: bytes from %d differ", capacity, off)
			}
		}
	}
}
