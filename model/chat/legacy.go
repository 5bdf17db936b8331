package chat

import (
	"strings"
	"unicode"
)

// legacyFormat renders a conversation the way one of llama.cpp's named built-in templates
// does (llm_chat_apply_template in src/llama-chat.cpp): from each message's role and text
// only, with no tools, no enable_thinking and no BOS of its own.
type legacyFormat func(msgs []Message, addAss bool) string

// legacyFormats are llama.cpp's built-in template names (LLM_CHAT_TEMPLATES), which
// --chat-template NAME selects instead of a Jinja source.
var legacyFormats = map[string]legacyFormat{
	"chatml":            perMessage("<|im_start|>", "\n", "<|im_end|>\n", "<|im_start|>assistant\n"),
	"llama2":            llama2(false, false, false),
	"llama2-sys":        llama2(true, false, false),
	"llama2-sys-bos":    llama2(true, true, false),
	"llama2-sys-strip":  llama2(true, false, true),
	"mistral-v1":        mistralV1V3(" ", " ", false),
	"mistral-v3":        mistralV1V3("", " ", true),
	"mistral-v3-tekken": mistralV1V3("", "", false),
	"mistral-v7":        mistralV7(" "),
	"mistral-v7-tekken": mistralV7(""),
	"phi3":              perMessage("<|", "|>\n", "<|end|>\n", "<|assistant|>\n"),
	"phi4":              perMessage("<|im_start|>", "<|im_sep|>", "<|im_end|>", "<|im_start|>assistant<|im_sep|>"),
	"falcon3":           perMessage("<|", "|>\n", "\n", "<|assistant|>\n"),
	"zephyr":            perMessage("<|", "|>\n", "<|endoftext|>\n", "<|assistant|>\n"),
	"monarch":           monarch,
	"gemma":             gemma,
	"orion":             orion,
	"openchat":          openchat,
	"vicuna": byRole(map[string][2]string{
		"system": {"", "\n\n"}, "user": {"USER: ", "\n"}, "assistant": {"ASSISTANT: ", "</s>\n"},
	}, false, "ASSISTANT:"),
	"vicuna-orca": byRole(map[string][2]string{
		"system": {"SYSTEM: ", "\n"}, "user": {"USER: ", "\n"}, "assistant": {"ASSISTANT: ", "</s>\n"},
	}, false, "ASSISTANT:"),
	"deepseek": byRole(map[string][2]string{
		"system": {"", ""}, "user": {"### Instruction:\n", "\n"}, "assistant": {"### Response:\n", "\n<|EOT|>\n"},
	}, false, "### Response:\n"),
	"deepseek2": byRole(map[string][2]string{
		"system": {"", "\n\n"}, "user": {"User: ", "\n\n"}, "assistant": {"Assistant: ", "<｜end▁of▁sentence｜>"},
	}, false, "Assistant:"),
	"deepseek3": byRole(map[string][2]string{
		"system": {"", "\n\n"}, "user": {"<｜User｜>", ""}, "assistant": {"<｜Assistant｜>", "<｜end▁of▁sentence｜>"},
	}, false, "<｜Assistant｜>"),
	"deepseek-ocr": byRole(map[string][2]string{otherRoles: {"", ""}}, false, ""), // the texts only
	"command-r": byRole(map[string][2]string{
		"system":    {"<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>", "<|END_OF_TURN_TOKEN|>"},
		"user":      {"<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>"},
		"assistant": {"<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"},
	}, true, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"),
	"llama3":   trimmed(perMessage("<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>", "<|start_header_id|>assistant<|end_header_id|>\n\n")),
	"chatglm3": prefixed("[gMASK]sop", perMessage("<|", "|>\n ", "", "<|assistant|>")),
	"chatglm4": prefixed("[gMASK]<sop>", perMessage("<|", "|>\n", "", "<|assistant|>\n")),
	"glmedge":  perMessage("<|", "|>\n", "", "<|assistant|>"),
	"minicpm":  byRole(map[string][2]string{"user": {"<用户>", "<AI>"}, otherRoles: {"", ""}}, true, ""),
	"exaone3": byRole(map[string][2]string{
		"system": {"[|system|]", "[|endofturn|]\n"}, "user": {"[|user|]", "\n"}, "assistant": {"[|assistant|]", "[|endofturn|]\n"},
	}, true, "[|assistant|]"),
	"exaone4": byRole(map[string][2]string{
		"system": {"[|system|]", "[|endofturn|]\n"}, "user": {"[|user|]", "\n"}, "assistant": {"[|assistant|]", "[|endofturn|]\n"},
		"tool": {"[|tool|]", "[|endofturn|]\n"},
	}, true, "[|assistant|]"),
	"exaone-moe": byRole(map[string][2]string{
		"system": {"<|system|>\n", "<|endofturn|>\n"}, "user": {"<|user|>\n", "<|endofturn|>\n"},
		"assistant": {"<|assistant|>\n", "<|endofturn|>\n"}, "tool": {"<|tool|>\n", "<|endofturn|>\n"},
	}, true, "<|assistant|>\n"),
	"rwkv-world":  rwkvWorld,
	"granite":     granite(false),
	"granite-4.0": granite(true),
	"granite-4.1": granite(true),
	"gigachat":    gigachat,
	"megrez":      perMessage("<|role_start|>", "<|role_end|>", "<|turn_end|>", "<|role_start|>assistant<|role_end|>"),
	"yandex": byRole(map[string][2]string{
		"user": {" Пользователь: ", "\n\n"}, "assistant": {" Ассистент: ", "\n\n"},
	}, false, " Ассистент:[SEP]"),
	"bailing":       bailing(""),
	"bailing-think": bailing("<think>"),
	"bailing2":      bailing2,
	"llama4":        trimmed(perMessage("<|header_start|>", "<|header_end|>\n\n", "<|eot|>", "<|header_start|>assistant<|header_end|>\n\n")),
	// SmolVLM starts with <|im_start|> as its BOS, but is not ChatML.
	"smolvlm": prefixed("<|im_start|>", byRole(map[string][2]string{
		"system": {"", "\n\n"}, "user": {"User: ", "<end_of_utterance>\n"}, otherRoles: {"Assistant: ", "<end_of_utterance>\n"},
	}, false, "Assistant:")),
	"hunyuan-moe": byRole(map[string][2]string{
		"system": {"<|startoftext|>", "<|extra_4|>"}, "assistant": {"", "<|eos|>"}, otherRoles: {"<|startoftext|>", "<|extra_0|>"},
	}, false, ""),
	"gpt-oss":       gptOSS,
	"hunyuan-dense": hunyuanDense,
	"hunyuan-vl":    hunyuanVL,
	"kimi-k2": byRole(map[string][2]string{
		"system": {"<|im_system|>system<|im_middle|>", "<|im_end|>"}, "user": {"<|im_user|>user<|im_middle|>", "<|im_end|>"},
		"assistant": {"<|im_assistant|>assistant<|im_middle|>", "<|im_end|>"}, "tool": {"<|im_system|>tool<|im_middle|>", "<|im_end|>"},
		otherRoles: {"", "<|im_end|>"},
	}, false, "<|im_assistant|>assistant<|im_middle|>"),
	"seed_oss":       seedOSS,
	"grok-2":         grok2,
	"pangu-embedded": pangu,
	"solar-open":     perMessage("<|begin|>", "<|content|>", "<|end|>", "<|begin|>assistant"),
}

// detectedOnlyFormats are built-in formats llama.cpp picks only by a template's markers
// (llm_chat_detect_template): LLM_CHAT_TEMPLATES has no name for them, so --chat-template
// does not select them.
var detectedOnlyFormats = map[string]legacyFormat{
	"dots1": byRole(map[string][2]string{
		"system": {"<|system|>", "<|endofsystem|>"}, "user": {"<|userprompt|>", "<|endofuserprompt|>"},
		otherRoles: {"<|response|>", "<|endofresponse|>"},
	}, false, "<|response|>"),
}

// trimSpace trims as C's isspace does (ASCII whitespace only), as llama.cpp's trim.
func trimSpace(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r < 0x80 && unicode.IsSpace(r) })
}

// perMessage writes open+role+sep+content+end for each message, then gen when asked.
func perMessage(open, sep, end, gen string) legacyFormat {
	return func(msgs []Message, addAss bool) string {
		var b strings.Builder
		for _, m := range msgs {
			b.WriteString(open + m.Role + sep + m.Content + end)
		}
		if addAss {
			b.WriteString(gen)
		}
		return b.String()
	}
}

// trimmed is f with every message's content trimmed.
func trimmed(f legacyFormat) legacyFormat {
	return func(msgs []Message, addAss bool) string {
		out := make([]Message, len(msgs))
		for i, m := range msgs {
			out[i] = Message{Role: m.Role, Content: trimSpace(m.Content)}
		}
		return f(out, addAss)
	}
}

// prefixed is f after a fixed prefix.
func prefixed(prefix string, f legacyFormat) legacyFormat {
	return func(msgs []Message, addAss bool) string { return prefix + f(msgs, addAss) }
}

// otherRoles is the byRole entry for every role without its own; without one, such messages
// are left out.
const otherRoles = "*"

// byRole wraps each message's content in its role's prefix and suffix (see otherRoles). trim
// trims the content first.
func byRole(wrap map[string][2]string, trim bool, gen string) legacyFormat {
	return func(msgs []Message, addAss bool) string {
		var b strings.Builder
		for _, m := range msgs {
			w, ok := wrap[m.Role]
			if !ok {
				w, ok = wrap[otherRoles]
			}
			if !ok {
				continue
			}
			c := m.Content
			if trim {
				c = trimSpace(c)
			}
			b.WriteString(w[0] + c + w[1])
		}
		if addAss {
			b.WriteString(gen)
		}
		return b.String()
	}
}
