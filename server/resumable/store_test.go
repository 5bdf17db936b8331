package resumable

import (
	"context"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newTestStore(t *testing.T, bufferBytes int) (*Store, *ManualClock) {
	t.Helper()
	clock := NewManualClock(epoch)
	st := NewStore(Config{BufferBytes: bufferBytes, Clock: clock})
	t.Cleanup(st.Close)
	return st, clock
}

func mustStart(t *testing.T, st *Store, id string) *Session {
	t.Helper()
	s, err := st.Start(context.Background(), id)
	if err != nil {
		t.Fatalf("Start(%q): %v", id, err)
	}
	return s
}

// follow reads a session from off until io.EOF.
func follow(t *testing.T, s *Session, off int64) string {
	t.Helper()
	f, err := s.Follow(context.Background(), off)
	if err != nil {
		t.Fatalf("Follow(%d): %v", off, err)
	}
	got, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("reading from %d: %v", off, err)
	}
	return string(got)
}

func TestSessionFollowLive(t *testing.T) {
	st, _ := newTestStore(t, 1024)
	s := mustStart(t, st, "a")
	s.Write([]byte("data: 1\n\n"))

	f, err := s.Follow(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	go func() {
		b, err := io.ReadAll(f)
		if err != nil {
			t.Errorf("ReadAll: %v", err)
		}
		got <- string(b)
	}()
	s.Write([]byte("data: 2\n\n"))
	s.Finish()
	if g := <-got; g != "data: 1\n\ndata: 2\n\n" {
		t.Errorf("follower read %q", g)
	}
	if _, err := s.Write([]byte("late")); !errors.Is(err, ErrEnded) {
		t.Errorf("Write after Finish = %v, want ErrEnded", err)
	}
	if got := follow(t, s, 9); got != "data: 2\n\n" {
		t.Errorf("from 9: %q", got)
	}
}

func TestSessionOffsets(t *testing.T) {
	st, _ := newTestStore(t, 4)
	s := mustStart(t, st, "a")
	s.Write([]byte("abcdef"))
	if _, err := s.Follow(context.Background(), 1); !errors.Is(err, ErrDropped) {
		t.Errorf("Follow(1) = %v, want ErrDropped", err)
	}
	if _, err := s.Follow(context.Background(), 7); !errors.Is(err, ErrBeyondEnd) {
		t.Errorf("Follow(7) = %v, want ErrBeyondEnd", err)
	}
	// A follower that falls behind the ring learns it on its next read.
	f, err := s.Follow(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("gh"))
	if _, err := f.Read(make([]byte, 8)); !errors.Is(err, ErrDropped) {
		t.Errorf("lagging Read = %v, want ErrDropped", err)
	}
	if want := (Info{ID: "a", Status: Running, Bytes: 8, RetainedFrom: 4, Started: epoch}); s.Info() != want {
		t.Errorf("Info = %+v, want %+v", s.Info(), want)
	}
}

func TestSessionCancel(t *testing.T) {
	st, _ := newTestStore(t, 1024)
	s := mustStart(t, st, "a")
	s.Write([]byte("x"))
	ctx, stop := context.WithCancel(context.Background())
	f, _ := s.Follow(ctx, 1)
	done := make(chan error)
	go func() {
		_, err := f.Read(make([]byte, 8))
		done <- err
	}()
	if !s.Cancel(ErrCancelled) {
		t.Fatal("Cancel of a running session reported false")
	}
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Errorf("waiting follower got %v, want io.EOF", err)
	}
	if s.Context().Err() == nil {
		t.Error("the producer's context is not cancelled")
	}
	s.Finish() // the producer noticing late changes nothing
	if info := s.Info(); info.Status != Cancelled || info.Bytes != 1 {
		t.Errorf("Info = %+v, want cancelled with 1 byte", info)
	}
	if s.Cancel(ErrCancelled) {
		t.Error("a second Cancel reported true")
	}

	// A follower whose own context ends stops waiting with its error.
	s2 := mustStart(t, st, "b")
	f2, _ := s2.Follow(ctx, 0)
	stop()
	if _, err := f2.Read(make([]byte, 8)); !errors.Is(err, context.Canceled) {
		t.Errorf("Read after the follower's context ended = %v", err)
	}
	if s2.Context().Err() != nil {
		t.Error("a follower leaving cancelled the producer")
	}
}

func TestSessionFail(t *testing.T) {
	st, _ := newTestStore(t, 1024)
	s := mustStart(t, st, "a")
	boom := errors.New("boom")
	s.Fail(boom)
	if s.Info().Status != Failed || !errors.Is(s.Err(), boom) {
		t.Errorf("status %s err %v", s.Info().Status, s.Err())
	}
	if got := follow(t, s, 0); got != "" {
		t.Errorf("failed session holds %q", got)
	}
}

func TestStoreStart(t *testing.T) {
	st, _ := newTestStore(t, 1024)
	s := mustStart(t, st, "a")
	if _, err := st.Start(context.Background(), "a"); !errors.Is(err, ErrRunning) {
		t.Errorf("second Start while running = %v, want ErrRunning", err)
	}
	s.Write([]byte("old"))
	s.Finish()
	s2 := mustStart(t, st, "a") // an ended session is replaced
	if got, _ := st.Get("a"); got != s2 || s2.Info().Bytes != 0 {
		t.Error("Start did not replace the ended session")
	}
	st.Close()
	if s2.Info().Status != Cancelled {
		t.Errorf("Close left the session %s", s2.Info().Status)
	}
	if _, err := st.Start(context.Background(), "b"); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
}

func TestStoreLookupPrivacy(t *testing.T) {
	st, _ := newTestStore(t, 1024)
	a := mustStart(t, st, "a")
	a.Write([]byte("12345"))
	a.Finish()
	mustStart(t, st, "secret")
	got := st.Lookup([]string{"nope", "a", "a"})
	want := []Info{{ID: "a", Status: Done, Bytes: 5, Started: epoch, Ended: epoch}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Lookup = %+v, want %+v", got, want)
	}
	if got := st.Lookup(nil); len(got) != 0 {
		t.Errorf("Lookup(nil) = %+v, want nothing", got)
	}
}

func TestStoreSweepTTL(t *testing.T) {
	st, clock := newTestStore(t, 1024)
	running := mustStart(t, st, "running")
	done := mustStart(t, st, "done")
	clock.Advance(10 * time.Second)
	done.Finish()
	clock.Advance(DefaultTTL - time.Second)
	if n := st.Sweep(); n != 0 {
		t.Fatalf("swept %d sessions a second before expiry", n)
	}
	clock.Advance(time.Second)
	if n := st.Sweep(); n != 1 {
		t.Fatalf("swept %d sessions at expiry, want 1", n)
	}
	if _, ok := st.Get("done"); ok {
		t.Error("the expired session is still there")
	}
	if _, ok := st.Get("running"); !ok || running.Info().Status != Running {
		t.Error("a running session expired")
	}
}

// TestStoreCollector drives the collector goroutine with the manual clock: each Advance that
// delivers a tick returns after the collector took it, and the next tick is only taken once
// the previous sweep is over.
func TestStoreCollector(t *testing.T) {
	st, clock := newTestStore(t, 1024)
	s := mustStart(t, st, "a") // starts the collector
	s.Finish()                 // ends at epoch: expires at epoch+300s
	for elapsed := DefaultGCInterval; elapsed < DefaultTTL; elapsed += DefaultGCInterval {
		clock.Advance(DefaultGCInterval) // the sweep at elapsed-60s is over
		if _, ok := st.Get("a"); !ok {
			t.Fatalf("the session was collected %v after it ended", elapsed-DefaultGCInterval)
		}
	}
	clock.Advance(DefaultGCInterval) // delivers the tick at 300s
	clock.Advance(DefaultGCInterval) // returns once the 300s sweep is over
	if _, ok := st.Get("a"); ok {
		t.Error("the collector left an expired session")
	}
	st.Close()
	clock.Advance(DefaultGCInterval) // a stopped collector takes no ticks: this must not block
}

// TestStoreMaxSessions: a full store makes room by dropping the session that ended longest
// ago, and refuses a new one while every session is still running.
func TestStoreMaxSessions(t *testing.T) {
	clock := NewManualClock(epoch)
	st := NewStore(Config{Clock: clock, MaxSessions: 2})
	t.Cleanup(st.Close)
	a, b := mustStart(t, st, "a"), mustStart(t, st, "b")
	if _, err := st.Start(context.Background(), "c"); !errors.Is(err, ErrFull) {
		t.Fatalf("third stream while two run: %v, want ErrFull", err)
	}
	b.Cancel(ErrCancelled)
	clock.Advance(time.Second)
	a.Cancel(ErrCancelled)
	mustStart(t, st, "c")
	if _, ok := st.Get("b"); ok {
		t.Error("the session that ended first was kept")
	}
	if _, ok := st.Get("a"); !ok {
		t.Error("the session that ended last was dropped")
	}
}
