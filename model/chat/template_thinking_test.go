package chat

import (
	"os"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestThinkingField checks that an answer's reasoning reaches GPT-OSS's template, which reads it
// from message.thinking, as an analysis-channel message before the tool call.
func TestThinkingField(t *testing.T) {
	src, err := os.ReadFile(shareddata.Path(t, "llama-server-tests", "upstream", "models", "templates", "openai-gpt-oss-120b.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := New(string(src), "gpt-oss")
	if err != nil {
		t.Fatal(err)
	}
	out, err := tmpl.Apply(Input{Messages: []Message{
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", ReasoningContent: "I should look it up.", ToolCalls: []ToolCall{{ID: "c1", Name: "get_weather", Arguments: `{"city": "Paris"}`}}},
		{Role: "tool", ToolCallID: "c1", Content: "sunny"},
	}, AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "<|start|>assistant<|channel|>analysis<|message|>I should look it up.<|end|>") {
		t.Errorf("the reasoning is not in the prompt:\n%s", out)
	}
}
