package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/model/chat/toolcall"
)

// thinkingOutput is a reasoning model's answer in pieces.
var thinkingOutput = []string{"<think>", "Let me", " think.", "</think>", "\n\nHello", " there."}

// chatResult is what a chat answer says, whole or streamed: content, reasoning and the finish
// reason; streamed, also the chunks' delta kinds in order (runs collapsed).
type chatResult struct {
	content, reasoning, finish string
	kinds                      []string
}

// chatAnswer posts a chat request and reads its answer.
func chatAnswer(t *testing.T, h *harness, body string) chatResult {
	t.Helper()
	rec := h.do(t, "POST", "/v1/chat/completions", body)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if !strings.Contains(body, `"stream":true`) {
		v := decodeJSON(t, rec.Body.Bytes())
		msg := lookup(t, v, "choices.0.message").(map[string]any)
		r := chatResult{finish: lookup(t, v, "choices.0.finish_reason").(string)}
		r.content, _ = msg["content"].(string)
		r.reasoning, _ = msg["reasoning_content"].(string)
		return r
	}
	var r chatResult
	for _, ev := range jsonEvents(t, sseEvents(t, rec.Body.String())) {
		choices := ev["choices"].([]any)
		if len(choices) == 0 {
			continue
		}
		c := choices[0].(map[string]any)
		if fr, ok := c["finish_reason"].(string); ok {
			r.finish = fr
		}
		d := c["delta"].(map[string]any)
		kind := ""
		if s, ok := d["content"].(string); ok {
			r.content += s
			kind = "content"
		}
		if s, ok := d["reasoning_content"].(string); ok {
			r.reasoning += s
			kind = "reasoning"
		}
		if kind != "" && (len(r.kinds) == 0 || r.kinds[len(r.kinds)-1] != kind) {
			r.kinds = append(r.kinds, kind)
		}
	}
	return r
}

func TestReasoningFormats(t *testing.T) {
	const raw = "<think>Let me think.</think>\n\nHello there."
	tests := []struct {
		name   string
		cfg    toolcall.ReasoningFormat
		extra  string
		stream bool
		want   chatResult
	}{
		{name: "auto", want: chatResult{content: "Hello there.", reasoning: "Let me think."}},
		{name: "auto streamed", stream: true,
			want: chatResult{content: "Hello there.", reasoning: "Let me think.", kinds: []string{"reasoning", "content"}}},
		{name: "none", extra: `"reasoning_format":"none"`, want: chatResult{content: raw}},
		{name: "none streamed", extra: `"reasoning_format":"none"`, stream: true, want: chatResult{content: raw, kinds: []string{"content"}}},
		{name: "server none", cfg: toolcall.ReasoningNone, want: chatResult{content: raw}},
		{name: "request overrides server", cfg: toolcall.ReasoningNone, extra: `"reasoning_format":"deepseek"`,
			want: chatResult{content: "Hello there.", reasoning: "Let me think."}},
		{name: "legacy", extra: `"reasoning_format":"deepseek-legacy"`, want: chatResult{content: "Hello there.", reasoning: "Let me think."}},
		// deepseek-legacy keeps the reasoning, tags and all, in the streamed content.
		{name: "legacy streamed", extra: `"reasoning_format":"deepseek-legacy"`, stream: true,
			want: chatResult{content: "<think>Let me think.</think>Hello there.", kinds: []string{"content"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarnessConfig(t, Config{Alias: "stories260K", ReasoningFormat: tt.cfg})
			h.fake.output = thinkingOutput
			body := `{"messages":[{"role":"user","content":"Hi"}]`
			if tt.extra != "" {
				body += "," + tt.extra
			}
			if tt.stream {
				body += `,"stream":true`
			}
			got := chatAnswer(t, h, body+"}")
			tt.want.finish = "stop"
			if got.content != tt.want.content || got.reasoning != tt.want.reasoning || got.finish != tt.want.finish ||
				strings.Join(got.kinds, " ") != strings.Join(tt.want.kinds, " ") {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// thinkingTemplate opens a <think> block in the generation prompt, as QwQ's and DeepSeek R1's
// do, and shows enable_thinking. (Its final newline is dropped, as Jinja drops a template's.)
const thinkingTemplate = `{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}[thinking={{ enable_thinking }}]<|im_start|>assistant
<think>
`

func TestThinkingForcedOpen(t *testing.T) {
	// The prompt ends inside <think>: the answer starts with reasoning.
	h := newTemplateHarness(t, thinkingTemplate, nil)
	h.fake.output = []string{"Let me", " think.</think>", "Hello."}
	for _, stream := range []bool{false, true} {
		body := `{"messages":[{"role":"user","content":"Hi"}]`
		if stream {
			body += `,"stream":true`
		}
		got := chatAnswer(t, h, body+"}")
		if got.reasoning != "Let me think." || got.content != "Hello." {
			t.Errorf("stream=%v: %+v", stream, got)
		}
	}
	if p := h.fake.tok.Detokenize(h.fake.lastTask(t).Prompt, false, true); !strings.HasSuffix(p, "[thinking=True]<|im_start|>assistant\n<think>") {
		t.Errorf("prompt %q", p)
	}

	// --reasoning-budget 0: the template sees enable_thinking false, the open block is closed
	// and the answer is all content.
	fake := newFakeBackend(t)
	fake.info.ChatTemplate, fake.info.NCtx = thinkingTemplate, 2048
	fake.output = []string{"Let me", " think.</think>", "Hello."}
	srv := New(Config{Alias: "stories260K", DisableThinking: true}, testLogger())
	srv.SetBackend(fake)
	h = &harness{srv: srv, fake: fake, h: srv.Handler()}
	got := chatAnswer(t, h, `{"messages":[{"role":"user","content":"Hi"}]}`)
	if got.reasoning != "" || got.content != "Let me think.</think>Hello." {
		t.Errorf("thinking off: %+v", got)
	}
	if p := fake.tok.Detokenize(fake.lastTask(t).Prompt, false, true); !strings.HasSuffix(p, "[thinking=False]<|im_start|>assistant\n<think></think>") {
		t.Errorf("thinking off: prompt %q", p)
	}
	// A request may turn it back on.
	got = chatAnswer(t, h, `{"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"enable_thinking":true}}`)
	if got.reasoning != "Let me think." || got.content != "Hello." {
		t.Errorf("thinking on again: %+v", got)
	}
	if p := fake.tok.Detokenize(fake.lastTask(t).Prompt, false, true); !strings.Contains(p, "[thinking=True]") {
		t.Errorf("thinking on again: prompt %q", p)
	}
}
