package chat

import "testing"

// TestLegacyFormatsMoreRoles pins formats the shared conversation of TestBuiltinTemplates does
// not reach: each is llama.cpp's llm_chat_apply_template output for the same messages, and for
// a tool message and a role no format names ("function"), which some formats skip and others
// write as the assistant or a user turn.
func TestLegacyFormatsMoreRoles(t *testing.T) {
	msgs := []Message{
		{Role: "system", Content: "S"},
		{Role: "user", Content: " U1"},
		{Role: "assistant", Content: "A1 "},
		{Role: "user", Content: "U2"},
	}
	odd := []Message{{Role: "user", Content: "Q"}, {Role: "tool", Content: "T"}, {Role: "function", Content: " F "}}
	for _, tt := range []struct{ name, want, wantOdd string }{
		{"vicuna", "S\n\nUSER:  U1\nASSISTANT: A1 </s>\nUSER: U2\nASSISTANT:", "USER: Q\nASSISTANT:"},
		{"smolvlm", "<|im_start|>S\n\nUser:  U1<end_of_utterance>\nAssistant: A1 <end_of_utterance>\nUser: U2<end_of_utterance>\nAssistant:",
			"<|im_start|>User: Q<end_of_utterance>\nAssistant: T<end_of_utterance>\nAssistant:  F <end_of_utterance>\nAssistant:"},
		{"hunyuan-moe", "<|startoftext|>S<|extra_4|><|startoftext|> U1<|extra_0|>A1 <|eos|><|startoftext|>U2<|extra_0|>",
			"<|startoftext|>Q<|extra_0|><|startoftext|>T<|extra_0|><|startoftext|> F <|extra_0|>"},
		{"deepseek-ocr", "S U1A1 U2", "QT F "},
		{"minicpm", "S<用户>U1<AI>A1<用户>U2<AI>", "<用户>Q<AI>TF"},
		{"mistral-v7", "[SYSTEM_PROMPT] S[/SYSTEM_PROMPT][INST]  U1[/INST] A1 </s>[INST] U2[/INST]", "[INST] Q[/INST] T</s>  F </s>"},
		{"kimi-k2", "<|im_system|>system<|im_middle|>S<|im_end|><|im_user|>user<|im_middle|> U1<|im_end|><|im_assistant|>assistant<|im_middle|>A1 <|im_end|>" +
			"<|im_user|>user<|im_middle|>U2<|im_end|><|im_assistant|>assistant<|im_middle|>",
			"<|im_user|>user<|im_middle|>Q<|im_end|><|im_system|>tool<|im_middle|>T<|im_end|> F <|im_end|><|im_assistant|>assistant<|im_middle|>"},
		{"gpt-oss", "<|start|>system<|message|>S<|end|><|start|>user<|message|> U1<|end|><|start|>assistant<|message|>A1 <|return|>" +
			"<|start|>user<|message|>U2<|end|><|start|>assistant",
			"<|start|>user<|message|>Q<|end|><|start|>tool<|message|>T<|end|><|start|>function<|message|> F <|end|><|start|>assistant"},
		{"grok-2", "System: S<|separator|>\n\nHuman: U1<|separator|>\n\nAssistant: A1 <|separator|>\n\nHuman: U2<|separator|>\n\nAssistant:",
			"Human: Q<|separator|>\n\nAssistant:"},
		{"exaone4", "[|system|]S[|endofturn|]\n[|user|]U1\n[|assistant|]A1[|endofturn|]\n[|user|]U2\n[|assistant|]",
			"[|user|]Q\n[|tool|]T[|endofturn|]\n[|assistant|]"},
	} {
		tmpl, err := Resolve(tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := tmpl.Render(msgs, true); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
		if got, _ := tmpl.Render(odd, true); got != tt.wantOdd {
			t.Errorf("%s, tool and function roles: got %q, want %q", tt.name, got, tt.wantOdd)
		}
	}
}

// TestNoJinjaDots1: llama.cpp detects dots.llm1's template by <|endofuserprompt|> and renders it
// with its own format, though "dots1" is not a name --chat-template accepts.
func TestNoJinjaDots1(t *testing.T) {
	tmpl, ok := NoJinja("{{- '<|userprompt|>' + message['content'] + '<|endofuserprompt|>' -}}")
	if !ok || tmpl.Name != "dots1" {
		t.Fatalf("detected %q, %v; want dots1", tmpl.Name, ok)
	}
	msgs := []Message{{Role: "system", Content: "S"}, {Role: "user", Content: "U"}, {Role: "assistant", Content: "A"}, {Role: "tool", Content: "T"}}
	want := "<|system|>S<|endofsystem|><|userprompt|>U<|endofuserprompt|><|response|>A<|endofresponse|><|response|>T<|endofresponse|><|response|>"
	if got, _ := tmpl.Render(msgs, true); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if tmpl, _ := Resolve("dots1"); tmpl.Builtin() {
		t.Error(`--chat-template dots1 selected the built-in format`)
	}
	for _, n := range BuiltinNames() {
		if n == "dots1" {
			t.Error("dots1 is listed as a built-in name")
		}
	}
}

// TestBailingRoleASCII: llama.cpp upper-cases Bailing's roles with C's toupper, which leaves
// every byte outside a-z as it is.
func TestBailingRoleASCII(t *testing.T) {
	tmpl, err := Resolve("bailing")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := tmpl.Render([]Message{{Role: "tool_é", Content: "x"}, {Role: "user", Content: "q"}}, true)
	if want := "<role>TOOL_é</role>x<role>HUMAN</role>q<role>ASSISTANT</role>"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestGraniteFormats: llama.cpp's Granite 3.x, 4.0 and 4.1 formats (llama-server b10587) end
// the generation prompt right after <|end_of_role|>, and differ only in the role a tool-calling
// assistant turn is written under.
func TestGraniteFormats(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "U"}, {Role: "assistant_tool_call", Content: "[]"}}
	for name, want := range map[string]string{
		"granite": "<|start_of_role|>user<|end_of_role|>U<|end_of_text|>\n" +
			"<|start_of_role|>assistant_tool_call<|end_of_role|><|tool_call|>[]<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>",
		"granite-4.0": "<|start_of_role|>user<|end_of_role|>U<|end_of_text|>\n" +
			"<|start_of_role|>assistant<|end_of_role|><|tool_call|>[]<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>",
		"granite-4.1": "<|start_of_role|>user<|end_of_role|>U<|end_of_text|>\n" +
			"<|start_of_role|>assistant<|end_of_role|><|tool_call|>[]<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>",
	} {
		tmpl, err := Resolve(name)
		if err != nil || !tmpl.Builtin() {
			t.Fatalf("%s: %v, built-in %v", name, err, tmpl.Builtin())
		}
		if got, _ := tmpl.Render(msgs, true); got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
}
