package server

import (
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// tokenize turns prompt text into tokens as llama-server does for completions: special tokens
// are added (BOS when the vocabulary asks for it) and special-token text such as "<s>" is parsed.
func tokenize(tok *tokenizer.Tokenizer, text string) []int32 {
	return tok.Encode(text, true, true)
}

// promptTokens tokenizes a native /completion prompt: a string, or one prompt written as an
// array of token ids and strings. As llama-server's tokenize_mixed, only the first element may
// bring BOS (when it is a string); token ids are taken as they are, after a range check.
func promptTokens(tok *tokenizer.Tokenizer, p gen.Prompt) ([]int32, error) {
	if s, ok := p.GetString(); ok {
		return tokenize(tok, s), nil
	}
	pieces := p.PromptPieceArray
	strs := 0
	for _, piece := range pieces {
		if piece.IsString() {
			strs++
		}
	}
	if strs > 1 && strs == len(pieces) {
		// llama-server reads an array of strings as several prompts and answers each.
		return nil, invalidRequest("'prompt' holds %d prompts; only one prompt per request is supported", strs)
	}
	var out []int32
	n := int32(tok.NVocab())
	for i, piece := range pieces {
		if s, ok := piece.GetString(); ok {
			out = append(out, tok.Encode(s, i == 0, true)...)
			continue
		}
		id := piece.Int32
		if id < 0 || id >= n {
			return nil, invalidRequest("'prompt' token %d is out of range (the vocabulary has %d tokens)", id, n)
		}
		out = append(out, id)
	}
	return out, nil
}

// chatMessages flattens request messages to text: null content becomes "" (as llama-server
// does for an assistant turn that only calls tools) and text parts are joined with newlines.
func chatMessages(msgs []gen.ChatMessage) ([]chat.Message, error) {
	out := make([]chat.Message, 0, len(msgs))
	for i, m := range msgs {
		msg := chat.Message{Role: m.Role}
		if c, ok := m.Content.Get(); ok {
			if s, isString := c.GetString(); isString {
				msg.Content = s
			} else {
				texts := make([]string, 0, len(c.ChatContentPartArray))
				for _, part := range c.ChatContentPartArray {
					if part.Type != "text" {
						return nil, invalidRequest("messages[%d]: content part type %q is not supported (only \"text\")", i, part.Type)
					}
					texts = append(texts, part.Text.Or(""))
				}
				msg.Content = strings.Join(texts, "\n")
			}
		}
		out = append(out, msg)
	}
	return out, nil
}

// renderChat renders msgs with the model's template. As llama-server, a BOS (EOS) that the
// template writes at the very start (end) is removed when tokenizing adds it anyway, so the
// prompt does not get it twice.
func (l *loaded) renderChat(msgs []chat.Message, addGenerationPrompt bool) (string, error) {
	text, err := l.template.Render(msgs, addGenerationPrompt)
	if err != nil {
		return "", invalidRequest("rendering the chat template: %v", err)
	}
	if l.tok.AddBOS() && l.tok.BOS() >= 0 {
		text = strings.TrimPrefix(text, string(l.tok.Piece(l.tok.BOS(), true)))
	}
	if l.tok.AddEOS() && l.tok.EOS() >= 0 {
		text = strings.TrimSuffix(text, string(l.tok.Piece(l.tok.EOS(), true)))
	}
	return text, nil
}
