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
		var e struct {
			Error struct {
				Code    int    `json:"code"`
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			t.Fatalf("%s: %v: %s", c.path, err, body)
		}
		if code != 503 || header.Get("Retry-After") != "1" || e.Error.Code != 503 || e.Error.Type != "unavailable_error" || !strings.Contains(e.Error.Message, "--max-queue") {
			t.Errorf("%s: %d, Retry-After %q, %s", c.path, code, header.Get("Retry-After"), body)
		}
	}
}
