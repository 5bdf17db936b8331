// Package chat renders chat messages into the prompt text a model was trained on, as
// llama-server's chat templates do.
//
// Only llama.cpp's built-in ChatML fallback is implemented; Jinja templates from GGUF files come
// later and will plug in behind ForModel.
package chat

import (
	"strings"

	"github.com/charmbracelet/log"
)

// Message is one turn of a conversation, with its content already flattened to text.
type Message struct {
	Role    string
	Content string
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

// Template renders conversations into prompts for one model.
type Template struct {
	// Source is the Jinja source whose output Render reproduces (what /props reports as
	// chat_template).
	Source string
	// Name says which renderer is used, for logs ("chatml").
	Name string

	render func(msgs []Message, addGenerationPrompt bool) (string, error)
}

// Render renders msgs, ending with the assistant's turn opener when addGenerationPrompt is set.
// The error is for templates that reject a conversation; ChatML never does.
func (t Template) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	if t.render == nil {
		return ChatML(msgs, addGenerationPrompt), nil
	}
	return t.render(msgs, addGenerationPrompt)
}

// ForModel picks the template for a model whose GGUF holds tokenizer.chat_template src ("" when
// it has none). It is the one place that makes this choice: without a template llama-server falls
// back to ChatML, and so do we; a GGUF template cannot be rendered until Jinja support lands, so
// for now it is logged as ignored and ChatML is used as well.
func ForModel(src string, logger *log.Logger) Template {
	if src != "" && src != ChatMLSource && logger != nil {
		logger.Warn("chat template from the GGUF is not supported yet (no Jinja renderer); using ChatML",
			"template_bytes", len(src))
	}
	return Template{
		Source: ChatMLSource,
		Name:   "chatml",
		render: func(msgs []Message, add bool) (string, error) { return ChatML(msgs, add), nil },
	}
}
