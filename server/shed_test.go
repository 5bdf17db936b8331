package server

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// shedBackend refuses every task as an engine whose queue is full does.
type shedBackend struct{ *fakeBackend }

func (shedBackend) Submit(context.Context, engine.Task) (<-chan engine.Result, error) {
	return nil, engine.ErrQueueFull
}

// TestQueueFull checks load shedding's answer on the generation endpoints: 503 at once, with
// Retry-After and an unavailable_error that names --max-queue.
func TestQueueFull(t *testing.T) {
	srv := New(Config{Alias: "stories260K", Metrics: true}, testLogger())
	srv.SetBackend(shedBackend{newFakeBackend(t)})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	for _, c := range []struct{ path, body string }{
		{"/completion", `{"prompt": "Hello", "n_predict": 4}`},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}`},
		{"/v1/completions", `{"prompt": "Hello", "max_tokens": 4, "stream": true}`},
	} {
		code, header, body := do(t, "POST", ts.URL+c.path, c.body, map[string]string{"Content-Type": "application/json"})
		e := decodeAPIError(t, body)
		if code != 503 || header.Get("Retry-After") != "1" || e.Code != 503 || e.Type != "unavailable_error" || !strings.Contains(e.Message, "--max-queue") {
			t.Errorf("%s: %d, Retry-After %q, %s", c.path, code, header.Get("Retry-After"), body)
		}
	}
}

// apiErrorBody is the "error" object of an error answer.
type apiErrorBody struct {
	Code    int    `json:"code"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

// decodeAPIError reads an error answer's "error" object, failing the test on other bodies.
func decodeAPIError(t *testing.T, body string) apiErrorBody {
	t.Helper()
	var e struct {
		Error apiErrorBody `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not an error answer: %v: %s", err, body)
	}
	return e.Error
}

// queuedBackend reports requests waiting for a slot, as a busy engine's Stats do.
type queuedBackend struct{ *fakeBackend }

func (b queuedBackend) Stats() engine.Stats {
	st := b.fakeBackend.Stats()
	st.Deferred, st.MaxQueue, st.Shed = 3, 8, 2
	return st
}

// TestQueueInSlotsAndMetrics checks that /slots tells the queue's length and limit in its
// headers (its body stays llama-server's array) and /metrics in its series.
func TestQueueInSlotsAndMetrics(t *testing.T) {
	srv := New(Config{Alias: "stories260K", Metrics: true}, testLogger())
	srv.SetBackend(queuedBackend{newFakeBackend(t)})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	code, header, body := do(t, "GET", ts.URL+"/slots", "", nil)
	var slots []map[string]any
	if err := json.Unmarshal([]byte(body), &slots); err != nil || code != 200 || len(slots) != 2 {
		t.Fatalf("/slots: %d %v %s", code, err, body)
	}
	if header.Get("X-Queue-Length") != "3" || header.Get("X-Queue-Limit") != "8" {
		t.Errorf("/slots headers: X-Queue-Length %q, X-Queue-Limit %q; want 3, 8", header.Get("X-Queue-Length"), header.Get("X-Queue-Limit"))
	}
	_, _, metrics := do(t, "GET", ts.URL+"/metrics", "", nil)
	for _, want := range []string{"llamacpp:requests_deferred 3\n", "wgpu_llama_queue_limit 8\n", "wgpu_llama_requests_shed_total 2\n"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
