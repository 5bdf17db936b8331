package server

import (
	"net/http"
	"testing"
)

// prefillTemplate shows each turn and the generation prompt.
const prefillTemplate = `{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}`

// TestAssistantPrefill: a conversation ending with an assistant message is continued, as
// llama-server's prefill_assistant and vLLM's continue_final_message do.
func TestAssistantPrefill(t *testing.T) {
	const user = `{"role":"user","content":"Hi"}`
	tests := []struct {
		name, body, want string
	}{
		{"prefill", `{"messages":[` + user + `,{"role":"assistant","content":"Hel"}]}`, "<user>Hi</user><assistant>Hel"},
		{"text parts joined by blank lines", `{"messages":[` + user + `,{"role":"assistant","content":[{"type":"text","text":"Wh"},{"type":"text","text":"ill"}]}]}`,
			"<user>Hi</user><assistant>Wh\n\nill"},
		{"continue_final_message", `{"add_generation_prompt":false,"continue_final_message":true,"messages":[` + user + `,{"role":"assistant","content":"Hel"}]}`,
			"<user>Hi</user><assistant>Hel"},
		{"no assistant message to continue", `{"messages":[` + user + `]}`, "<user>Hi</user><assistant>"},
		{"add_generation_prompt false alone", `{"add_generation_prompt":false,"messages":[` + user + `]}`, "<user>Hi</user>"},
	}
	for _, tt := range tests {
		for _, path := range []string{"/apply-template", "/v1/chat/completions"} {
			t.Run(tt.name+" "+path, func(t *testing.T) {
				h := newTemplateHarness(t, "", mustTemplate(t, prefillTemplate))
				rec := h.do(t, "POST", path, tt.body)
				if rec.Code != http.StatusOK {
					t.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
				got, want := "", tt.want
				if path == "/apply-template" {
					got, _ = decodeJSON(t, rec.Body.Bytes())["prompt"].(string)
				} else { // the prompt tokens, after the BOS tokenizing adds
					got, want = h.fake.tok.Detokenize(h.fake.lastTask(t).Prompt, false, true), "<s> "+want
				}
				if got != want {
					t.Errorf("prompt %q, want %q", got, want)
				}
			})
		}
	}
}

func TestAssistantPrefillErrors(t *testing.T) {
	const user = `{"role":"user","content":"Hi"}`
	tests := []struct {
		name, body, msg string
	}{
		{"two assistant messages", `{"messages":[` + user + `,{"role":"assistant","content":"a"},{"role":"assistant","content":"b"}]}`,
			"Cannot have 2 or more assistant messages at the end of the list."},
		{"both continuation switches", `{"add_generation_prompt":true,"continue_final_message":true,"messages":[` + user + `,{"role":"assistant","content":"a"}]}`,
			"Cannot use both add_generation_prompt and continue_final_message"},
		{"tool calls", `{"messages":[` + user + `,{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
			"Cannot continue an assistant message that contains tool calls."},
		{"thinking", `{"chat_template_kwargs":{"enable_thinking":true},"messages":[` + user + `,{"role":"assistant","content":"a"}]}`,
			"Assistant response prefill is incompatible with enable_thinking."},
	}
	for _, tt := range tests {
		for _, path := range []string{"/apply-template", "/v1/chat/completions"} {
			t.Run(tt.name+" "+path, func(t *testing.T) {
				h := newTemplateHarness(t, "", mustTemplate(t, prefillTemplate))
				wantError(t, h.do(t, "POST", path, tt.body), http.StatusBadRequest, "invalid_request_error", tt.msg)
			})
		}
	}
}

// TestNoPrefillAssistant: with --no-prefill-assistant a final assistant message is a finished
// turn, unless the request asks to continue it.
func TestNoPrefillAssistant(t *testing.T) {
	fake := newFakeBackend(t)
	fake.info.NCtx = 2048
	tmpl := mustTemplate(t, prefillTemplate)
	srv := New(Config{Alias: "stories260K", ChatTemplate: tmpl, NoPrefillAssistant: true}, testLogger())
	srv.SetBackend(fake)
	h := &harness{srv: srv, fake: fake, h: srv.Handler()}
	for body, want := range map[string]string{
		`{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hel"}]}`:                                                             "<user>Hi</user><assistant>Hel</assistant><assistant>",
		`{"add_generation_prompt":false,"continue_final_message":true,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hel"}]}`: "<user>Hi</user><assistant>Hel",
	} {
		rec := h.do(t, "POST", "/apply-template", body)
		if got, _ := decodeJSON(t, rec.Body.Bytes())["prompt"].(string); got != want {
			t.Errorf("%s: prompt %q, want %q", body, got, want)
		}
	}
}
