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
	has := func(s ...string) bool {
		for _, x := range s {
			if !strings.Contains(src, x) {
				return false
			}
		}
		return true
	}
	switch {
	case has("<|im_start|>"):
		switch {
		case has("<|im_sep|>"):
			return "phi4", true
		case has("<end_of_utterance>"):
			return "smolvlm", true
		}
		return "chatml", true
	case strings.HasPrefix(src, "mistral") || has("[INST]"):
		switch {
		case has("[SYSTEM_PROMPT]"):
			return "mistral-v7", true
		case has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]"):
			if has(" [INST]") {
				return "mistral-v1", true
			}
			if has(`"[INST]"`) {
				return "mistral-v3-tekken", true
			}
			return "mistral-v3", true
		case has("content.strip()"):
			return "llama2-sys-strip", true
		case has("bos_token + '[INST]"):
			return "llama2-sys-bos", true
		case has("<<SYS>>"):
			return "llama2-sys", true
		}
		return "llama2", true
	case has("<|assistant|>", "<|end|>"):
		return "phi3", true
	case has("[gMASK]<sop>"):
		return "chatglm4", true
	case has("<|assistant|>", "<|user|>"):
		switch {
		case has("<|tool_declare|>"):
			return "exaone-moe", true
		case has("</s>"):
			return "falcon3", true
		}
		return "glmedge", true
	case has("<|{{ item['role'] }}|>", "<|begin_of_image|>"):
		return "glmedge", true
	case has("<|user|>", "<|endoftext|>"):
		return "zephyr", true
	case has("bos_token + message['role']"):
		return "monarch", true
	case has("<start_of_turn>"):
		return "gemma", true
	case has(`'\n\nAssistant: ' + eos_token`):
		return "orion", true
	case has("GPT4 Correct "):
		return "openchat", true
	case has("USER: ", "ASSISTANT: "):
		if has("SYSTEM: ") {
			return "vicuna-orca", true
		}
		return "vicuna", true
	case has("### Instruction:", "<|EOT|>"):
		return "deepseek", true
	case has("<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"):
		return "command-r", true
	case has("<|start_header_id|>", "<|end_header_id|>"):
		return "llama3", true
	case has("[gMASK]sop"):
		return "chatglm3", true
	case has("<用户>"):
		return "minicpm", true
	case has("'Assistant: ' + message['content'] + eos_token"):
		return "deepseek2", true
	case has("<｜Assistant｜>", "<｜User｜>", "<｜end▁of▁sentence｜>"):
		return "deepseek3", true
	case has("[|system|]", "[|assistant|]", "[|endofturn|]"):
		if has("[|tool|]") {
			return "exaone4", true
		}
		return "exaone3", true
	case has("rwkv-world") || has(`{{- 'User: ' + message['content']|trim + '\n\n' -}}`):
		return "rwkv-world", true
	case has("<|start_of_role|>"):
		if has("<tool_call>") || has("<tools>") {
			return "granite-4.0", true
		}
		return "granite", true
	case has("message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"):
		return "gigachat", true
	case has("<|role_start|>"):
		return "megrez", true
	case has(" Ассистент:"):
		return "yandex", true
	case has("<role>ASSISTANT</role>", "'HUMAN'"):
		return "bailing", true
	case has("<role>ASSISTANT</role>", `"HUMAN"`, "<think>"):
		return "bailing-think", true
	case has("<role>ASSISTANT</role>", "<role>HUMAN</role>", "<|role_end|>"):
		return "bailing2", true
	case has("<|header_start|>", "<|header_end|>"):
		return "llama4", true
	case has("<|endofuserprompt|>"):
		return "dots1", true
	case has("<|extra_0|>", "<|extra_4|>"):
		return "hunyuan-moe", true
	case has("<|start|>", "<|channel|>"):
		return "gpt-oss", true
	case has("<｜hy_Assistant｜>", "<｜hy_begin▁of▁sentence｜>"):
		return "hunyuan-vl", true
	case has("<｜hy_Assistant｜>", "<｜hy_place▁holder▁no▁3｜>"):
		return "hunyuan-dense", true
	case has("<|im_assistant|>assistant<|im_middle|>"):
		return "kimi-k2", true
	case has("<seed:bos>"):
		return "seed_oss", true
	case has("'Assistant: '  + message['content'] + '<|separator|>"):
		return "grok-2", true
	case has("[unused9]系统：[unused10]"):
		return "pangu-embedded", true
	case has("<|begin|>", "<|end|>", "<|content|>"):
		return "solar-open", true
	}
	return "", false
}
