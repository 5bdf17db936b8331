package server

import (
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
)

// prefill applies llama-server's assistant prefill: a conversation that ends with an assistant
// message (with --prefill-assistant, the default, or the request's continue_final_message) is
// rendered without it, with the generation prompt, and the message's text is appended so the
// model continues it. It drops that message from in and returns its text and whether there
// is one. thinks is whether the template is asked to think, which a prefill cannot be.
func prefill(r chatRequest, in *chat.Input, thinks bool, cfg Config) (string, bool, error) {
	if r.continueFinal && r.addGenerationPrompt {
		return "", false, invalidRequest("Cannot use both add_generation_prompt and continue_final_message; set \"add_generation_prompt\": false to continue the final message.")
	}
	n := len(in.Messages)
	if n == 0 || in.Messages[n-1].Role != "assistant" || (cfg.NoPrefillAssistant && !r.continueFinal) {
		return "", false, nil
	}
	if n > 1 && in.Messages[n-2].Role == "assistant" {
		return "", false, invalidRequest("Cannot have 2 or more assistant messages at the end of the list.")
	}
	if len(in.Messages[n-1].ToolCalls) > 0 {
		return "", false, invalidRequest("Cannot continue an assistant message that contains tool calls.")
	}
	if thinks {
		return "", false, invalidRequest("Assistant response prefill is incompatible with enable_thinking.")
	}
	in.Messages = in.Messages[:n-1]
	in.AddGenerationPrompt = true
	return continuedText(r.messages[len(r.messages)-1]), true, nil
}

// continuedText is what a prefilled assistant message appends: its text, or its text parts
// joined by blank lines (llama.cpp's rendering of a continued message's content parts).
func continuedText(m gen.ChatMessage) string {
	c, ok := m.Content.Get()
	if !ok {
		return ""
	}
	if s, ok := c.GetString(); ok {
		return s
	}
	texts := make([]string, 0, len(c.ChatContentPartArray))
	for _, p := range c.ChatContentPartArray {
		texts = append(texts, p.Text.Or(""))
	}
	return strings.Join(texts, "\n\n")
}
