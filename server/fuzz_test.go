package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fuzzRoutes are the endpoints whose request bodies FuzzRequests decodes.
var fuzzRoutes = []string{
	"/completion", "/v1/completions", "/v1/chat/completions", "/chat/completions", "/v1/messages",
	"/v1/responses", "/infill", "/tokenize", "/detokenize", "/apply-template", "/v1/embeddings",
	"/embedding", "/v1/rerank", "/v1/messages/count_tokens", "/lora-adapters", "/slots/0?action=save",
}

// FuzzRequests posts bodies to every endpoint of a server over the fake backend: never a
// panic and never a 500 (bad input is the client's error), in bounded time, whatever the
// JSON's shape.
func FuzzRequests(f *testing.F) {
	for _, seed := range []string{
		`{"prompt": "Hello", "n_predict": 4, "temperature": 0}`,
		`{"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}], "max_tokens": 3, "stream": true}`,
		`{"model": "x", "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}], "tools": [{"name": "f", "input_schema": {"type": "object"}}]}`,
		`{"content": "Hello world", "tokens": [1, 2, 3], "input": ["a", "b"], "query": "q", "documents": ["d"]}`,
		`{"input_prefix": "def f(", "input_suffix": ")", "prompt": [1, 2, "x"], "json_schema": {"type": "integer"}, "grammar": "root ::= \"a\""}`,
		`[{"id": 0, "scale": 0.5}]`,
		`{"prompt": {"nested": [[[[[[[[[[]]]]]]]]]]}, "n_probs": -1, "logit_bias": [[1, false]], "samplers": ["top_k", 3]}`,
	} {
		for i := range fuzzRoutes {
			f.Add(uint8(i), seed)
		}
	}
	srv := New(Config{Alias: "stories260K", Metrics: true, SlotSavePath: f.TempDir()}, testLogger())
	srv.SetBackend(newFakeBackend(f))
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		if len(body) > 1<<16 {
			return
		}
		path := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusNotImplemented && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %q: %d %s", path, body, rec.Code, rec.Body.String())
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s: %v for a %d-byte body", path, d, len(body))
		}
	})
}
