package server

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestCountChatTokens: /v1/chat/completions/input_tokens (and /chat/completions/input_tokens)
// answer {"input_tokens": N}, N the length of the prompt the chat endpoint submits for the
// same request, and generate nothing; a request the chat endpoint refuses is refused alike.
func TestCountChatTokens(t *testing.T) {
	h := newHarness(t)
	const messages = `"messages":[{"role":"system","content":"Book"},{"role":"user","content":"What is the best book"}]`
	rec := h.do(t, http.MethodPost, "/v1/chat/completions", `{`+messages+`,"max_tokens":1}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("chat: %d %s", rec.Code, rec.Body)
	}
	want := len(h.fake.lastTask(t).Prompt)
	submitted := func() int {
		h.fake.mu.Lock()
		defer h.fake.mu.Unlock()
		return len(h.fake.tasks)
	}
	before := submitted()
	for _, path := range []string{"/v1/chat/completions/input_tokens", "/chat/completions/input_tokens"} {
		rec := h.do(t, http.MethodPost, path, `{`+messages+`}`)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		if body := strings.TrimSpace(rec.Body.String()); body != `{"input_tokens":`+strconv.Itoa(want)+`}` {
			t.Errorf("%s: %s, want input_tokens %d", path, body, want)
		}
	}
	if n := submitted() - before; n != 0 {
		t.Errorf("counting tokens submitted %d tasks", n)
	}
	for _, bad := range []struct{ body, want string }{
		{`{"messages":[]}`, "'messages' must hold at least one message"},
		{`{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"assistant","content":"c"}]}`, "Cannot have 2 or more assistant messages"},
	} {
		rec := h.do(t, http.MethodPost, "/v1/chat/completions/input_tokens", bad.body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), bad.want) {
			t.Errorf("%s: %d %s", bad.body, rec.Code, rec.Body)
		}
	}
}
