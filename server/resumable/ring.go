// Package resumable keeps the bytes of streams that outlive their connections, so that a client
// can reattach to a stream at the byte where it left off and follow it to its end.
//
// A Store holds Sessions by id. A Session is written by one producer (the generation) and read by
// any number of Followers, each from an absolute byte offset: offsets count every byte the session
// ever produced, and the Ring behind it keeps only the newest ones.
package resumable

import "errors"

var (
	// ErrDropped reports an offset before the oldest byte still held.
	ErrDropped = errors.New("resumable: offset is before the oldest byte still held")
	// ErrBeyondEnd reports an offset past the last byte written.
	ErrBeyondEnd = errors.New("resumable: offset is beyond the bytes written")
)

// Ring is a byte buffer of bounded capacity addressed by absolute offsets. When a write would
// exceed the capacity, the oldest bytes are dropped and Start moves forward; offsets of the bytes
// kept never change. Memory grows with what is written, up to the capacity. A Ring is not safe
// for concurrent use.
type Ring struct {
	capacity int
	// buf holds the bytes [start, end). Until end reaches capacity it is linear (len(buf) ==
	// end); from then on len(buf) == capacity and byte o lives at buf[o % capacity]. In both
	// cases byte o is at o % capacity, so the switch needs no copying beyond the growth.
	buf        []byte
	start, end int64
}

// NewRing returns an empty ring holding at most capacity bytes (at least 1).
func NewRing(capacity int) *Ring {
	return &Ring{capacity: max(capacity, 1)}
}

// Start is the absolute offset of the oldest byte held.
func (r *Ring) Start() int64 { return r.start }

// End is the absolute offset one past the newest byte: the count of bytes ever written.
func (r *Ring) End() int64 { return r.end }

// Write appends p, dropping the oldest bytes beyond the capacity. It never fails.
func (r *Ring) Write(p []byte) (int, error) {
	n := len(p)
	c := int64(r.capacity)
	if r.end+int64(len(p)) <= c {
		r.buf = append(r.buf, p...) // still linear
		r.end += int64(len(p))
		return n, nil
	}
	if len(r.buf) < r.capacity {
		grown := make([]byte, r.capacity)
		copy(grown, r.buf)
		r.buf = grown
	}
	if len(p) > r.capacity { // only the tail of p survives
		r.end += int64(len(p) - r.capacity)
		p = p[len(p)-r.capacity:]
	}
	at := int(r.end % c)
	k := copy(r.buf[at:], p)
	copy(r.buf, p[k:])
	r.end += int64(len(p))
	r.start = max(r.start, r.end-c)
	return n, nil
}

// ReadAt copies the bytes from absolute offset off into p and returns how many it copied: fewer
// than len(p) when the end comes first, 0 at the end. It fails with ErrDropped for an offset
// before Start and ErrBeyondEnd for one past End.
func (r *Ring) ReadAt(p []byte, off int64) (int, error) {
	switch {
	case off < r.start:
		return 0, ErrDropped
	case off > r.end:
		return 0, ErrBeyondEnd
	}
	n := int(min(int64(len(p)), r.end-off))
	at := int(off % int64(r.capacity))
	k := copy(p[:n], r.buf[at:])
	copy(p[k:n], r.buf)
	return n, nil
}
