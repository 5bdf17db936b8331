package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// wantError checks a response is llama-server's error JSON with the given status and type and
// a message containing msg.
func wantError(t *testing.T, rec *httptest.ResponseRecorder, status int, typ, msg string) {
	t.Helper()
	if rec.Code != status {
		t.Errorf("status = %d, want %d (%s)", rec.Code, status, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	body := decodeJSON(t, rec.Body.Bytes())
	e, ok := body["error"].(map[string]any)
	if !ok || len(body) != 1 {
		t.Fatalf("body is not {\"error\":{...}}: %s", rec.Body)
	}
	if e["code"] != float64(status) || e["type"] != typ {
		t.Errorf("error code/type = %v/%v, want %d/%s", e["code"], e["type"], status, typ)
	}
	if m, _ := e["message"].(string); !strings.Contains(m, msg) {
		t.Errorf("message = %q, want it to contain %q", m, msg)
	}
}

func TestErrors(t *testing.T) {
	longPrompt := `{"prompt":"` + strings.Repeat("x ", 200) + `"}`
	tests := []struct {
		name, method, path, body string
		setup                    func(f *fakeBackend)
		status                   int
		typ, msg                 string
	}{
		{"unknown route", "GET", "/nonexistent", "", nil, 404, "not_found_error", "File Not Found"},
		{"wrong method", "GET", "/completion", "", nil, 405, "invalid_request_error", "allowed: POST"},
		{"bad JSON", "POST", "/completion", `{"prompt":`, nil, 400, "invalid_request_error", "invalid JSON: unexpected EOF"},
		{"not an object", "POST", "/completion", `[1]`, nil, 400, "invalid_request_error", "invalid JSON"},
		{"empty body", "POST", "/completion", ``, nil, 400, "invalid_request_error", "body is empty"},
		{"missing prompt", "POST", "/completion", `{"n_predict":1}`, nil, 400, "invalid_request_error", "'prompt' is required"},
		{"missing messages", "POST", "/v1/chat/completions", `{"max_tokens":2}`, nil, 400, "invalid_request_error", "'messages' is required"},
		{"missing role", "POST", "/v1/chat/completions", `{"messages":[{"content":"x"}]}`, nil, 400, "invalid_request_error", "'messages.role' is required"},
		{"empty messages", "POST", "/v1/chat/completions", `{"messages":[]}`, nil, 400, "invalid_request_error", "at least one message"},
		{"wrong type int", "POST", "/completion", `{"prompt":"x","n_predict":"8"}`, nil, 400, "invalid_request_error", "'n_predict' must be an integer"},
		{"wrong type number", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}`, nil, 400, "invalid_request_error", "'temperature' must be a number"},
		{"wrong type bool", "POST", "/completion", `{"prompt":"x","stream":"yes"}`, nil, 400, "invalid_request_error", "'stream' must be a boolean"},
		{"wrong type stop", "POST", "/completion", `{"prompt":"x","stop":5}`, nil, 400, "invalid_request_error", "'stop' must be a string or an array of strings"},
		{"wrong type content", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, nil, 400, "invalid_request_error", "'messages.content' must be"},
		{"wrong type prompt", "POST", "/completion", `{"prompt":5}`, nil, 400, "invalid_request_error", "'prompt' must be"},
		{"prompt object without prompt_string", "POST", "/completion", `{"prompt":{"a":1}}`, nil, 400, "invalid_request_error", "'prompt.prompt_string' is required"},
		{"n_predict below -1", "POST", "/completion", `{"prompt":"x","n_predict":-2}`, nil, 400, "invalid_request_error", "'n_predict' must be at least -1 (got -2)"},
		{"negative temperature", "POST", "/completion", `{"prompt":"x","temperature":-0.5}`, nil, 400, "invalid_request_error", "'temperature' must be at least 0"},
		{"top_p above 1", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"top_p":1.5}`, nil, 400, "invalid_request_error", "'top_p' must be at most 1 (got 1.5)"},
		{"min_p below 0", "POST", "/completion", `{"prompt":"x","min_p":-1}`, nil, 400, "invalid_request_error", "'min_p' must be at least 0"},
		{"seed out of range", "POST", "/completion", `{"prompt":"x","seed":4294967296}`, nil, 400, "invalid_request_error", "'seed' must be at most"},
		{"n_probs negative", "POST", "/completion", `{"prompt":"x","n_probs":-1}`, nil, 400, "invalid_request_error", "n_probs"},
		{"top_logprobs too many", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}`, nil, 400, "invalid_request_error", "top_logprobs"},
		{"token out of range", "POST", "/completion", `{"prompt":[1,99999]}`, nil, 400, "invalid_request_error", "token 99999 is out of range"},
		{"empty token prompt", "POST", "/completion", `{"prompt":[]}`, nil, 400, "invalid_request_error", "the prompt is empty"},
		{"two assistant messages at the end", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"test"},{"role":"assistant","content":"test"},{"role":"assistant","content":"test"}]}`, nil, 400, "invalid_request_error", "Cannot have 2 or more assistant messages at the end of the list."},
		{"image part", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, nil, 500, "server_error", "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"},
		{"audio part", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, nil, 500, "server_error", "audio input is not supported - hint: if this is unexpected, you may need to provide the mmproj"},
		{"unknown part", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"video"}]}]}`, nil, 400, "invalid_request_error", `messages[0]: content part type "video" is not supported (only "text" and "image_url")`},
		{"prompt too long", "POST", "/completion", longPrompt, nil, 400, "exceed_context_size_error", "the context size is 256"},
		{"engine closed", "POST", "/completion", `{"prompt":"x"}`, func(f *fakeBackend) { f.submitErr = engine.ErrClosed }, 503, "unavailable_error", "shutting down"},
		{"engine failure", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`,
			func(f *fakeBackend) { f.failAfter, f.finalErr = 1, errors.New("device lost") }, 500, "server_error", "device lost"},
		{"early stream failure is a JSON error", "POST", "/completion", `{"prompt":"x","stream":true}`,
			func(f *fakeBackend) { f.failAfter, f.finalErr = 0, errors.New("device lost") }, 500, "server_error", "device lost"},
		{"early chat stream failure is a JSON error", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stream":true}`,
			func(f *fakeBackend) { f.submitErr = engine.ErrPromptTooBig }, 400, "exceed_context_size_error", "exceeds the available context size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			if tt.setup != nil {
				tt.setup(h.fake)
			}
			wantError(t, h.do(t, tt.method, tt.path, tt.body), tt.status, tt.typ, tt.msg)
		})
	}
}

func TestPromptTooLongReportsCounts(t *testing.T) {
	h := newHarness(t)
	prompt := strings.Repeat("x ", 200)
	n := len(tokenize(h.fake.tok, prompt))
	rec := h.do(t, "POST", "/completion", `{"prompt":"`+prompt+`"}`)
	e, _ := decodeJSON(t, rec.Body.Bytes())["error"].(map[string]any)
	if e["n_ctx"] != 256.0 || e["n_prompt_tokens"] != float64(n) {
		t.Errorf("n_ctx/n_prompt_tokens = %v/%v, want 256/%d: %s", e["n_ctx"], e["n_prompt_tokens"], n, rec.Body)
	}
	if want := fmt.Sprintf("the prompt has %d tokens, the context size is 256", n); !strings.Contains(e["message"].(string), want) {
		t.Errorf("message %q lacks %q", e["message"], want)
	}
}

func TestBodyLimit(t *testing.T) {
	h := newHarnessConfig(t, Config{MaxBodyBytes: 64})
	rec := h.do(t, "POST", "/completion", `{"prompt":"`+strings.Repeat("x", 100)+`"}`)
	wantError(t, rec, http.StatusRequestEntityTooLarge, "request_too_large", "limit is 64 bytes")
}

func TestLoading(t *testing.T) {
	srv := New(Config{}, testLogger())
	h := srv.Handler()
	routes := []struct{ method, path, body string }{
		{"GET", "/health", ""},
		{"GET", "/v1/models", ""},
		{"GET", "/models", ""},
		{"POST", "/completion", `{"prompt":"x"}`},
		{"POST", "/completions", `{"prompt":"x"}`},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`},
		{"POST", "/apply-template", `{"messages":[{"role":"user","content":"x"}]}`},
		{"POST", "/tokenize", `{"content":"x"}`},
		{"POST", "/detokenize", `{"tokens":[1]}`},
		{"GET", "/nonexistent", ""},
	}
	for _, r := range routes {
		t.Run(r.method+r.path, func(t *testing.T) {
			req := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			wantError(t, rec, http.StatusServiceUnavailable, "unavailable_error", "Loading model")
			if rec.Body.String() != `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}` {
				t.Errorf("body = %s", rec.Body)
			}
		})
	}
	srv.SetBackend(newFakeBackend(t))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != `{"status":"ok"}` {
		t.Errorf("after SetBackend: %d %s", rec.Code, rec.Body)
	}
}

func TestNotFoundBody(t *testing.T) {
	h := newHarness(t)
	rec := h.do(t, "GET", "/nonexistent", "")
	// Same content as llama-server's {"error":{"message":"File Not Found","type":"not_found_error","code":404}}.
	if rec.Body.String() != `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}` {
		t.Errorf("body = %s", rec.Body)
	}
}
