// Package chat renders chat messages into the prompt text a model was trained on, as
// llama-server's chat templates do.
//
// Templates are Jinja sources (tokenizer.chat_template from the GGUF, a file, or one of
// llama.cpp's built-in names) rendered by package jinja with llama-server's context and message
// normalisation; llama.cpp's ChatML template is the fallback when a model has none.
package chat

import (
	"strings"

	"github.com/charmbracelet/log"
)

// Message is one turn of a conversation, with its content already flattened to text.
type Message struct {
	Role    string // "system", "user", "assistant" or "tool"; "developer" renders as "system"
	Content string // the text, already flattened from any content parts
	// ReasoningContent is an assistant's reasoning ("thinking") text, if any.
	ReasoningContent string
	// Name is the optional author name.
	Name string
	// ToolCallID links a "tool" message to the call it answers.
	ToolCallID string
	// ToolCalls are the function calls an assistant message makes.
	ToolCalls []ToolCall
}

// ToolCall is one function call of an assistant message.
type ToolCall struct {
	ID   string // the call's id, which a later tool message's ToolCallID answers; may be ""
	Name string // the function called
	// Arguments is the JSON text of the arguments, as OpenAI's API carries it.
	Arguments string
}

// ChatMLSource is llama.cpp's built-in ChatML template (CHATML_TEMPLATE_SRC in common/chat.cpp),
// which llama-server uses when the GGUF has no tokenizer.chat_template and reports in /props.
const ChatMLSource = "{%- for message in messages -%}\n" +
	"  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n" +
	"{%- endfor -%}\n" +
	"{%- if add_generation_prompt -%}\n" +
	"  {{- '<|im_start|>assistant\n' -}}\n" +
	"{%- endif -%}"

// ChatML renders msgs as ChatMLSource does: each message as "<|im_start|>ROLE\nCONTENT<|im_end|>\n",
// then "<|im_start|>assistant\n" when addGenerationPrompt is set.
func ChatML(msgs []Message, addGenerationPrompt bool) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|im_start|>")
		b.WriteString(m.Role)
		b.WriteByte('\n')
		b.WriteString(m.Content)
		b.WriteString("<|im_end|>\n")
	}
	if addGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String()
}

// ForModel picks the template for a model whose GGUF holds tokenizer.chat_template src ("" when
// it has none). It is the one place that makes this choice: without a template llama-server falls
// back to ChatML, and so do we; a template that does not parse is logged and ChatML is used too.
// The returned template renders bos_token and eos_token as ""; set them with WithSpecialTokens.
func ForModel(src string, logger *log.Logger) Template {
	if src == "" || src == ChatMLSource {
		return chatMLTemplate()
	}
	t, err := New(src, "gguf")
	if err != nil {
		if logger != nil {
			logger.Warn("chat template from the GGUF does not parse; using ChatML", "err", err)
		}
		return chatMLTemplate()
	}
	return t
}

// chatMLTemplate is the fallback template.
func chatMLTemplate() Template {
	t, err := New(ChatMLSource, "chatml")
	if err != nil {
		panic("chat: the built-in ChatML template does not parse: " + err.Error())
	}
	return t
}
