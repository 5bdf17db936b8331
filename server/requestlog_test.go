package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/log"
)

// logBuffer is a bytes.Buffer that a server's goroutines may log into while the test reads it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines decodes the log so far, one JSON object per line.
func (l *logBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if line == "" {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		out = append(out, v)
	}
	return out
}

// find returns the log lines with message msg whose fields include want.
func (l *logBuffer) find(t *testing.T, msg string, want map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range l.lines(t) {
		match := line["msg"] == msg
		for k, v := range want {
			match = match && line[k] == v
		}
		if match {
			out = append(out, line)
		}
	}
	return out
}

// newLogBuffer is a debug-level JSON logger writing into a logBuffer.
func newLogBuffer() (*logBuffer, *log.Logger) {
	buf := &logBuffer{}
	return buf, log.NewWithOptions(buf, log.Options{Level: log.DebugLevel, Formatter: log.JSONFormatter})
}

// wantLine checks one request log line: level, message, the exact fields in want and a
// duration, and nothing else.
func wantLine(t *testing.T, line map[string]any, level, msg string, want map[string]any) {
	t.Helper()
	if line["level"] != level || line["msg"] != msg {
		t.Errorf("line %v: level %v msg %v, want %s %s", line, line["level"], line["msg"], level, msg)
	}
	d, ok := line["duration"].(string)
	if _, err := time.ParseDuration(d); !ok || err != nil {
		t.Errorf("line %v: duration %v is not a duration", line, line["duration"])
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("line %v: %s = %#v, want %#v", line, k, line[k], v)
		}
	}
	if len(line) != len(want)+3 { // level, msg, duration
		t.Errorf("line %v: %d fields, want exactly %v with level, msg and duration", line, len(line), want)
	}
}

// TestRequestLog checks the request log lines of a generation and of a poll: method, path,
// status, duration and, for the generation, the prompt and predicted token counts it answered.
func TestRequestLog(t *testing.T) {
	buf, logger := newLogBuffer()
	srv := New(Config{Alias: "stories260K"}, logger)
	t.Cleanup(srv.Close)
	srv.SetBackend(newFakeBackend(t))
	h := &harness{srv: srv, h: srv.Handler()}

	rec := h.do(t, "POST", "/completion", `{"prompt":"Once upon a time","n_predict":4}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("/completion: %d %s", rec.Code, rec.Body)
	}
	resp := decodeJSON(t, rec.Body.Bytes())
	if resp["tokens_predicted"] != 4.0 || resp["tokens_evaluated"] != 17.0 {
		t.Fatalf("/completion counted %v predicted, %v evaluated; want 4 and 17", resp["tokens_predicted"], resp["tokens_evaluated"])
	}
	if rec := h.do(t, "GET", "/health", ""); rec.Code != http.StatusOK {
		t.Fatalf("/health: %d", rec.Code)
	}
	if rec := h.do(t, "POST", "/tokenize", `{"content":"nope`); rec.Code != http.StatusBadRequest {
		t.Fatalf("bad JSON: %d", rec.Code)
	}

	lines := buf.find(t, "request", nil)
	if len(lines) != 3 {
		t.Fatalf("%d request lines, want 3: %v", len(lines), buf.lines(t))
	}
	wantLine(t, lines[0], "info", "request", map[string]any{
		"method": "POST", "path": "/completion", "status": 200.0, "prompt_tokens": 17.0, "predicted_tokens": 4.0,
	})
	// A successful poll logs at debug level, without token counts.
	wantLine(t, lines[1], "debug", "request", map[string]any{"method": "GET", "path": "/health", "status": 200.0})
	wantLine(t, lines[2], "info", "request", map[string]any{"method": "POST", "path": "/tokenize", "status": 400.0})
}

// TestRequestLogDetached: a resumable stream whose client left is logged when the request ends,
// with the status it had sent and no tokens yet; when the detached generation finishes, a second
// line reports its tokens, the same counts a whole answer reports.
func TestRequestLogDetached(t *testing.T) {
	buf, logger := newLogBuffer()
	gate := newGatedBackend(newFakeBackend(t), 2)
	srv := New(Config{Alias: "stories260K"}, logger)
	srv.SetBackend(gate)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close)
	s := &streamServer{url: ts.URL, srv: srv, gate: gate}

	ctx, drop := context.WithCancel(context.Background())
	resp := s.send(t, ctx, "POST", "/v1/chat/completions", storyChat, conversation("log-1"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST: status %d", resp.StatusCode)
	}
	readEvents(t, bufio.NewReader(resp.Body), 2) // the generation is held after two results
	drop()
	resp.Body.Close()

	post := map[string]any{"method": "POST", "path": "/v1/chat/completions"}
	for deadline := time.Now().Add(time.Minute); len(buf.find(t, "request", post)) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the dropped request was not logged: %v", buf.lines(t))
		}
	}
	if got := buf.find(t, "detached generation finished", nil); len(got) != 0 {
		t.Fatalf("a detached line before the generation ended: %v", got)
	}
	close(gate.release)
	s.replay(t, "log-1", 0) // follows the stream to its end, after its tokens were noted

	// The same conversation, whole and not resumable: the counts the detached line must report.
	status, body := s.body(t, "POST", "/v1/chat/completions", strings.Replace(storyChat, `"stream":true`, `"stream":false`, 1))
	if status != http.StatusOK {
		t.Fatalf("whole answer: %d %s", status, body)
	}
	usage := decodeJSON(t, []byte(body))["usage"].(map[string]any)
	prompt, predicted := usage["prompt_tokens"], usage["completion_tokens"]
	if prompt != 127.0 || predicted != 14.0 {
		t.Errorf("usage %v, want 127 prompt and 14 completion tokens (the fake's story)", usage)
	}

	lines := buf.find(t, "request", post)
	if len(lines) != 2 {
		t.Fatalf("%d request lines for the POSTs, want 2: %v", len(lines), buf.lines(t))
	}
	wantLine(t, lines[0], "info", "request", map[string]any{"method": "POST", "path": "/v1/chat/completions", "status": 200.0, "conversation": "log-1"})
	wantLine(t, lines[1], "info", "request", map[string]any{
		"method": "POST", "path": "/v1/chat/completions", "status": 200.0, "prompt_tokens": prompt, "predicted_tokens": predicted,
	})
	detached := buf.find(t, "detached generation finished", nil)
	if len(detached) != 1 {
		t.Fatalf("%d detached lines, want 1: %v", len(detached), buf.lines(t))
	}
	wantLine(t, detached[0], "info", "detached generation finished", map[string]any{
		"method": "POST", "path": "/v1/chat/completions", "conversation": "log-1", "status": 200.0,
		"prompt_tokens": prompt, "predicted_tokens": predicted,
	})
	// The replay is a request of its own, logged once it has relayed the stream.
	if got := buf.find(t, "request", map[string]any{"method": "GET", "path": "/v1/stream/log-1", "status": 200.0}); len(got) != 1 {
		t.Errorf("replay lines %v, want 1", got)
	}
}
