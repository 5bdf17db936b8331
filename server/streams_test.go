package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/server/resumable"
)

// storyChat is the chat_nonstream capture's request as a stream: greedy, 16 tokens.
const storyChat = `{"model":"stories260K","messages":[{"role":"system","content":"You are a storyteller."},` +
	`{"role":"user","content":"Tell me a story about Lily."}],"max_tokens":16,"temperature":0,"seed":42,"stream":true}`

// endlessChat generates until its context is full, or forever on the fake backend.
const endlessChat = `{"messages":[{"role":"user","content":"Hi"}],"n_predict":-1,"ignore_eos":true,"temperature":0,"stream":true}`

// gatedBackend passes its backend's results through but, for the first task only, holds them
// after the first open ones until release is closed or the task's context ends, so a test can
// act while a generation is certainly still running.
type gatedBackend struct {
	Backend
	open    int
	release chan struct{}
	armed   atomic.Bool
	// drawn counts the results the gated task took from the backend; ended is closed when the
	// backend closed that task's channel (the generation is over).
	drawn atomic.Int64
	ended chan struct{}
}

func newGatedBackend(b Backend, open int) *gatedBackend {
	g := &gatedBackend{Backend: b, open: open, release: make(chan struct{}), ended: make(chan struct{})}
	g.armed.Store(true)
	return g
}

func (g *gatedBackend) Submit(ctx context.Context, t engine.Task) (<-chan engine.Result, error) {
	in, err := g.Backend.Submit(ctx, t)
	if err != nil || !g.armed.Swap(false) {
		return in, err
	}
	out := make(chan engine.Result)
	go func() {
		defer close(g.ended)
		defer close(out)
		passed := 0
		for res := range in {
			g.drawn.Add(1)
			if passed == g.open {
				select {
				case <-g.release:
				case <-ctx.Done():
				}
			}
			select {
			case out <- res:
				passed++
			case <-ctx.Done():
				for range in {
					g.drawn.Add(1)
				}
				return
			}
		}
	}()
	return out, nil
}

// streamServer is a server on a loopback port whose backend is gated.
type streamServer struct {
	url  string
	srv  *Server
	gate *gatedBackend
}

func newStreamServer(t *testing.T, b Backend, open int) *streamServer {
	t.Helper()
	gate := newGatedBackend(b, open)
	srv := New(Config{Alias: "stories260K"}, testLogger())
	srv.SetBackend(gate)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close) // before ts.Close: it ends the followers ts.Close would wait for
	return &streamServer{url: ts.URL, srv: srv, gate: gate}
}

// send makes one request and returns the response, failing the test on transport errors.
func (s *streamServer) send(t *testing.T, ctx context.Context, method, path, body string, header http.Header) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// body makes one request and returns its status and whole body.
func (s *streamServer) body(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	resp := s.send(t, context.Background(), method, path, body, nil)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp.StatusCode, string(data)
}

// replay is GET /v1/stream/{id}?from=N, which must succeed.
func (s *streamServer) replay(t *testing.T, id string, from int) string {
	t.Helper()
	status, body := s.body(t, "GET", fmt.Sprintf("/v1/stream/%s?from=%d", id, from), "")
	if status != http.StatusOK {
		t.Fatalf("GET from=%d: status %d: %s", from, status, body)
	}
	return body
}

// readEvents reads n whole events from an event stream and returns their bytes.
func readEvents(t *testing.T, r *bufio.Reader, n int) string {
	t.Helper()
	var sb strings.Builder
	for range 2 * n { // "data: ...\n" then "\n"
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading an event: %v (after %q)", err, sb.String())
		}
		sb.WriteString(line)
	}
	return sb.String()
}

// conversation is the header that makes a chat stream resumable.
func conversation(id string) http.Header { return http.Header{"X-Conversation-Id": {id}} }

// TestResumableReattach is the acceptance test: a client drops a resumable stream while its
// generation is held, the generation goes on to the end, and the client reattaches with the
// count of bytes it had; what it gets completes the stream byte for byte.
func TestResumableReattach(t *testing.T) {
	for _, wb := range wireBackends {
		t.Run(wb.name, func(t *testing.T) {
			s := newStreamServer(t, wb.load(t), 2)
			ctx, drop := context.WithCancel(context.Background())
			resp := s.send(t, ctx, "POST", "/v1/chat/completions", storyChat, conversation("story-1"))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("POST: status %d", resp.StatusCode)
			}
			wantStreamHeaders(t, resp.Header)
			// The role chunk and the first content; the generation is held after two results.
			received := readEvents(t, bufio.NewReader(resp.Body), 2)
			drop()
			resp.Body.Close()
			close(s.gate.release)

			rest := s.replay(t, "story-1", len(received)) // follows the stream to its end
			full := s.replay(t, "story-1", 0)
			if received+rest != full {
				t.Fatalf("received + rest differs from the whole stream:\n%q\n+ %q\n!= %q", received, rest, full)
			}
			events := sseEvents(t, full)
			if events[len(events)-1] != "[DONE]" {
				t.Errorf("the stream does not end with [DONE]: %q", events[len(events)-1])
			}
			want := ", there was a little girl named Lily. She loved to play\n"
			if wb.real {
				want = "\"Here,\" Annabyed.\n" // the chat_nonstream capture's greedy content
			}
			if got := chatStreamText(t, events); got != want {
				t.Errorf("content %q, want %q", got, want)
			}
			status, body := s.body(t, "POST", "/v1/streams/lookup", `{"ids":["story-1","never-started"]}`)
			if wantBody := fmt.Sprintf(`{"streams":[{"id":"story-1","status":"done","bytes":%d,"retained_from":0}]}`, len(full)); status != 200 || body != wantBody {
				t.Errorf("lookup: %d %s, want %s", status, body, wantBody)
			}
			if got := s.replay(t, "story-1", len(full)); got != "" {
				t.Errorf("from the end of a finished stream: %q, want nothing", got)
			}
		})
	}
}

// TestResumableDelete stops an endless generation with DELETE: the engine's task ends, the
// session says cancelled, the POST's response ends and the bytes stop growing.
func TestResumableDelete(t *testing.T) {
	for _, wb := range wireBackends {
		t.Run(wb.name, func(t *testing.T) {
			s := newStreamServer(t, wb.load(t), 2)
			resp := s.send(t, context.Background(), "POST", "/v1/chat/completions", endlessChat, conversation("endless"))
			defer resp.Body.Close()
			r := bufio.NewReader(resp.Body)
			received := readEvents(t, r, 2)

			status, body := s.body(t, "DELETE", "/v1/stream/endless", "")
			rest, err := io.ReadAll(r)
			if err != nil {
				t.Errorf("the POST's response after DELETE: %v; want it to end", err)
			}
			sent := received + string(rest)
			want := fmt.Sprintf(`{"id":"endless","status":"cancelled","bytes":%d,"retained_from":0}`, len(sent))
			if status != http.StatusOK || body != want {
				t.Errorf("DELETE: %d %s, want %s", status, body, want)
			}
			select {
			case <-s.gate.ended:
			case <-time.After(time.Minute):
				t.Fatal("the backend's task did not end after DELETE")
			}
			// Far fewer than the context's 500 tokens: the generation stopped.
			if n := s.gate.drawn.Load(); n > 100 {
				t.Errorf("the backend produced %d results", n)
			}
			if full := s.replay(t, "endless", 0); full != sent || strings.Contains(full, "[DONE]") {
				t.Errorf("the cancelled stream holds %q, want the %d bytes sent before DELETE", full, len(sent))
			}
			if status, body := s.body(t, "POST", "/v1/streams/lookup", `{"ids":["endless"]}`); body != `{"streams":[`+want+`]}` {
				t.Errorf("lookup after DELETE: %d %s", status, body)
			}
			if status, body := s.body(t, "DELETE", "/v1/stream/endless", ""); status != 200 || body != want {
				t.Errorf("a second DELETE: %d %s, want the same status", status, body)
			}
			// The slot is free again: an ordinary request completes.
			status, body = s.body(t, "POST", "/completion", `{"prompt":"Once upon a time","n_predict":16,"temperature":0}`)
			if status != 200 || !strings.Contains(body, `"content":", there was a little girl named Lily. She loved to play`) {
				t.Errorf("a completion after DELETE: %d %s", status, body)
			}
		})
	}
}

// TestResumableDetachesFromClient checks, on the fake, that a dropped client does not cancel
// the backend's task.
func TestResumableDetachesFromClient(t *testing.T) {
	fake := newFakeBackend(t)
	s := newStreamServer(t, fake, 1)
	ctx, drop := context.WithCancel(context.Background())
	resp := s.send(t, ctx, "POST", "/v1/chat/completions", storyChat, conversation("c"))
	readEvents(t, bufio.NewReader(resp.Body), 2)
	drop()
	resp.Body.Close()
	close(s.gate.release)
	<-s.gate.ended
	select {
	case <-fake.cancelled:
		t.Fatal("the client leaving cancelled the generation")
	default:
	}
	if full := s.replay(t, "c", 0); !strings.HasSuffix(full, "data: [DONE]\n\n") {
		t.Errorf("the stream did not complete: %q", full)
	}
}

func TestResumableRecorded(t *testing.T) {
	h := newHarness(t)
	rec := h.doWith(t, "POST", "/v1/chat/completions", storyChat, conversation("r"))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	wantStreamHeaders(t, rec.Header())
	full := rec.Body.String()
	for _, from := range []int{0, 1, 17, len(full) - 1, len(full)} {
		got := h.do(t, "GET", fmt.Sprintf("/v1/stream/r?from=%d", from), "")
		if got.Code != http.StatusOK || got.Body.String() != full[from:] {
			t.Errorf("from=%d: %d %q, want %q", from, got.Code, got.Body, full[from:])
		}
		wantStreamHeaders(t, got.Header())
	}
	// DELETE of a finished stream changes nothing.
	if del := h.do(t, "DELETE", "/v1/stream/r", ""); del.Code != 200 ||
		del.Body.String() != fmt.Sprintf(`{"id":"r","status":"done","bytes":%d,"retained_from":0}`, len(full)) {
		t.Errorf("DELETE of a finished stream: %d %s", del.Code, del.Body)
	}
	// A finished id can be used again; the old stream is replaced.
	again := h.doWith(t, "POST", "/v1/chat/completions", storyChat, conversation("r"))
	if again.Code != http.StatusOK || h.do(t, "GET", "/v1/stream/r", "").Body.String() != again.Body.String() {
		t.Errorf("reusing a finished id: %d", again.Code)
	}
}

func TestResumableErrors(t *testing.T) {
	h := newHarnessConfig(t, Config{Alias: "stories260K", Streams: resumable.Config{BufferBytes: 64}})
	// The POST's own relay may fall behind so small a ring (and end early, or answer 400 when it
	// had sent nothing yet); the session goes on regardless.
	h.doWith(t, "POST", "/v1/chat/completions", storyChat, conversation("small"))
	info, _ := h.srv.streams.Get("small")
	<-info.Context().Done() // the session has ended
	bytes := int(info.Info().Bytes)
	retained := bytes - 64
	if info.Info().Status != resumable.Done || retained <= 0 {
		t.Fatalf("the session is %+v; want it done, with more than the 64 bytes the ring holds", info.Info())
	}
	over := fmt.Sprintf("from=%d is beyond the end of the stream \"small\", which has %d bytes so far", bytes+1, bytes)

	tooLong := strings.Repeat("a", 257)
	tests := []struct {
		name, method, path, body string
		header                   http.Header
		status                   int
		typ, msg                 string
	}{
		{"id too long", "POST", "/v1/chat/completions", storyChat, conversation(tooLong),
			400, "invalid_request_error", "'X-Conversation-Id' (header) must match ^[!-~]{1,256}$"},
		{"id with a bad character", "POST", "/v1/chat/completions", storyChat, conversation("a b"),
			400, "invalid_request_error", "'X-Conversation-Id' (header) must match"},
		{"empty id", "POST", "/v1/chat/completions", storyChat, conversation(""),
			400, "invalid_request_error", "'X-Conversation-Id' (header) must match"},
		{"not streaming", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, conversation("x"),
			400, "invalid_request_error", `X-Conversation-Id makes a resumable stream: it needs "stream": true`},
		{"prompt too long", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + strings.Repeat("x ", 200) + `"}],"stream":true}`, conversation("big"),
			400, "exceed_context_size_error", "the request exceeds the available context size"},
		{"unknown stream", "GET", "/v1/stream/nope", "", nil, 404, "not_found_error", `no stream with id "nope"`},
		{"delete unknown stream", "DELETE", "/v1/stream/nope", "", nil, 404, "not_found_error", `no stream with id "nope"`},
		{"bad path id", "GET", "/v1/stream/a%20b", "", nil, 400, "invalid_request_error", "'id' (path) must match"},
		{"negative from", "GET", "/v1/stream/small?from=-1", "", nil, 400, "invalid_request_error", "'from' (query) must be at least 0 (got -1)"},
		{"from not a number", "GET", "/v1/stream/small?from=ab", "", nil, 400, "invalid_request_error", "'from' (query) must be an integer"},
		{"from past the end", "GET", fmt.Sprintf("/v1/stream/small?from=%d", bytes+1), "", nil, 400, "invalid_request_error", over},
		{"from in the dropped prefix", "GET", "/v1/stream/small?from=3", "", nil, 400, "invalid_request_error",
			fmt.Sprintf("from=3 is before the oldest byte the stream \"small\" still holds (%d): its first %d bytes were dropped", retained, retained)},
		{"lookup with a bad id", "POST", "/v1/streams/lookup", `{"ids":["a b"]}`, nil, 400, "invalid_request_error", "'ids[0]' must match ^[!-~]{1,256}$"},
		{"lookup without ids", "POST", "/v1/streams/lookup", `{}`, nil, 400, "invalid_request_error", "'ids' is required"},
		{"lookup with too many ids", "POST", "/v1/streams/lookup", `{"ids":[` + strings.Repeat(`"a",`, 100) + `"a"]}`, nil, 400, "invalid_request_error", "'ids' is invalid: array: len 101 greater than maximum 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, h.doWith(t, tt.method, tt.path, tt.body, tt.header), tt.status, tt.typ, tt.msg)
		})
	}

	// The retained tail is still served, and lookup reports what was dropped.
	if got := h.do(t, "GET", fmt.Sprintf("/v1/stream/small?from=%d", retained), ""); got.Code != 200 || got.Body.Len() != 64 {
		t.Errorf("from the oldest byte held: %d, %d bytes", got.Code, got.Body.Len())
	}
	lookup := h.do(t, "POST", "/v1/streams/lookup", `{"ids":["small","big"]}`)
	want := fmt.Sprintf(`{"streams":[{"id":"small","status":"done","bytes":%d,"retained_from":%d},{"id":"big","status":"failed","bytes":0,"retained_from":0}]}`, bytes, retained)
	if lookup.Body.String() != want {
		t.Errorf("lookup = %s, want %s", lookup.Body, want)
	}
	// A stream that failed before its first event answers its error.
	wantError(t, h.do(t, "GET", "/v1/stream/big", ""), 400, "exceed_context_size_error", "the request exceeds the available context size")
}

func TestResumableConflict(t *testing.T) {
	s := newStreamServer(t, newFakeBackend(t), 1)
	resp := s.send(t, context.Background(), "POST", "/v1/chat/completions", endlessChat, conversation("busy"))
	defer resp.Body.Close()
	readEvents(t, bufio.NewReader(resp.Body), 2)
	status, body := s.body(t, "POST", "/v1/chat/completions", storyChat)
	if status != http.StatusOK {
		t.Fatalf("an ordinary chat meanwhile: %d %s", status, body)
	}
	second := s.send(t, context.Background(), "POST", "/v1/chat/completions", storyChat, conversation("busy"))
	defer second.Body.Close()
	data, _ := io.ReadAll(second.Body)
	if second.StatusCode != http.StatusConflict || !strings.Contains(string(data), `"type":"conflict_error"`) ||
		!strings.Contains(string(data), `the stream \"busy\" is still running`) {
		t.Errorf("second POST: %d %s, want 409 conflict_error", second.StatusCode, data)
	}
}

func TestResumableFailureAfterStart(t *testing.T) {
	h := newHarness(t)
	h.fake.failAfter, h.fake.finalErr = 2, fmt.Errorf("device lost")
	rec := h.doWith(t, "POST", "/v1/chat/completions", storyChat, conversation("f"))
	events := sseEvents(t, rec.Body.String())
	if last := events[len(events)-1]; rec.Code != 200 || !strings.Contains(last, "device lost") {
		t.Errorf("%d, last event %s: want the error as the last event", rec.Code, last)
	}
	if got := h.do(t, "GET", "/v1/stream/f", ""); got.Body.String() != rec.Body.String() {
		t.Errorf("replay %q, want %q", got.Body, rec.Body)
	}
	if got := h.do(t, "POST", "/v1/streams/lookup", `{"ids":["f"]}`).Body.String(); !strings.Contains(got, `"status":"failed"`) {
		t.Errorf("lookup = %s, want failed", got)
	}
}

// TestResumableExpiry moves a manual clock past the TTL of a finished stream.
func TestResumableExpiry(t *testing.T) {
	clock := resumable.NewManualClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHarnessConfig(t, Config{Alias: "stories260K", Streams: resumable.Config{Clock: clock}})
	h.doWith(t, "POST", "/v1/chat/completions", storyChat, conversation("old"))
	clock.Advance(resumable.DefaultTTL - time.Second)
	h.srv.streams.Sweep()
	if got := h.do(t, "GET", "/v1/stream/old", ""); got.Code != 200 {
		t.Fatalf("a second before expiry: status %d", got.Code)
	}
	clock.Advance(time.Second)
	h.srv.streams.Sweep()
	wantError(t, h.do(t, "GET", "/v1/stream/old", ""), 404, "not_found_error", `no stream with id "old"`)
	if got := h.do(t, "POST", "/v1/streams/lookup", `{"ids":["old"]}`).Body.String(); got != `{"streams":[]}` {
		t.Errorf("lookup after expiry = %s", got)
	}
}

// TestResumableShutdown checks that Close cancels running streams, ending their followers, and
// refuses new ones.
func TestResumableShutdown(t *testing.T) {
	s := newStreamServer(t, newFakeBackend(t), 1)
	resp := s.send(t, context.Background(), "POST", "/v1/chat/completions", endlessChat, conversation("live"))
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	readEvents(t, r, 2)
	s.srv.Close()
	if _, err := io.ReadAll(r); err != nil {
		t.Errorf("the follower's response did not end cleanly: %v", err)
	}
	<-s.gate.ended
	status, _ := s.body(t, "POST", "/v1/chat/completions", storyChat)
	second := s.send(t, context.Background(), "POST", "/v1/chat/completions", storyChat, conversation("new"))
	defer second.Body.Close()
	data, _ := io.ReadAll(second.Body)
	if status != 200 || second.StatusCode != 503 || !strings.Contains(string(data), "the server is shutting down") {
		t.Errorf("after Close: an ordinary chat %d, a resumable one %d %s", status, second.StatusCode, data)
	}
}
