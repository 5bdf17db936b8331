package resumable

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"
)

// Defaults for Config's zero values.
const (
	DefaultBufferBytes = 4 << 20
	DefaultTTL         = 300 * time.Second
	DefaultGCInterval  = 60 * time.Second
	// DefaultMaxSessions bounds the memory streams may hold (at most 256 MiB of buffers).
	DefaultMaxSessions = 64
)

var (
	// ErrRunning reports a Start with the id of a session that is still running.
	ErrRunning = errors.New("resumable: a stream with this id is still running")
	// ErrClosed reports a Start after Close.
	ErrClosed = errors.New("resumable: the store is closed")
	// ErrFull reports a Start while MaxSessions sessions are running.
	ErrFull = errors.New("resumable: too many streams are running")
)

// Config sets a Store's limits; zero values take the defaults.
type Config struct {
	// BufferBytes is how many of its newest bytes each session keeps.
	BufferBytes int
	// TTL is how long a session stays after it ended.
	TTL time.Duration
	// GCInterval is how often expired sessions are removed.
	GCInterval time.Duration
	// Clock is the time source; nil is SystemClock.
	Clock Clock
	// MaxSessions is how many sessions the store holds at once; when it is full, a new one
	// replaces the session that ended longest ago, or fails with ErrFull if all are running.
	MaxSessions int
	// EndEvent, when set, makes the last bytes of a session with id cancelled for reason after
	// it produced some: the stream format's error event, so no stream just stops.
	EndEvent func(id string, reason error) []byte
}

// Store holds sessions by id. Sessions that ended expire TTL later; a garbage collector started
// with the first session removes them every GCInterval until Close.
type Store struct {
	cfg Config

	mu       sync.Mutex
	sessions map[string]*Session
	closed   bool
	gcStop   chan struct{} // nil until the collector runs
	gcDone   chan struct{}
}

// NewStore returns an empty store.
func NewStore(cfg Config) *Store {
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = DefaultBufferBytes
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.GCInterval <= 0 {
		cfg.GCInterval = DefaultGCInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	return &Store{cfg: cfg, sessions: map[string]*Session{}}
}

// Start creates a running session under id whose Context derives from parent, replacing a
// session with that id that has ended. It fails with ErrRunning while one is still running and
// with ErrClosed after Close.
func (st *Store) Start(parent context.Context, id string) (*Session, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, ErrClosed
	}
	old, replacing := st.sessions[id]
	if replacing && old.Info().Status == Running {
		return nil, ErrRunning
	}
	if !replacing && len(st.sessions) >= st.cfg.MaxSessions && !st.dropOldestEnded() {
		return nil, ErrFull
	}
	s := newSession(parent, id, st.cfg.BufferBytes, st.cfg.Clock, st.cfg.EndEvent)
	st.sessions[id] = s
	if st.gcStop == nil {
		st.gcStop, st.gcDone = make(chan struct{}), make(chan struct{})
		ticks, stop := st.cfg.Clock.Ticker(st.cfg.GCInterval)
		go st.collect(ticks, stop)
	}
	return s, nil
}

// dropOldestEnded removes the session that ended longest ago; it reports false when every
// session is still running. The caller holds st.mu.
func (st *Store) dropOldestEnded() bool {
	oldest := ""
	var at time.Time
	for id, s := range st.sessions {
		if end, ok := s.endTime(); ok && (oldest == "" || end.Before(at)) {
			oldest, at = id, end
		}
	}
	if oldest == "" {
		return false
	}
	delete(st.sessions, oldest)
	return true
}

// collect sweeps on every tick until Close.
func (st *Store) collect(ticks <-chan time.Time, stop func()) {
	defer close(st.gcDone)
	defer stop()
	for {
		select {
		case <-ticks:
			st.Sweep()
		case <-st.gcStop:
			return
		}
	}
}

// Get returns the session with id, if there is one.
func (st *Store) Get(id string) (*Session, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.sessions[id]
	return s, ok
}

// Lookup reports the sessions among ids that exist, in the order named, each once; it says
// nothing about any session not named.
func (st *Store) Lookup(ids []string) []Info {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := []Info{}
	seen := map[string]bool{}
	for _, id := range ids {
		if s, ok := st.sessions[id]; ok && !seen[id] {
			seen[id] = true
			out = append(out, s.Info())
		}
	}
	return out
}

// LookupConversations is llama-server's lookup: for each of ids in turn, the session named id
// and those named id + "::" + anything (one conversation's streams, one per model), each once.
func (st *Store) LookupConversations(ids []string) []Info {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := []Info{}
	seen := map[string]bool{}
	for _, id := range ids {
		var family []string
		for name := range st.sessions {
			if !seen[name] && (name == id || strings.HasPrefix(name, id+"::")) {
				family = append(family, name)
			}
		}
		sort.Strings(family)
		for _, name := range family {
			seen[name] = true
			out = append(out, st.sessions[name].Info())
		}
	}
	return out
}

// Remove cancels the session with id (reason ErrCancelled) and removes it from the store, as
// llama-server's DELETE does; followers still reading it finish reading what it holds. It
// reports whether there was such a session.
func (st *Store) Remove(id string) bool {
	st.mu.Lock()
	s, ok := st.sessions[id]
	delete(st.sessions, id)
	st.mu.Unlock()
	if ok {
		s.Cancel(ErrCancelled)
	}
	return ok
}

// Sweep removes the sessions that ended TTL or longer ago and returns how many it removed.
// Followers still reading a removed session finish reading what it holds.
func (st *Store) Sweep() int {
	now := st.cfg.Clock.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	n := 0
	for id, s := range st.sessions {
		if s.expired(now, st.cfg.TTL) {
			delete(st.sessions, id)
			n++
		}
	}
	return n
}

// Close cancels every running session (reason ErrShutdown) and stops the collector; Start fails from then on.
// The sessions stay readable until the store is dropped.
func (st *Store) Close() {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return
	}
	st.closed = true
	for _, s := range st.sessions {
		s.Cancel(ErrShutdown)
	}
	stop, done := st.gcStop, st.gcDone
	st.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}
