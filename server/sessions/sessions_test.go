package sessions

import (
	"fmt"
	"testing"
	"time"
)

func TestStore(t *testing.T) {
	now := time.Unix(1000, 0)
	st := New[string](3, 30*time.Minute, func() time.Time { return now })
	st.Put(Session[string]{ID: "a", History: []string{"u1", "call", "result", "a1"}, Visible: []string{"u1", "a1"}})
	got, ok := st.Get("a")
	if !ok || fmt.Sprint(got.History) != "[u1 call result a1]" {
		t.Fatalf("get %v %v", got, ok)
	}
	got.History[0] = "changed" // the caller's copy
	if again, _ := st.Get("a"); again.History[0] != "u1" {
		t.Error("the store shares its history with callers")
	}
	// a conversation resent with one more message continues the session; the same or a
	// different one does not
	if s, ok := st.Match([]string{"u1", "a1", "u2"}); !ok || s.ID != "a" {
		t.Errorf("match %v %v", s.ID, ok)
	}
	for _, v := range [][]string{{"u1", "a1"}, {"u1", "x", "u2"}, {"u0"}} {
		if s, ok := st.Match(v); ok {
			t.Errorf("%v matched %s", v, s.ID)
		}
	}
	// the longest kept prefix wins
	st.Put(Session[string]{ID: "b", Visible: []string{"u1", "a1", "u2", "a2"}})
	if s, _ := st.Match([]string{"u1", "a1", "u2", "a2", "u3"}); s.ID != "b" {
		t.Errorf("longest match %s", s.ID)
	}
	// the fourth session evicts the least recently used (c, as a and b were used since)
	st.Put(Session[string]{ID: "c"})
	st.Get("a")
	st.Get("b")
	st.Put(Session[string]{ID: "d"})
	if _, ok := st.Get("c"); ok || st.Len() != 3 {
		t.Errorf("c kept (len %d)", st.Len())
	}
	// idle sessions expire
	now = now.Add(29 * time.Minute)
	st.Get("a")
	now = now.Add(2 * time.Minute)
	if _, ok := st.Get("b"); ok {
		t.Error("b outlived its TTL")
	}
	if _, ok := st.Get("a"); !ok || st.Len() != 1 {
		t.Errorf("a (used 2 minutes ago) expired; len %d", st.Len())
	}
}

// At the server's default bound, the 129th session evicts the least recently used.
func TestStoreBound(t *testing.T) {
	st := New[int](128, time.Hour, nil)
	for i := range 128 {
		st.Put(Session[int]{ID: fmt.Sprint(i)})
	}
	st.Get("0") // used: now 1 is the least recently used
	st.Put(Session[int]{ID: "128"})
	if _, ok := st.Get("1"); ok || st.Len() != 128 {
		t.Errorf("session 1 kept, %d sessions", st.Len())
	}
	if _, ok := st.Get("0"); !ok {
		t.Error("session 0, used last, was evicted")
	}
}
