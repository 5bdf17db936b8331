package server

import (
	"net/http"
	"testing"
)

// TestLlamaServerAliases hits each of llama-server's aliases once: GET /api/tags answers as GET
// /v1/models, POST /chat/completions and POST /api/chat as POST /v1/chat/completions (JSON and
// streamed).
func TestLlamaServerAliases(t *testing.T) {
	h := newHarness(t)
	models := h.do(t, http.MethodGet, "/v1/models", "")
	if rec := h.do(t, http.MethodGet, "/api/tags", ""); rec.Code != http.StatusOK || rec.Body.String() != models.Body.String() {
		t.Errorf("GET /api/tags: %d %s, want %s", rec.Code, rec.Body, models.Body)
	}
	const body = `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3`
	for _, path := range []string{"/chat/completions", "/api/chat"} {
		rec := h.do(t, http.MethodPost, path, body+`}`)
		v := decodeJSON(t, rec.Body.Bytes())
		if rec.Code != http.StatusOK || v["object"] != "chat.completion" || lookup(t, v, "choices.0.message.content") != ", there was" {
			t.Errorf("POST %s: %d %s", path, rec.Code, rec.Body)
		}
		rec = h.do(t, http.MethodPost, path, body+`,"stream":true}`)
		payloads := sseEvents(t, rec.Body.String())
		if rec.Code != http.StatusOK || payloads[len(payloads)-1] != "[DONE]" || jsonEvents(t, payloads)[0]["object"] != "chat.completion.chunk" {
			t.Errorf("POST %s streamed: %d %s", path, rec.Code, rec.Body)
		}
	}
	// A field of the wrong type is named with the type it needs, as on the original path.
	for _, path := range []string{"/chat/completions", "/api/chat"} {
		rec := h.do(t, http.MethodPost, path, `{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}`)
		if got := lookup(t, decodeJSON(t, rec.Body.Bytes()), "error.message"); rec.Code != http.StatusBadRequest || got != "'temperature' must be a number (or null)" {
			t.Errorf("POST %s with a string temperature: %d %v", path, rec.Code, got)
		}
	}
	// The resumable header works on the aliases too.
	rec := h.doWith(t, http.MethodPost, "/chat/completions", body+`,"stream":true}`, conversation("alias"))
	if replay := h.do(t, http.MethodGet, "/v1/stream/alias", ""); rec.Code != http.StatusOK || replay.Body.String() != rec.Body.String() {
		t.Errorf("resumable alias: %d, replay %q", rec.Code, replay.Body)
	}
	// With --api-key, /api/tags is public as in llama-server and /api/chat is not.
	ts := newKeyServer(t, "k")
	if status, _, body := do(t, http.MethodGet, ts.URL+"/api/tags", "", nil); status != http.StatusOK {
		t.Errorf("GET /api/tags without a key: %d %s", status, body)
	}
	if status, _, body := do(t, http.MethodPost, ts.URL+"/api/chat", `{"messages":[{"role":"user","content":"Hi"}]}`, nil); status != http.StatusUnauthorized || body != invalidKeyBody {
		t.Errorf("POST /api/chat without a key: %d %s", status, body)
	}
}
