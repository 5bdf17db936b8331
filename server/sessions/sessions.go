// Package sessions keeps the agent loop's conversations (server_tools with session_id): each
// session's whole history, tool calls and results included, so that a client can send only
// its new messages. The store is in memory and bounded: at most Max sessions, the least
// recently used evicted first, and a session unused for TTL expires.
package sessions

import (
	"container/list"
	"slices"
	"sync"
	"time"
)

// Session is one conversation: its history in the form the server keeps messages, and the
// text of the messages a user sees (system, user and assistant text, in order), by which a
// request that resends the conversation finds it.
type Session[M any] struct {
	ID      string
	History []M
	Visible []string
}

// Store holds sessions by id.
type Store[M any] struct {
	max int
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	byID map[string]*list.Element // of *entry[M]
	lru  *list.List               // most recently used first
}

type entry[M any] struct {
	s    Session[M]
	used time.Time
}

// New returns a store of at most max sessions, each expiring ttl after its last use; now is
// the clock (nil: time.Now).
func New[M any](max int, ttl time.Duration, now func() time.Time) *Store[M] {
	if now == nil {
		now = time.Now
	}
	return &Store[M]{max: max, ttl: ttl, now: now, byID: map[string]*list.Element{}, lru: list.New()}
}

// Get returns the session id, marking it used.
func (st *Store[M]) Get(id string) (Session[M], bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expire()
	el, ok := st.byID[id]
	if !ok {
		return Session[M]{}, false
	}
	e := el.Value.(*entry[M])
	e.used = st.now()
	st.lru.MoveToFront(el)
	return clone(e.s), true
}

// Match returns the session whose visible messages begin visible and are fewer (the request
// resends that conversation and adds to it), the longest such, marking it used.
func (st *Store[M]) Match(visible []string) (Session[M], bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expire()
	var best *list.Element
	for el := st.lru.Front(); el != nil; el = el.Next() {
		s := el.Value.(*entry[M]).s
		if len(s.Visible) > 0 && len(s.Visible) < len(visible) && slices.Equal(s.Visible, visible[:len(s.Visible)]) &&
			(best == nil || len(s.Visible) > len(best.Value.(*entry[M]).s.Visible)) {
			best = el
		}
	}
	if best == nil {
		return Session[M]{}, false
	}
	e := best.Value.(*entry[M])
	e.used = st.now()
	st.lru.MoveToFront(best)
	return clone(e.s), true
}

// Put stores s under its id, replacing what was there, and evicts the least recently used
// sessions beyond the bound.
func (st *Store[M]) Put(s Session[M]) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expire()
	e := &entry[M]{s: clone(s), used: st.now()}
	if el, ok := st.byID[s.ID]; ok {
		el.Value = e
		st.lru.MoveToFront(el)
	} else {
		st.byID[s.ID] = st.lru.PushFront(e)
	}
	for st.lru.Len() > st.max {
		st.remove(st.lru.Back())
	}
}

// Len is the number of sessions kept.
func (st *Store[M]) Len() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expire()
	return st.lru.Len()
}

// expire drops the sessions unused for ttl (the least recently used are at the back).
func (st *Store[M]) expire() {
	now := st.now()
	for el := st.lru.Back(); el != nil && now.Sub(el.Value.(*entry[M]).used) >= st.ttl; el = st.lru.Back() {
		st.remove(el)
	}
}

func (st *Store[M]) remove(el *list.Element) {
	delete(st.byID, el.Value.(*entry[M]).s.ID)
	st.lru.Remove(el)
}

// clone copies a session's slices, so that callers and the store never share them.
func clone[M any](s Session[M]) Session[M] {
	s.History = slices.Clone(s.History)
	s.Visible = slices.Clone(s.Visible)
	return s
}
