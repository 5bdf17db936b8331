package chat

import "strings"

// NoJinja is the template llama-server uses with --no-jinja for src, a template name or source:
// a built-in name selects that formatter; a source is matched to one by the markers it contains
// (llama.cpp's llm_chat_detect_template). It reports false when no built-in format matches.
func NoJinja(src string) (Template, bool) {
	name, ok := src, legacyFormats[src] != nil
	if !ok {
		name, ok = detectBuiltin(src)
	}
	if !ok {
		return Template{}, false
	}
	f := legacyFormats[name]
	if f == nil {
		f = detectedOnlyFormats[name]
	}
	return Template{Source: src, Name: name, legacy: f}, true
}

// detectBuiltin names the built-in format a template source is written for, by the markers it
// contains, in llama.cpp's order.
func detectBuiltin(src string) (string, bool) {
	if !strings.Contains(src, "<|im_start|>") && (strings.HasPrefix(src, "mistral") || strings.Contains(src, "[INST]")) {
		return instFormat(src), true
	}
	for _, r := range detectRules {
		if r.matches(src) {
			return r.name, true
		}
	}
	return "", false
}

// instFormat picks among the [INST] formats (Mistral's and Llama 2's variants).
func instFormat(src string) string {
	has := func(s string) bool { return strings.Contains(src, s) }
	switch {
	case has("[SYSTEM_PROMPT]"):
		return "mistral-v7"
	case has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]"):
		if has(" [INST]") {
			return "mistral-v1"
		}
		if has(`"[INST]"`) {
			return "mistral-v3-tekken"
		}
		return "mistral-v3"
	case has("content.strip()"):
		return "llama2-sys-strip"
	case has("bos_token + '[INST]"):
		return "llama2-sys-bos"
	case has("<<SYS>>"):
		return "llama2-sys"
	}
	return "llama2"
}

// detectRule names a built-in format by markers that must all occur in a template source.
type detectRule struct {
	name    string
	markers []string
}

func (r detectRule) matches(src string) bool {
	for _, m := range r.markers {
		if !strings.Contains(src, m) {
			return false
		}
	}
	return true
}

// detectRules are llm_chat_detect_template's checks besides the [INST] family (which comes
// right after the <|im_start|> ones), in its order: the first rule that matches wins. A check
// with alternatives, or one narrowed by further markers, is several rules, the narrower first.
var detectRules = []detectRule{
	{"phi4", []string{"<|im_start|>", "<|im_sep|>"}},
	{"smolvlm", []string{"<|im_start|>", "<end_of_utterance>"}},
	{"chatml", []string{"<|im_start|>"}},
	{"phi3", []string{"<|assistant|>", "<|end|>"}},
	{"chatglm4", []string{"[gMASK]<sop>"}},
	{"exaone-moe", []string{"<|assistant|>", "<|user|>", "<|tool_declare|>"}},
	{"falcon3", []string{"<|assistant|>", "<|user|>", "</s>"}},
	{"glmedge", []string{"<|assistant|>", "<|user|>"}},
	{"glmedge", []string{"<|{{ item['role'] }}|>", "<|begin_of_image|>"}},
	{"zephyr", []string{"<|user|>", "<|endoftext|>"}},
	{"monarch", []string{"bos_token + message['role']"}},
	{"gemma", []string{"<start_of_turn>"}},
	{"orion", []string{`'\n\nAssistant: ' + eos_token`}},
	{"openchat", []string{"GPT4 Correct "}},
	{"vicuna-orca", []string{"USER: ", "ASSISTANT: ", "SYSTEM: "}},
	{"vicuna", []string{"USER: ", "ASSISTANT: "}},
	{"deepseek", []string{"### Instruction:", "<|EOT|>"}},
	{"command-r", []string{"<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"}},
	{"llama3", []string{"<|start_header_id|>", "<|end_header_id|>"}},
	{"chatglm3", []string{"[gMASK]sop"}},
	{"minicpm", []string{"<用户>"}},
	{"deepseek2", []string{"'Assistant: ' + message['content'] + eos_token"}},
	{"deepseek3", []string{"<｜Assistant｜>", "<｜User｜>", "<｜end▁of▁sentence｜>"}},
	{"exaone4", []string{"[|system|]", "[|assistant|]", "[|endofturn|]", "[|tool|]"}},
	{"exaone3", []string{"[|system|]", "[|assistant|]", "[|endofturn|]"}},
	{"rwkv-world", []string{"rwkv-world"}},
	{"rwkv-world", []string{`{{- 'User: ' + message['content']|trim + '\n\n' -}}`}},
	{"granite-4.0", []string{"<|start_of_role|>", "<tool_call>", "g4_default_system_message"}},
	{"granite-4.0", []string{"<|start_of_role|>", "<tools>", "g4_default_system_message"}},
	{"granite-4.1", []string{"<|start_of_role|>", "<tool_call>"}},
	{"granite-4.1", []string{"<|start_of_role|>", "<tools>"}},
	{"granite", []string{"<|start_of_role|>"}},
	{"gigachat", []string{"message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"}},
	{"megrez", []string{"<|role_start|>"}},
	{"yandex", []string{" Ассистент:"}},
	{"bailing", []string{"<role>ASSISTANT</role>", "'HUMAN'"}},
	{"bailing-think", []string{"<role>ASSISTANT</role>", `"HUMAN"`, "<think>"}},
	{"bailing2", []string{"<role>ASSISTANT</role>", "<role>HUMAN</role>", "<|role_end|>"}},
	{"llama4", []string{"<|header_start|>", "<|header_end|>"}},
	{"dots1", []string{"<|endofuserprompt|>"}},
	{"hunyuan-moe", []string{"<|extra_0|>", "<|extra_4|>"}},
	{"gpt-oss", []string{"<|start|>", "<|channel|>"}},
	{"hunyuan-vl", []string{"<｜hy_Assistant｜>", "<｜hy_begin▁of▁sentence｜>"}},
	{"hunyuan-dense", []string{"<｜hy_Assistant｜>", "<｜hy_place▁holder▁no▁3｜>"}},
	{"kimi-k2", []string{"<|im_assistant|>assistant<|im_middle|>"}},
	{"seed_oss", []string{"<seed:bos>"}},
	{"grok-2", []string{"'Assistant: '  + message['content'] + '<|separator|>"}},
	{"pangu-embedded", []string{"[unused9]系统：[unused10]"}},
	{"solar-open", []string{"<|begin|>", "<|end|>", "<|content|>"}},
}
