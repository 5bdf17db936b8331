package chat

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// gemma4Requests are /apply-template bodies over Gemma 4's chat template: a plain turn, a
// system prompt, tools with an earlier call and its result, and earlier reasoning.
var gemma4Requests = []string{
	`{"messages":[{"role":"user","content":"Hello there"}]}`,
	`{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"Tell me a story"}]}`,
	`{"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"days\":2}"}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"},{"role":"user","content":"And tomorrow?"}],
	  "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather by city","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}}]}`,
	`{"messages":[{"role":"user","content":"2+2?"},{"role":"assistant","content":"4","reasoning_content":"Adding."},{"role":"user","content":"3+3?"}],"chat_template_kwargs":{"enable_thinking":true}}`,
}

// TestGemma4TemplateMatchesLlamaServer renders Gemma 4's chat template (llama.cpp's
// models/templates/google-gemma-4-31B-it.jinja) for each of gemma4Requests and compares the
// prompt with what llama.cpp's own llama-server answers from /apply-template, given the same
// template, on the shared Gemma 4 reference model: the format end to end, from the template to
// the prompt the model reads.
func TestGemma4TemplateMatchesLlamaServer(t *testing.T) {
	tmplPath := shareddata.Path(t, "llama-server-tests", "upstream", "models", "templates", "google-gemma-4-31B-it.jinja")
	src, err := os.ReadFile(tmplPath)
	if err != nil {
		t.Fatal(err)
	}
	srv := shareddata.LlamaServer(t, shareddata.Path(t, "models", "gemma4", "gemma4-F32.gguf"), "-c", "256", "-np", "1", "--jinja", "--chat-template-file", tmplPath)
	tmpl, err := New(string(src), "gemma4")
	if err != nil {
		t.Fatal(err)
	}
	tmpl = tmpl.WithSpecialTokens("<s>", "</s>")
	for i, body := range gemma4Requests {
		var want struct {
			Prompt string `json:"prompt"`
		}
		if err := json.Unmarshal(shareddata.LlamaServerPost(t, srv, "/apply-template", body), &want); err != nil {
			t.Fatal(err)
		}
		var req referenceRequest
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		in := req.input(t)
		in.Now = time.Now()
		got, err := tmpl.Apply(in)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if got = strings.TrimPrefix(got, "<s>"); got != want.Prompt {
			t.Errorf("request %d: rendered\n%q\nllama-server\n%q", i, got, want.Prompt)
		}
	}
}
