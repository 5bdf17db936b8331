package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/model/chat"
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

// reasoningTemplate is ChatML that writes an earlier answer's reasoning_content between
// <think> and </think>, as reasoning models' templates do: the autoparser reads its markers.
const reasoningTemplate = `{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.reasoning_content %}<think>
{{ m.reasoning_content }}
</think>

{% endif %}{{ m.content }}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

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
			h := newHarnessConfig(t, Config{Alias: "stories260K", ReasoningFormat: tt.cfg, ChatTemplate: mustTemplate(t, reasoningTemplate)})
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
	// A template that shows no reasoning (ChatML, the fallback) gives the autoparser no markers:
	// as llama-server b10587, the <think> block stays in the content.
	h := newHarnessConfig(t, Config{Alias: "stories260K"})
	h.fake.output = thinkingOutput
	if got := chatAnswer(t, h, `{"messages":[{"role":"user","content":"Hi"}]}`); got.content != raw || got.reasoning != "" {
		t.Errorf("ChatML: %+v, want the whole text as content", got)
	}
}

// thinkingTemplate opens a <think> block in the generation prompt, as QwQ's and DeepSeek R1's
// do, writes earlier reasoning in such blocks and shows enable_thinking.
const thinkingTemplate = `{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}<|im_end|>
{% endfor %}[thinking={{ enable_thinking }}]{% if add_generation_prompt %}<|im_start|>assistant
<think>{% endif %}`

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

	// --reasoning off: the template sees enable_thinking false, the open block is closed and
	// the answer is all content.
	fake := newFakeBackend(t)
	fake.info.ChatTemplate, fake.info.NCtx = thinkingTemplate, 2048
	fake.output = []string{"Let me", " think.</think>", "Hello."}
	srv := New(Config{Alias: "stories260K", Reasoning: chat.ReasoningOff}, testLogger())
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

// TestReasoningBudgetParams: --reasoning-budget and a request's reasoning_budget_tokens (or
// thinking_budget_tokens, or Anthropic's thinking.budget_tokens; the Responses API's too) give the engine a budget over
// <think> blocks, counting at once when the prompt opened one; -1 takes the server's.
func TestReasoningBudgetParams(t *testing.T) {
	two := 2
	fake := newFakeBackend(t)
	fake.info.ChatTemplate, fake.info.NCtx = thinkingTemplate, 2048
	fake.output = []string{"Hello."}
	srv := New(Config{Alias: "stories260K", ReasoningBudget: &two, ReasoningBudgetMessage: "Enough."}, testLogger())
	srv.SetBackend(fake)
	h := &harness{srv: srv, fake: fake, h: srv.Handler()}
	enc := func(s string) []int32 { return fake.tok.Encode(s, false, true) }
	const msgs = `"messages":[{"role":"user","content":"Hi"}]`
	for _, tt := range []struct {
		path, body string
		tokens     int
		message    string
	}{
		{"/v1/chat/completions", `{` + msgs + `}`, 2, "Enough."},
		{"/v1/chat/completions", `{` + msgs + `,"reasoning_budget_tokens":-1}`, 2, "Enough."},
		{"/v1/chat/completions", `{` + msgs + `,"thinking_budget_tokens":7,"reasoning_budget_message":"Stop."}`, 7, "Stop."},
		{"/v1/chat/completions", `{` + msgs + `,"reasoning_budget_tokens":0,"thinking_budget_tokens":7}`, 0, "Enough."},
		{"/v1/messages", `{"max_tokens":4,"thinking":{"type":"enabled","budget_tokens":5},` + msgs + `}`, 5, "Enough."},
		{"/v1/messages", `{"max_tokens":4,"thinking":{"type":"enabled"},` + msgs + `}`, 10000, "Enough."},
		// The Responses API's request becomes a chat request, read as the chat endpoint reads it.
		{"/v1/responses", `{"input":"Hi","reasoning_budget_tokens":3,"reasoning_budget_message":"Halt."}`, 3, "Halt."},
		{"/v1/responses", `{"input":"Hi"}`, 2, "Enough."},
	} {
		if rec := h.do(t, "POST", tt.path, tt.body); rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", tt.body, rec.Code, rec.Body)
		}
		b := fake.lastTask(t).Params.ReasoningBudget
		if b == nil || b.Tokens != tt.tokens || !b.Open || fmt.Sprint(b.Start) != fmt.Sprint(enc("<think>")) ||
			fmt.Sprint(b.End) != fmt.Sprint(enc("</think>")) || fmt.Sprint(b.Forced) != fmt.Sprint(enc(tt.message+"</think>")) {
			t.Errorf("%s: budget %+v", tt.body, b)
		}
	}
	// Without a budget, or with a template that does not think, there is none.
	h2 := newTemplateHarness(t, "", mustTemplate(t, prefillTemplate))
	if rec := h2.do(t, "POST", "/v1/chat/completions", `{`+msgs+`,"reasoning_budget_tokens":3}`); rec.Code != http.StatusOK || h2.fake.lastTask(t).Params.ReasoningBudget != nil {
		t.Errorf("a template without <think>: budget %+v", h2.fake.lastTask(t).Params.ReasoningBudget)
	}
}
