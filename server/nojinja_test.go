package server

import (
	"net/http"
	"testing"
)

// TestNoJinja: with --no-jinja the model's template renders in the built-in format its markers
// name, a template none matches falls back to ChatML, and tools are refused.
func TestNoJinja(t *testing.T) {
	const llama3ish = `{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{{ m.content }}{% endfor %}`
	for _, tt := range []struct{ modelTmpl, want string }{
		{llama3ish, "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{`{{ messages[0].content }}`, "<|im_start|>user\n Hi <|im_end|>\n<|im_start|>assistant\n"},
	} {
		fake := newFakeBackend(t)
		fake.info.ChatTemplate, fake.info.NCtx = tt.modelTmpl, 2048
		srv := New(Config{Alias: "stories260K", NoJinja: true}, testLogger())
		srv.SetBackend(fake)
		h := &harness{srv: srv, fake: fake, h: srv.Handler()}
		rec := h.do(t, "POST", "/apply-template", `{"messages":[{"role":"user","content":" Hi "}]}`)
		if got, _ := decodeJSON(t, rec.Body.Bytes())["prompt"].(string); got != tt.want {
			t.Errorf("%s: prompt %q, want %q", tt.modelTmpl, got, tt.want)
		}
	}

	fake := newFakeBackend(t)
	fake.info.NCtx = 2048
	srv := New(Config{Alias: "stories260K", NoJinja: true}, testLogger())
	srv.SetBackend(fake)
	h := &harness{srv: srv, fake: fake, h: srv.Handler()}
	const msgs = `"messages":[{"role":"user","content":"Hi"}]`
	tools := `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	for _, tt := range []struct{ path, body, msg string }{
		{"/v1/chat/completions", `{` + msgs + `,` + tools + `}`, "tools param requires --jinja flag"},
		{"/apply-template", `{` + msgs + `,` + tools + `}`, "tools param requires --jinja flag"},
		{"/v1/chat/completions", `{` + msgs + `,"tool_choice":"none"}`, "tool_choice param requires --jinja flag"},
	} {
		wantError(t, h.do(t, "POST", tt.path, tt.body), http.StatusBadRequest, "invalid_request_error", tt.msg)
	}
	if rec := h.do(t, "POST", "/v1/chat/completions", `{`+msgs+`,"tool_choice":"auto","tools":[]}`); rec.Code != http.StatusOK {
		t.Errorf("tool_choice auto without tools: %d %s", rec.Code, rec.Body)
	}
}
