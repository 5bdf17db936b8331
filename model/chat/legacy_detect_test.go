package chat

import (
	"os"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestNoJinjaDetect matches llama.cpp's test templates to built-in formats by their markers,
// as llm_chat_detect_template does.
func TestNoJinjaDetect(t *testing.T) {
	for file, want := range map[string]string{
		"Qwen-Qwen2.5-7B-Instruct":                      "chatml",
		"meta-llama-Llama-3.1-8B-Instruct":              "llama3",
		"mistralai-Mistral-Nemo-Instruct-2407":          "mistral-v3-tekken",
		"Mistral-Small-3.2-24B-Instruct-2506":           "mistral-v7",
		"google-gemma-2-2b-it":                          "gemma",
		"microsoft-Phi-3.5-mini-instruct":               "phi3",
		"CohereForAI-c4ai-command-r-plus-tool_use":      "command-r",
		"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B":      "deepseek3",
		"ibm-granite-granite-3.3-2B-Instruct":           "granite",
		"ibm-granite-granite-4.0":                       "granite-4.0",
		"ibm-granite-granite-4.1":                       "granite-4.1",
		"moonshotai-Kimi-K2":                            "kimi-k2",
		"openai-gpt-oss-120b":                           "gpt-oss",
		"ByteDance-Seed-OSS":                            "seed_oss",
		"fireworks-ai-llama-3-firefunction-v2":          "llama3",
		"CohereForAI-c4ai-command-r7b-12-2024-tool_use": "command-r",
	} {
		src, err := os.ReadFile(shareddata.Path(t, "llama-server-tests", "upstream", "models", "templates", file+".jinja"))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, ok := NoJinja(string(src))
		if !ok || tmpl.Name != want || tmpl.Source != string(src) {
			t.Errorf("%s: %q, %v; want %q", file, tmpl.Name, ok, want)
		}
	}
	if tmpl, ok := NoJinja("llama3"); !ok || tmpl.Name != "llama3" {
		t.Errorf("a built-in name: %q, %v", tmpl.Name, ok)
	}
	if _, ok := NoJinja("This is not a chat template, it is"); ok {
		t.Error("plain text matched a built-in format")
	}
	got, _ := NoJinja(ChatMLSource)
	if out, err := got.Render([]Message{{Role: "user", Content: "Hi"}}, true); err != nil || out != "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n" {
		t.Errorf("ChatML without Jinja: %q, %v", out, err)
	}
}

// TestDetectRulesNameFormats: every name detection can give renders, and a source made of a
// rule's markers alone is detected as that rule's format unless an earlier rule takes it.
func TestDetectRulesNameFormats(t *testing.T) {
	for i, r := range detectRules {
		if legacyFormats[r.name] == nil && detectedOnlyFormats[r.name] == nil {
			t.Errorf("rule %d names %q, which is no format", i, r.name)
		}
		src := strings.Join(r.markers, " ")
		got, ok := detectBuiltin(src)
		if !ok {
			t.Errorf("%q: nothing detected", src)
			continue
		}
		if got != r.name && !earlierRuleMatches(i, src) {
			t.Errorf("%q: detected %q, want %q", src, got, r.name)
		}
	}
	for src, want := range map[string]string{
		"mistral":                                      "llama2",
		"[INST] <<SYS>>":                               "llama2-sys",
		"{{ bos_token + '[INST] ' }}":                  "llama2-sys-bos",
		"[INST] content.strip() <<SYS>>":               "llama2-sys-strip",
		"[INST] [SYSTEM_PROMPT]":                       "mistral-v7",
		"[AVAILABLE_TOOLS][INST]":                      "mistral-v3",
		`[AVAILABLE_TOOLS] "[INST]"`:                   "mistral-v3-tekken",
		"' [INST] ' + system_message":                  "mistral-v1",
		"<|im_start|> [INST]":                          "chatml",
		"<|user|> <|assistant|> </s>":                  "falcon3",
		"[|system|][|assistant|][|endofturn|][|tool|]": "exaone4",
	} {
		if got, _ := detectBuiltin(src); got != want {
			t.Errorf("%q: detected %q, want %q", src, got, want)
		}
	}
}

func earlierRuleMatches(i int, src string) bool {
	for _, r := range detectRules[:i] {
		if r.matches(src) {
			return true
		}
	}
	return false
}
