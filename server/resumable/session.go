package resumable

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// Status is where a session stands.
type Status string

// A session is Running until it ends in one of the other states; the first end wins.
const (
	Running   Status = "running"
	Done      Status = "done"
	Cancelled Status = "cancelled"
	Failed    Status = "failed"
)

var (
	// ErrEnded is what Write returns once the session has ended: the producer should stop.
	ErrEnded = errors.New("resumable: the session has ended")
	// ErrCancelled is the reason a session stopped by its client (DELETE) was cancelled for.
	ErrCancelled = errors.New("resumable: the stream was cancelled")
	// ErrShutdown is the reason the sessions running at Close were cancelled for.
	ErrShutdown = errors.New("resumable: the server is shutting down")
)

// Info is a session's state as the lookup reports it.
type Info struct {
	ID     string
	Status Status
	// Bytes counts every byte written; RetainedFrom is the offset of the oldest one still held.
	Bytes, RetainedFrom int64
	// Started is when the session started; Ended when it ended, zero while it runs.
	Started, Ended time.Time
}

// Session is one stream: its producer writes bytes with Write and ends it with Finish or Fail;
// Cancel (DELETE, shutdown) ends it from outside and cancels Context, which the producer's work
// runs under. Followers read its bytes from any offset still held.
type Session struct {
	id       string
	ctx      context.Context
	cancel   context.CancelFunc
	clock    Clock
	endEvent func(id string, reason error) []byte // Config.EndEvent

	started time.Time

	mu      sync.Mutex
	ring    *Ring
	status  Status
	err     error
	endedAt time.Time
	// changed is closed and replaced whenever bytes arrive or the session ends.
	changed chan struct{}
}

func newSession(parent context.Context, id string, capacity int, clock Clock, endEvent func(string, error) []byte) *Session {
	ctx, cancel := context.WithCancel(parent)
	return &Session{
		id: id, ctx: ctx, cancel: cancel, clock: clock, endEvent: endEvent, started: clock.Now(),
		ring: NewRing(capacity), status: Running, changed: make(chan struct{}),
	}
}

// ID is the session's id.
func (s *Session) ID() string { return s.id }

// Context is what the producer's work runs under: it is cancelled by Cancel and when the
// session ends, never by a follower leaving.
func (s *Session) Context() context.Context { return s.ctx }

// Write appends p for the followers; after the session ended it appends nothing and fails with
// ErrEnded.
func (s *Session) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status != Running {
		return 0, ErrEnded
	}
	n, _ := s.ring.Write(p)
	s.notify()
	return n, nil
}

// Finish ends a running session as Done.
func (s *Session) Finish() { s.end(Done, nil) }

// Fail ends a running session as Failed with err, which Err reports.
func (s *Session) Fail(err error) { s.end(Failed, err) }

// Cancel ends a running session as Cancelled for reason (ErrCancelled, ErrShutdown), which Err
// reports, and cancels its Context, stopping the producer. A session that has bytes gets the
// store's EndEvent for reason as its last ones, so that its followers, and any replay, see the
// stream end rather than just stop. It reports whether it ended the session (false when it had
// already ended).
func (s *Session) Cancel(reason error) bool { return s.end(Cancelled, reason) }

// end moves a running session to status; later calls change nothing.
func (s *Session) end(status Status, err error) bool {
	s.mu.Lock()
	ended := s.status == Running
	if ended && status == Cancelled && s.ring.End() > 0 && s.endEvent != nil {
		_, _ = s.ring.Write(s.endEvent(s.id, err))
	}
	if ended {
		s.status, s.err, s.endedAt = status, err, s.clock.Now()
		s.notify()
	}
	s.mu.Unlock()
	s.cancel() // the producer has stopped or must stop; either way its context is spent
	return ended
}

// notify wakes every waiting follower; s.mu is held.
func (s *Session) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Err is the error the session failed with or the reason it was cancelled for, nil while it
// runs or when it is Done.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Info reports the session's status and byte counts.
func (s *Session) Info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Info{ID: s.id, Status: s.status, Bytes: s.ring.End(), RetainedFrom: s.ring.Start(), Started: s.started, Ended: s.endedAt}
}

// expired reports whether the session ended at least ttl before now.
func (s *Session) expired(now time.Time, ttl time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status != Running && !now.Before(s.endedAt.Add(ttl))
}

// endTime is when the session ended, and false while it runs.
func (s *Session) endTime() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endedAt, s.status != Running
}

// Follow returns a reader of the session's bytes from absolute offset from on, which waits for
// new bytes until the session ends or ctx is done. It fails with ErrDropped when from is before
// the oldest byte held and ErrBeyondEnd when it is past the bytes written so far.
func (s *Session) Follow(ctx context.Context, from int64) (*Follower, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.ring.ReadAt(nil, from); err != nil {
		return nil, err
	}
	return &Follower{s: s, ctx: ctx, off: from}, nil
}

// Follower reads a session from an offset on; see Session.Follow.
type Follower struct {
	s   *Session
	ctx context.Context
	off int64
}

// Offset is the absolute offset of the next byte Read returns.
func (f *Follower) Offset() int64 { return f.off }

// Read copies the next bytes into p, waiting while the session runs and has nothing new. It
// returns io.EOF once the session has ended and every byte was read, ErrDropped when the
// follower fell so far behind that its next byte was dropped, and ctx's error when ctx is done.
func (f *Follower) Read(p []byte) (int, error) {
	for {
		f.s.mu.Lock()
		n, err := f.s.ring.ReadAt(p, f.off)
		ended := f.s.status != Running
		changed := f.s.changed
		f.s.mu.Unlock()
		f.off += int64(n)
		switch {
		case err != nil:
			return 0, err
		case n > 0 || len(p) == 0:
			return n, nil
		case ended:
			return 0, io.EOF
		}
		select {
		case <-changed:
		case <-f.ctx.Done():
			return 0, f.ctx.Err()
		}
	}
}
