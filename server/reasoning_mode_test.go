package server

import (
	"os"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
)

// TestReasoningMode renders llama.cpp's test templates under --reasoning auto, on and off, as
// llama-server's test_template.py::test_reasoning does: auto and on think where the template
// supports it, off closes the block, and a request's enable_thinking wins over the flag.
func TestReasoningMode(t *testing.T) {
	const user = `{"messages":[{"role":"user","content":"What is today?"}]`
	tests := []struct {
		template  string
		reasoning chat.Reasoning
		body      string
		want      string
	}{
		{"Qwen-QwQ-32B", chat.ReasoningAuto, user + "}", "<|im_start|>user\nWhat is today?<|im_end|>\n<|im_start|>assistant\n<think>\n"},
		{"Qwen-QwQ-32B", chat.ReasoningOff, user + "}", "<|im_start|>user\nWhat is today?<|im_end|>\n<|im_start|>assistant\n<think>\n</think>"},
		{"Qwen-QwQ-32B", chat.ReasoningOff, user + `,"chat_template_kwargs":{"enable_thinking":true}}`, "<|im_start|>user\nWhat is today?<|im_end|>\n<|im_start|>assistant\n<think>\n"},
		{"Qwen-Qwen3-0.6B", chat.ReasoningAuto, user + "}", "<|im_start|>user\nWhat is today?<|im_end|>\n<|im_start|>assistant\n"},
		{"Qwen-Qwen3-0.6B", chat.ReasoningOff, user + "}", "<|im_start|>user\nWhat is today?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"Qwen-Qwen3-0.6B", chat.ReasoningOn, user + `,"chat_template_kwargs":{"enable_thinking":false}}`, "<|im_start|>user\nWhat is today?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", chat.ReasoningOn, user + "}", "<｜User｜>What is today?<｜Assistant｜><think>\n"},
		{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", chat.ReasoningOff, user + "}", "<｜User｜>What is today?<｜Assistant｜><think>\n</think>"},
		{"CohereForAI-c4ai-command-r7b-12-2024-tool_use", chat.ReasoningAuto, user + "}", "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
		{"CohereForAI-c4ai-command-r7b-12-2024-tool_use", chat.ReasoningOff, user + "}", "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|><|END_THINKING|>"},
	}
	for _, tt := range tests {
		t.Run(tt.template+" "+tt.reasoning.String(), func(t *testing.T) {
			src, err := os.ReadFile(shareddata.Path(t, "llama-server-tests", "upstream", "models", "templates", tt.template+".jinja"))
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := chat.New(string(src), tt.template)
			if err != nil {
				t.Fatal(err)
			}
			fake := newFakeBackend(t)
			fake.info.NCtx = 8192
			srv := New(Config{Alias: "stories260K", ChatTemplate: &tmpl, Reasoning: tt.reasoning}, testLogger())
			srv.SetBackend(fake)
			h := &harness{srv: srv, fake: fake, h: srv.Handler()}
			rec := h.do(t, "POST", "/apply-template", tt.body)
			got, _ := decodeJSON(t, rec.Body.Bytes())["prompt"].(string)
			if len(got) < len(tt.want) || got[len(got)-len(tt.want):] != tt.want {
				t.Errorf("prompt ends %q, want it to end %q", tail(got, len(tt.want)+20), tt.want)
			}
		})
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// TestServerTemplateKwargs: --chat-template-kwargs are template variables of every request,
// --reasoning on/off sets enable_thinking over them, and a request's own kwargs win.
func TestServerTemplateKwargs(t *testing.T) {
	const src = `[{{ greeting }}|{{ enable_thinking }}]{% for m in messages %}{{ m.content }}{% endfor %}`
	tests := []struct {
		reasoning chat.Reasoning
		body      string
		want      string
	}{
		{chat.ReasoningAuto, `{"messages":[{"role":"user","content":"Hi"}]}`, "[hello|False]Hi"},
		{chat.ReasoningOn, `{"messages":[{"role":"user","content":"Hi"}]}`, "[hello|True]Hi"},
		{chat.ReasoningOn, `{"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"greeting":"hey","enable_thinking":false}}`, "[hey|False]Hi"},
	}
	for _, tt := range tests {
		tmpl := mustTemplate(t, src)
		fake := newFakeBackend(t)
		fake.info.NCtx = 2048
		srv := New(Config{Alias: "stories260K", ChatTemplate: tmpl, Reasoning: tt.reasoning,
			ChatTemplateKwargs: []byte(`{"greeting":"hello","enable_thinking":false}`)}, testLogger())
		srv.SetBackend(fake)
		h := &harness{srv: srv, fake: fake, h: srv.Handler()}
		rec := h.do(t, "POST", "/apply-template", tt.body)
		if got, _ := decodeJSON(t, rec.Body.Bytes())["prompt"].(string); got != tt.want {
			t.Errorf("%v %s: prompt %q, want %q", tt.reasoning, tt.body, got, tt.want)
		}
	}
}
