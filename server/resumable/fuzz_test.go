package resumable

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzRing drives a ring with writes and reads decoded from the input and checks every read
// against the whole stream kept aside: the bytes from Start on are the stream's, older offsets
// are ErrDropped, later ones ErrBeyondEnd.
func FuzzRing(f *testing.F) {
	f.Add(uint8(7), []byte("hello\x03world, this is a stream\x81\x05"))
	f.Add(uint8(1), []byte{0, 1, 2, 0xff, 3, 0x90, 4})
	f.Add(uint8(64), bytes.Repeat([]byte("data: x\n\n"), 20))
	f.Fuzz(func(t *testing.T, capacity uint8, ops []byte) {
		r := NewRing(int(capacity))
		var all []byte
		for i := 0; i < len(ops); i++ {
			op := ops[i]
			if op&0x80 == 0 { // write the next op&0x3f bytes of the input
				n := min(int(op&0x3f), len(ops)-i-1)
				chunk := ops[i+1 : i+1+n]
				if w, err := r.Write(chunk); w != n || err != nil {
					t.Fatalf("Write(%d bytes) = %d, %v", n, w, err)
				}
				all = append(all, chunk...)
				i += n
				continue
			}
			// read op&0x3f bytes from an offset the next byte picks around the held range
			off := r.Start() - 2
			if i+1 < len(ops) {
				off += int64(ops[i+1]) % (r.End() - r.Start() + 5)
				i++
			}
			p := make([]byte, op&0x3f)
			n, err := r.ReadAt(p, off)
			switch {
			case off < r.Start():
				if !errors.Is(err, ErrDropped) {
					t.Fatalf("ReadAt(%d) before start %d: %v", off, r.Start(), err)
				}
			case off > r.End():
				if !errors.Is(err, ErrBeyondEnd) {
					t.Fatalf("ReadAt(%d) past end %d: %v", off, r.End(), err)
				}
			default:
				want := all[off:min(int64(len(all)), off+int64(len(p)))]
				if err != nil || !bytes.Equal(p[:n], want) {
					t.Fatalf("ReadAt(%d) = %q, %v; want %q", off, p[:n], err, want)
				}
			}
		}
		if r.End() != int64(len(all)) || r.End()-r.Start() > int64(max(int(capacity), 1)) {
			t.Fatalf("start %d end %d after %d bytes, capacity %d", r.Start(), r.End(), len(all), capacity)
		}
	})
}
