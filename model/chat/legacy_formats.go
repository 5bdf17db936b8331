package chat

import "strings"

// The formats of llama.cpp's built-in templates that are more than a wrapper per message
// (see legacyFormats).

// llama2 is Llama 2's [INST] format; sys wraps system messages in <<SYS>>, bos starts later
// turns with <s>, strip trims every message.
func llama2(sys, bos, strip bool) legacyFormat {
	return func(msgs []Message, _ bool) string {
		var b strings.Builder
		b.WriteString("[INST] ")
		inside := true
		for _, m := range msgs {
			c := m.Content
			if strip {
				c = trimSpace(c)
			}
			if !inside {
				inside = true
				if bos {
					b.WriteString("<s>")
				}
				b.WriteString("[INST] ")
			}
			switch m.Role {
			case "system":
				if sys {
					b.WriteString("<<SYS>>\n" + c + "\n<</SYS>>\n\n")
				} else {
					b.WriteString(c + "\n")
				}
			case "user":
				b.WriteString(c + " [/INST]")
			default:
				b.WriteString(c + "</s>")
				inside = false
			}
		}
		return b.String()
	}
}

// mistralV1V3 is Mistral's v1, v3 and v3-tekken [INST] format.
func mistralV1V3(leading, trailing string, trimAssistant bool) legacyFormat {
	return func(msgs []Message, _ bool) string {
		var b strings.Builder
		inside := false
		for _, m := range msgs {
			if !inside {
				b.WriteString(leading + "[INST]" + trailing)
				inside = true
			}
			switch m.Role {
			case "system":
				b.WriteString(m.Content + "\n\n")
			case "user":
				b.WriteString(m.Content + leading + "[/INST]")
			default:
				c := m.Content
				if trimAssistant {
					c = trimSpace(c)
				}
				b.WriteString(trailing + c + "</s>")
				inside = false
			}
		}
		return b.String()
	}
}

// mistralV7 is Mistral's v7 format (space after the markers) and v7-tekken (none).
func mistralV7(space string) legacyFormat {
	return byRole(map[string][2]string{
		"system": {"[SYSTEM_PROMPT]" + space, "[/SYSTEM_PROMPT]"}, "user": {"[INST]" + space, "[/INST]"},
		otherRoles: {space, "</s>"},
	}, false, "")
}

func monarch(msgs []Message, addAss bool) string {
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteString("<s>")
		}
		b.WriteString(m.Role + "\n" + m.Content + "</s>\n")
	}
	if addAss {
		b.WriteString("<s>assistant\n")
	}
	return b.String()
}

// gemma merges system messages into the next user turn; the assistant is "model".
func gemma(msgs []Message, addAss bool) string {
	// The pending system text is a builder: many system messages must not cost quadratic time.
	var b, system strings.Builder
	for _, m := range msgs {
		role := m.Role
		if role == "system" {
			system.WriteString(trimSpace(m.Content))
			continue
		}
		if role == "assistant" {
			role = "model"
		}
		b.WriteString("<start_of_turn>" + role + "\n")
		if system.Len() > 0 && role != "model" {
			b.WriteString(system.String() + "\n\n")
			system.Reset()
		}
		b.WriteString(trimSpace(m.Content) + "<end_of_turn>\n")
	}
	if addAss {
		b.WriteString("<start_of_turn>model\n")
	}
	return b.String()
}

func orion(msgs []Message, _ bool) string {
	var b, system strings.Builder
	for _, m := range msgs {
		switch m.Role {
		case "system":
			system.WriteString(m.Content)
		case "user":
			b.WriteString("Human: ")
			if system.Len() > 0 {
				b.WriteString(system.String() + "\n\n")
				system.Reset()
			}
			b.WriteString(m.Content + "\n\nAssistant: </s>")
		default:
			b.WriteString(m.Content + "</s>")
		}
	}
	return b.String()
}

func openchat(msgs []Message, addAss bool) string {
	var b strings.Builder
	for _, m := range msgs {
		if m.Role == "system" {
			b.WriteString(m.Content + "<|end_of_turn|>")
			continue
		}
		role := m.Role
		if role != "" && role[0] >= 'a' && role[0] <= 'z' {
			role = string(role[0]-'a'+'A') + role[1:]
		}
		b.WriteString("GPT4 Correct " + role + ": " + m.Content + "<|end_of_turn|>")
	}
	if addAss {
		b.WriteString("GPT4 Correct Assistant:")
	}
	return b.String()
}

func rwkvWorld(msgs []Message, _ bool) string {
	var b strings.Builder
	for i, m := range msgs {
		c := trimSpace(m.Content)
		switch m.Role {
		case "system":
			b.WriteString("System: " + c + "\n\n")
		case "user":
			b.WriteString("User: " + c + "\n\n")
			if i == len(msgs)-1 {
				b.WriteString("Assistant:")
			}
		case "assistant":
			b.WriteString("Assistant: " + c + "\n\n")
		}
	}
	return b.String()
}

// granite is IBM Granite 3.x; v4 (4.0 and 4.1) writes a tool-calling assistant turn under the
// assistant role.
func granite(v4 bool) legacyFormat {
	return func(msgs []Message, addAss bool) string {
		var b strings.Builder
		for _, m := range msgs {
			switch {
			case m.Role == "assistant_tool_call" && v4:
				b.WriteString("<|start_of_role|>assistant<|end_of_role|><|tool_call|>")
			case m.Role == "assistant_tool_call":
				b.WriteString("<|start_of_role|>assistant_tool_call<|end_of_role|><|tool_call|>")
			default:
				b.WriteString("<|start_of_role|>" + m.Role + "<|end_of_role|>")
			}
			b.WriteString(m.Content + "<|end_of_text|>\n")
		}
		if addAss {
			b.WriteString("<|start_of_role|>assistant<|end_of_role|>")
		}
		return b.String()
	}
}

func gigachat(msgs []Message, addAss bool) string {
	var b strings.Builder
	b.WriteString("<s>")
	if len(msgs) > 0 && msgs[0].Role == "system" {
		b.WriteString(msgs[0].Content + "<|message_sep|>")
		msgs = msgs[1:]
	}
	for _, m := range msgs {
		switch m.Role {
		case "user":
			b.WriteString("user<|role_sep|>" + m.Content + "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>")
		case "assistant":
			b.WriteString("assistant<|role_sep|>" + m.Content + "<|message_sep|>")
		}
	}
	if addAss {
		b.WriteString("assistant<|role_sep|>")
	}
	return b.String()
}

// bailingRole is Bailing's role name: HUMAN for the user, else the role upper-cased byte by
// byte as C's toupper does (ASCII letters only: "é" stays, where strings.ToUpper gives "É").
func bailingRole(role string) string {
	if role == "user" {
		return "HUMAN"
	}
	b := []byte(role)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func bailing(afterGen string) legacyFormat {
	return func(msgs []Message, addAss bool) string {
		var b strings.Builder
		for _, m := range msgs {
			b.WriteString("<role>" + bailingRole(m.Role) + "</role>" + m.Content)
		}
		if addAss {
			b.WriteString("<role>ASSISTANT</role>" + afterGen)
		}
		return b.String()
	}
}

func bailing2(msgs []Message, addAss bool) string {
	var b strings.Builder
	if len(msgs) == 0 || msgs[0].Role != "system" {
		b.WriteString("<role>SYSTEM</role>detailed thinking off<|role_end|>")
	}
	for _, m := range msgs {
		b.WriteString("<role>" + bailingRole(m.Role) + "</role>" + m.Content + "<|role_end|>")
	}
	if addAss {
		b.WriteString("<role>ASSISTANT</role>")
	}
	return b.String()
}

func gptOSS(msgs []Message, addAss bool) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|start|>" + m.Role + "<|message|>" + m.Content)
		if m.Role == "assistant" {
			b.WriteString("<|return|>")
		} else {
			b.WriteString("<|end|>")
		}
	}
	if addAss {
		b.WriteString("<|start|>assistant")
	}
	return b.String()
}

func hunyuanDense(msgs []Message, _ bool) string {
	var b strings.Builder
	for i, m := range msgs {
		if i == 0 && m.Role == "system" {
			b.WriteString(m.Content + "<｜hy_place▁holder▁no▁3｜>")
		}
		switch m.Role {
		case "assistant":
			b.WriteString("<｜hy_Assistant｜>" + m.Content + "<｜hy_place▁holder▁no▁2｜>")
		case "user":
			b.WriteString("<｜hy_User｜>" + m.Content + "<｜hy_Assistant｜>")
		}
	}
	return b.String()
}

func hunyuanVL(msgs []Message, _ bool) string {
	var b strings.Builder
	b.WriteString("<｜hy_begin▁of▁sentence｜>")
	for i, m := range msgs {
		switch {
		case i == 0 && m.Role == "system":
			b.WriteString(m.Content + "<｜hy_place▁holder▁no▁3｜>")
		case m.Role == "user":
			b.WriteString(m.Content + "<｜hy_User｜>")
		case m.Role == "assistant":
			b.WriteString(m.Content + "<｜hy_Assistant｜>")
		}
	}
	return b.String()
}

func seedOSS(msgs []Message, addAss bool) string {
	var b strings.Builder
	for _, m := range msgs {
		c := m.Content
		if m.Role == "assistant" {
			c = trimSpace(c)
		}
		b.WriteString("<seed:bos>" + m.Role + "\n" + c + "<seed:eos>")
	}
	if addAss {
		b.WriteString("<seed:bos>assistant\n")
	}
	return b.String()
}

func grok2(msgs []Message, addAss bool) string {
	var b strings.Builder
	for _, m := range msgs {
		switch m.Role {
		case "system":
			b.WriteString("System: " + trimSpace(m.Content) + "<|separator|>\n\n")
		case "user":
			b.WriteString("Human: " + trimSpace(m.Content) + "<|separator|>\n\n")
		case "assistant":
			b.WriteString("Assistant: " + m.Content + "<|separator|>\n\n")
		}
	}
	if addAss {
		b.WriteString("Assistant:")
	}
	return b.String()
}

func pangu(msgs []Message, addAss bool) string {
	names := map[string]string{"system": "系统", "user": "用户", "assistant": "助手", "tool": "工具", "function": "方法"}
	var b strings.Builder
	for i, m := range msgs {
		if i == 0 && m.Role != "system" {
			b.WriteString("[unused9]系统：[unused10]")
		}
		if name, ok := names[m.Role]; ok {
			b.WriteString("[unused9]" + name + "：" + m.Content + "[unused10]")
		}
	}
	if addAss {
		b.WriteString("[unused9]助手：")
	}
	return b.String()
}
