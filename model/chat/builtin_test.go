package chat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuiltinTemplates(t *testing.T) {
	msgs := []Message{
		{Role: "system", Content: "S"},
		{Role: "user", Content: "U1"},
		{Role: "assistant", Content: "A1"},
		{Role: "user", Content: "U2"},
	}
	want := map[string]string{
		"chatml": "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n" +
			"<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n",
		"llama2": "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST]A1</s><s>[INST] U2 [/INST]",
		"llama3": "<s><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU1<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\nA1<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU2<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\n",
		"mistral-v7": "<s>[SYSTEM_PROMPT] S[/SYSTEM_PROMPT][INST] U1[/INST] A1</s>[INST] U2[/INST]",
		"phi3":       "<|system|>\nS<|end|>\n<|user|>\nU1<|end|>\n<|assistant|>\nA1<|end|>\n<|user|>\nU2<|end|>\n<|assistant|>\n",
		"gemma": "<s><start_of_turn>user\nS\n\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n" +
			"<start_of_turn>user\nU2<end_of_turn>\n<start_of_turn>model\n",
	}
	for name, w := range want {
		tmpl, err := Resolve(name)
		if err != nil {
			t.Fatalf("Resolve(%q): %v", name, err)
		}
		got, err := tmpl.WithSpecialTokens("<s>", "</s>").Render(msgs, true)
		if err != nil || got != w {
			t.Errorf("%s: got %q, %v; want %q", name, got, err, w)
		}
	}
	if tmpl, err := Resolve("qwen"); err != nil || tmpl.Source != ChatMLSource {
		t.Errorf("Resolve(qwen) = %q, %v; want ChatML", tmpl.Source, err)
	}
}

func TestResolveFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.jinja")
	if err := os.WriteFile(p, []byte("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tmpl, err := Resolve(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render([]Message{{Role: "user", Content: "hi"}}, true)
	if err != nil || got != "[user]hi" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := Resolve(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "chatml") {
		t.Errorf("Resolve(missing) error = %v, want one listing the built-in names", err)
	}
}

func TestRaiseExceptionIsRenderError(t *testing.T) {
	tmpl, err := New("{{ raise_exception('nope') }}", "t")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render(nil, true)
	var re *RenderError
	if err == nil || !strings.Contains(err.Error(), "Jinja Exception: nope") || !asRenderError(err, &re) {
		t.Errorf("error = %v, want a RenderError with the exception", err)
	}
}

func asRenderError(err error, target **RenderError) bool {
	re, ok := err.(*RenderError)
	*target = re
	return ok
}

func TestParseReasoning(t *testing.T) {
	for in, want := range map[string]Reasoning{
		"on": ReasoningOn, "enabled": ReasoningOn, "true": ReasoningOn, "1": ReasoningOn,
		"off": ReasoningOff, "disabled": ReasoningOff, "false": ReasoningOff, "0": ReasoningOff,
		"auto": ReasoningAuto, "-1": ReasoningAuto,
	} {
		if got, err := ParseReasoning(in); err != nil || got != want {
			t.Errorf("ParseReasoning(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"Off", "yes", ""} {
		if _, err := ParseReasoning(in); err == nil {
			t.Errorf("ParseReasoning(%q) succeeded", in)
		}
	}
	if v, set := ReasoningOff.DefaultThinking(); v || !set {
		t.Errorf("off: default enable_thinking %v, %v", v, set)
	}
	if _, set := ReasoningAuto.DefaultThinking(); set {
		t.Error("auto sets a default enable_thinking")
	}
}
