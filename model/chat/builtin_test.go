package chat

import (
	"strings"
	"testing"
)

func TestBuiltinTemplates(t *testing.T) {
	msgs := []Message{
		{Role: "system", Content: "S"},
		{Role: "user", Content: " U1"},
		{Role: "assistant", Content: "A1 "},
		{Role: "user", Content: "U2"},
	}
	// Expected outputs of llama.cpp's llm_chat_apply_template (src/llama-chat.cpp) for the same
	// conversation, with the generation prompt.
	want := map[string]string{
		"chatml": "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n U1<|im_end|>\n<|im_start|>assistant\nA1 <|im_end|>\n" +
			"<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n",
		"llama2":            "[INST] S\n U1 [/INST]A1 </s>[INST] U2 [/INST]",
		"llama2-sys":        "[INST] <<SYS>>\nS\n<</SYS>>\n\n U1 [/INST]A1 </s>[INST] U2 [/INST]",
		"llama2-sys-bos":    "[INST] <<SYS>>\nS\n<</SYS>>\n\n U1 [/INST]A1 </s><s>[INST] U2 [/INST]",
		"llama2-sys-strip":  "[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST]A1</s>[INST] U2 [/INST]",
		"mistral-v1":        " [INST] S\n\n U1 [/INST] A1 </s> [INST] U2 [/INST]",
		"mistral-v3":        "[INST] S\n\n U1[/INST] A1</s>[INST] U2[/INST]",
		"mistral-v7":        "[SYSTEM_PROMPT] S[/SYSTEM_PROMPT][INST]  U1[/INST] A1 </s>[INST] U2[/INST]",
		"mistral-v7-tekken": "[SYSTEM_PROMPT]S[/SYSTEM_PROMPT][INST] U1[/INST]A1 </s>[INST]U2[/INST]",
		"command-r": "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>S<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>U1<|END_OF_TURN_TOKEN|>" +
			"<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>A1<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>U2<|END_OF_TURN_TOKEN|>" +
			"<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
		"llama3": "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU1<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\nA1<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU2<|eot_id|>" +
			"<|start_header_id|>assistant<|end_header_id|>\n\n",
		"phi3": "<|system|>\nS<|end|>\n<|user|>\n U1<|end|>\n<|assistant|>\nA1 <|end|>\n<|user|>\nU2<|end|>\n<|assistant|>\n",
		"phi4": "<|im_start|>system<|im_sep|>S<|im_end|><|im_start|>user<|im_sep|> U1<|im_end|><|im_start|>assistant<|im_sep|>A1 <|im_end|>" +
			"<|im_start|>user<|im_sep|>U2<|im_end|><|im_start|>assistant<|im_sep|>",
		"gemma": "<start_of_turn>user\nS\n\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n" +
			"<start_of_turn>user\nU2<end_of_turn>\n<start_of_turn>model\n",
		"vicuna-orca": "SYSTEM: S\nUSER:  U1\nASSISTANT: A1 </s>\nUSER: U2\nASSISTANT:",
		"deepseek3":   "S\n\n<｜User｜> U1<｜Assistant｜>A1 <｜end▁of▁sentence｜><｜User｜>U2<｜Assistant｜>",
		"chatglm4":    "[gMASK]<sop><|system|>\nS<|user|>\n U1<|assistant|>\nA1 <|user|>\nU2<|assistant|>\n",
		"granite": "<|start_of_role|>system<|end_of_role|>S<|end_of_text|>\n<|start_of_role|>user<|end_of_role|> U1<|end_of_text|>\n" +
			"<|start_of_role|>assistant<|end_of_role|>A1 <|end_of_text|>\n<|start_of_role|>user<|end_of_role|>U2<|end_of_text|>\n" +
			"<|start_of_role|>assistant<|end_of_role|>",
		"kimi-k2": "<|im_system|>system<|im_middle|>S<|im_end|><|im_user|>user<|im_middle|> U1<|im_end|>" +
			"<|im_assistant|>assistant<|im_middle|>A1 <|im_end|><|im_user|>user<|im_middle|>U2<|im_end|><|im_assistant|>assistant<|im_middle|>",
		"rwkv-world": "System: S\n\nUser: U1\n\nAssistant: A1\n\nUser: U2\n\nAssistant:",
		"openchat":   "S<|end_of_turn|>GPT4 Correct User:  U1<|end_of_turn|>GPT4 Correct Assistant: A1 <|end_of_turn|>GPT4 Correct User: U2<|end_of_turn|>GPT4 Correct Assistant:",
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
	if tmpl, _ := Resolve("chatml"); tmpl.Source != ChatMLSource || tmpl.Builtin() {
		t.Errorf("chatml is not llama.cpp's ChatML Jinja source: %q", tmpl.Source)
	}
	if tmpl, _ := Resolve("command-r"); tmpl.Source != "command-r" || !tmpl.Builtin() {
		t.Errorf("command-r: source %q, built-in %v", tmpl.Source, tmpl.Builtin())
	}
	// llama-server's --help list of built-in templates (LLM_CHAT_TEMPLATES), sorted as it is.
	names := "bailing bailing-think bailing2 chatglm3 chatglm4 chatml command-r deepseek deepseek-ocr deepseek2 deepseek3 " +
		"exaone-moe exaone3 exaone4 falcon3 gemma gigachat glmedge gpt-oss granite granite-4.0 granite-4.1 grok-2 " +
		"hunyuan-dense hunyuan-moe hunyuan-vl kimi-k2 llama2 llama2-sys llama2-sys-bos llama2-sys-strip llama3 llama4 " +
		"megrez minicpm mistral-v1 mistral-v3 mistral-v3-tekken mistral-v7 mistral-v7-tekken monarch openchat orion " +
		"pangu-embedded phi3 phi4 rwkv-world seed_oss smolvlm solar-open vicuna vicuna-orca yandex zephyr"
	if got := strings.Join(BuiltinNames(), " "); got != names {
		t.Errorf("built-in names:\n%s\nwant\n%s", got, names)
	}
}

// TestResolveSource: an argument that is not a built-in name is Jinja source, as llama-server
// takes it; plain text renders as itself, a source that does not parse is refused.
func TestResolveSource(t *testing.T) {
	tmpl, err := Resolve("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}\n")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render([]Message{{Role: "user", Content: "hi"}}, true)
	if err != nil || got != "[user]hi" {
		t.Errorf("got %q, %v", got, err)
	}
	tmpl, err = Resolve("This is not a chat template, it is")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tmpl.Render([]Message{{Role: "user", Content: "hi"}}, true); err != nil || got != "This is not a chat template, it is" {
		t.Errorf("plain text: got %q, %v", got, err)
	}
	if _, err := Resolve("{% if %}"); err == nil || !strings.Contains(err.Error(), "the supplied chat template is not supported") {
		t.Errorf("Resolve of a broken source: %v", err)
	}
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
