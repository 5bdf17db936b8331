package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// harness is a server with a fake backend, driven in-process.
type harness struct {
	srv  *Server
	fake *fakeBackend
	h    http.Handler
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessConfig(t, Config{Alias: "stories260K"})
}

func newHarnessConfig(t *testing.T, cfg Config) *harness {
	t.Helper()
	fake := newFakeBackend(t)
	srv := New(cfg, testLogger())
	t.Cleanup(srv.Close)
	srv.SetBackend(fake)
	return &harness{srv: srv, fake: fake, h: srv.Handler()}
}

// do sends one request and returns the recorded response.
func (h *harness) do(t *testing.T, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	return h.doWith(t, method, path, body, nil)
}

// doWith is do with extra request headers.
func (h *harness) doWith(t *testing.T, method, path, body string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.h.ServeHTTP(rec, req)
	return rec
}

// decodeJSON parses a response body into a generic value.
func decodeJSON(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("response is not a JSON object: %v\n%s", err, body)
	}
	return v
}

// lookup follows a dotted path ("choices.0.message.content") through decoded JSON.
func lookup(t *testing.T, v any, path string) any {
	t.Helper()
	for _, key := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[key]; !ok {
				t.Fatalf("no key %q (path %s)", key, path)
			}
		case []any:
			i := 0
			for _, c := range key {
				i = i*10 + int(c-'0')
			}
			if i >= len(x) {
				t.Fatalf("index %d out of range (path %s)", i, path)
			}
			v = x[i]
		default:
			t.Fatalf("cannot index %T with %q (path %s)", v, key, path)
		}
	}
	return v
}

func TestHandlers(t *testing.T) {
	tests := []struct {
		name, method, path, body string
		want                     map[string]any // dotted path -> expected JSON value
		task                     func(t *testing.T, task engine.Task)
	}{
		{
			name: "health", method: "GET", path: "/health",
			want: map[string]any{"status": "ok"},
		},
		{
			name: "models", method: "GET", path: "/v1/models",
			want: map[string]any{
				"object": "list", "data.0.id": "stories260K", "data.0.owned_by": "llamacpp",
				"data.0.meta.n_ctx": 256.0, "data.0.meta.ftype": "all F32", "models.0.name": "stories260K",
			},
		},
		{
			name: "models alias", method: "GET", path: "/models",
			want: map[string]any{"data.0.id": "stories260K"},
		},
		{
			name: "apply-template", method: "POST", path: "/apply-template",
			body: `{"messages":[{"role":"user","content":"Hi"}]}`,
			want: map[string]any{"prompt": "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		},
		{
			name: "apply-template without generation prompt, content parts", method: "POST", path: "/apply-template",
			body: `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"add_generation_prompt":false}`,
			want: map[string]any{"prompt": "<|im_start|>user\na\nb<|im_end|>\n"},
		},
		{
			name: "completion", method: "POST", path: "/completion",
			body: `{"prompt":"Once upon a time","n_predict":8,"temperature":0,"seed":42}`,
			want: map[string]any{
				"content": ", there was a little girl named Lily", "stop": true, "stop_type": "limit",
				"tokens_predicted": 8.0, "model": "stories260K", "prompt": "<s> Once upon a time",
				"generation_settings.n_predict": 8.0, "generation_settings.temperature": 0.0,
				"generation_settings.seed": 42.0, "generation_settings.top_p": 0.949999988079071,
				"generation_settings.stream": false, "timings.predicted_n": 8.0, "has_new_line": false,
			},
			task: func(t *testing.T, task engine.Task) {
				if task.Params.NPredict != 8 || task.Params.Temperature != 0 || task.Params.Seed != 42 {
					t.Errorf("params = %+v", task.Params)
				}
				if task.Prompt[0] != 1 {
					t.Errorf("prompt %v does not start with BOS", task.Prompt)
				}
			},
		},
		{
			name: "completion alias with max_tokens, stop and eos", method: "POST", path: "/completions",
			body: `{"prompt":"x","max_tokens":100,"stop":"Lily","return_tokens":true,"unknown_field":{"a":1}}`,
			want: map[string]any{
				"content": ", there was a little girl named ", "stop_type": "word", "stopping_word": "Lily",
				"generation_settings.stop.0": "Lily", "tokens_predicted": 8.0,
			},
			task: func(t *testing.T, task engine.Task) {
				if task.Params.NPredict != 100 || len(task.Params.Stop) != 1 {
					t.Errorf("params = %+v", task.Params)
				}
			},
		},
		{
			name: "completion to eos", method: "POST", path: "/completion",
			body: `{"prompt":"x","temperature":null,"top_k":-5}`,
			want: map[string]any{
				"stop_type": "eos", "has_new_line": true, "tokens_predicted": 14.0,
				"generation_settings.temperature": 0.800000011920929, "generation_settings.top_k": 0.0,
			},
		},
		{
			name: "completion from token ids and mixed pieces", method: "POST", path: "/completion",
			body: `{"prompt":[1, 300, "ab"],"n_predict":1}`,
			want: map[string]any{"content": ","},
			task: func(t *testing.T, task engine.Task) {
				// No BOS for the string: only a leading string gets one.
				if len(task.Prompt) < 3 || task.Prompt[0] != 1 || task.Prompt[1] != 300 || task.Prompt[2] == 1 {
					t.Errorf("prompt = %v", task.Prompt)
				}
			},
		},
		{
			name: "chat", method: "POST", path: "/v1/chat/completions",
			body: `{"messages":[{"role":"system","content":"You are a storyteller."},{"role":"user","content":"Tell me a story about Lily."}],"max_tokens":16,"temperature":0}`,
			want: map[string]any{
				"object": "chat.completion", "model": "stories260K", "system_fingerprint": "b10587-3f545becc",
				"choices.0.finish_reason": "stop", "choices.0.message.role": "assistant",
				"choices.0.message.content": ", there was a little girl named Lily. She loved to play\n",
				"usage.completion_tokens":   14.0, "timings.predicted_n": 14.0,
			},
		},
		{
			name: "chat echoes the model and prefers max_completion_tokens", method: "POST", path: "/v1/chat/completions",
			body: `{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}],"max_tokens":50,"max_completion_tokens":2}`,
			want: map[string]any{"model": "gpt-4o", "choices.0.message.content": ", there", "usage.completion_tokens": 2.0},
			task: func(t *testing.T, task engine.Task) {
				if task.Params.NPredict != 2 {
					t.Errorf("n_predict = %d, want 2", task.Params.NPredict)
				}
			},
		},
		{
			name: "chat hits the token limit", method: "POST", path: "/v1/chat/completions",
			body: `{"messages":[{"role":"user","content":"Hi"}],"n_predict":3}`,
			want: map[string]any{"choices.0.finish_reason": "length", "usage.completion_tokens": 3.0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			rec := h.do(t, tt.method, tt.path, tt.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
			got := decodeJSON(t, rec.Body.Bytes())
			for path, want := range tt.want {
				if v := lookup(t, got, path); v != want {
					t.Errorf("%s = %#v, want %#v", path, v, want)
				}
			}
			if tt.task != nil {
				tt.task(t, h.fake.lastTask(t))
			}
		})
	}
}

func TestChatIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := newChatID()
		rest, ok := strings.CutPrefix(id, "chatcmpl-")
		if !ok || len(rest) != 32 {
			t.Fatalf("id %q is not chatcmpl- and 32 characters", id)
		}
		for _, c := range rest {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
				t.Fatalf("id %q has %q", id, c)
			}
		}
		if seen[id] {
			t.Fatalf("id %q repeated", id)
		}
		seen[id] = true
	}
}

func TestCORS(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name, method, origin string
		wantStatus           int
		wantHeaders          map[string]string
	}{
		{"preflight", "OPTIONS", "http://example.com", 200, map[string]string{
			"Access-Control-Allow-Origin":      "http://example.com",
			"Access-Control-Allow-Methods":     "GET, POST, DELETE, OPTIONS",
			"Access-Control-Allow-Headers":     "*",
			"Access-Control-Allow-Credentials": "true",
			"Vary":                             "Origin",
		}},
		{"simple request echoes origin", "GET", "http://a.test", 200, map[string]string{"Access-Control-Allow-Origin": "http://a.test"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "/health", nil)
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			rec := httptest.NewRecorder()
			h.h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Errorf("status = %d, want %d", rec.Code, tt.wantStatus)
			}
			for k, want := range tt.wantHeaders {
				vals, ok := rec.Header()[k]
				if !ok || vals[0] != want {
					t.Errorf("%s = %q (present %v), want %q", k, vals, ok, want)
				}
			}
		})
	}
}

func TestPreflightWhileLoading(t *testing.T) {
	srv := New(Config{}, testLogger())
	req := httptest.NewRequest("OPTIONS", "/v1/chat/completions", nil)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Errorf("preflight while loading: status %d, want 200", rec.Code)
	}
}

func TestCurlStyleContentType(t *testing.T) {
	// curl -d sends application/x-www-form-urlencoded; llama-server parses JSON anyway.
	h := newHarness(t)
	req := httptest.NewRequest("POST", "/completion", strings.NewReader(`{"prompt":"hi","n_predict":1}`))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
}
