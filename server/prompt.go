package server

import (
	"fmt"
	"sort"
	"strings"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/chat"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// tokenize turns prompt text into tokens as llama-server does for completions: special tokens
// are added (BOS when the vocabulary asks for it) and special-token text such as "<s>" is parsed.
func tokenize(tok *tokenizer.Tokenizer, text string) []int32 {
	return tok.Encode(text, true, true)
}

// promptList tokenizes a prompt field as llama-server's tokenize_input_prompts: an array that
// holds token ids is one prompt (ids and strings); any other array holds several prompts, each
// a string, a JSON prompt object or an array of ids and strings; anything else is one prompt.
func promptList(tok *tokenizer.Tokenizer, p gen.Prompt, mp *mediaPrompts) ([][]int32, error) {
	switch p.Type {
	case gen.StringPrompt:
		return [][]int32{tokenize(tok, p.String)}, nil
	case gen.PromptObjectPrompt:
		ids, err := objectPromptTokens(tok, "prompt", p.PromptObject, mp)
		if err != nil {
			return nil, err
		}
		return [][]int32{ids}, nil
	}
	elems := p.PromptElementArray
	single := false
	for _, e := range elems {
		single = single || e.IsInt32()
	}
	if single {
		pieces := make([]gen.PromptPiece, len(elems))
		for i, e := range elems {
			switch {
			case e.IsInt32():
				pieces[i] = gen.NewInt32PromptPiece(e.Int32)
			case e.IsString():
				pieces[i] = gen.NewStringPromptPiece(e.String)
			default:
				return nil, invalidRequest("'prompt[%d]': a prompt of token ids may hold only token ids and strings", i)
			}
		}
		ids, err := mixedTokens(tok, "prompt", pieces, true, true)
		if err != nil {
			return nil, err
		}
		return [][]int32{ids}, nil
	}
	if len(elems) == 0 {
		return [][]int32{nil}, nil // one empty prompt, refused with the other empty prompts
	}
	out := make([][]int32, 0, len(elems))
	for i, e := range elems {
		var ids []int32
		var err error
		switch e.Type {
		case gen.StringPromptElement:
			ids = tokenize(tok, e.String)
		case gen.PromptObjectPromptElement:
			ids, err = objectPromptTokens(tok, fmt.Sprintf("prompt[%d]", i), e.PromptObject, mp)
		default:
			ids, err = mixedTokens(tok, fmt.Sprintf("prompt[%d]", i), e.PromptPieceArray, true, true)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ids)
	}
	return out, nil
}

// objectPromptTokens tokenizes llama-server's JSON prompt object {"prompt_string": ...}. Its
// multimodal_data needs a multimodal projector (mp; nil without one: refused with
// llama-server's words).
func objectPromptTokens(tok *tokenizer.Tokenizer, field string, o gen.PromptObject, mp *mediaPrompts) ([]int32, error) {
	if len(o.MultimodalData) > 0 || mp != nil {
		if mp == nil {
			return nil, invalidRequest("'%s.multimodal_data': Multimodal data provided, but model does not support multimodal requests.", field)
		}
		return mp.tokens(field, o)
	}
	if s, ok := o.PromptString.GetString(); ok {
		return tokenize(tok, s), nil
	}
	return mixedTokens(tok, field+".prompt_string", o.PromptString.PromptPieceArray, true, true)
}

// chatRequest is what the chat endpoints share: the conversation and the template options.
type chatRequest struct {
	messages            []gen.ChatMessage
	tools               gen.OptNilChatTools
	kwargs              gen.OptNilChatTemplateKwargs
	addGenerationPrompt bool
	continueFinal       bool // vLLM's continue_final_message: continue the final assistant message
	// marker stands for each image part in the rendered prompt; "" when the model takes no
	// images (an image part is then an error).
	marker string
}

// input converts r to the chat template's input, checking what llama-server checks.
func (r chatRequest) input() (chat.Input, error) {
	msgs, err := chatMessages(r.messages, r.marker)
	if err != nil {
		return chat.Input{}, err
	}
	// A last assistant message is continued (llama-server's assistant prefill); one before it
	// leaves nothing the template could render as the turn to continue.
	if n := len(msgs); n >= 2 && msgs[n-1].Role == "assistant" && msgs[n-2].Role == "assistant" {
		return chat.Input{}, invalidRequest("Cannot have 2 or more assistant messages at the end of the list.")
	}
	in := chat.Input{Messages: msgs, AddGenerationPrompt: r.addGenerationPrompt}
	if tools, ok := r.tools.Get(); ok && len(tools) > 0 {
		if in.Tools, err = toolsJSON(tools); err != nil {
			return chat.Input{}, err
		}
	}
	if kw, ok := r.kwargs.Get(); ok && len(kw) > 0 {
		if in.Kwargs, err = kwargsJSON(kw); err != nil {
			return chat.Input{}, err
		}
	}
	return in, nil
}

// errNoAudio is llama-server's answer to audio it cannot hear (no multimodal projector), a 500
// as errNoVision (anthropic.go), its answer to an image.
var errNoAudio = &apiError{typ: errServer, message: "audio input is not supported - hint: if this is unexpected, you may need to provide the mmproj"}

// chatMessages converts request messages as llama-server does: a message needs content (null
// counts, and becomes ""), an assistant message content or tool_calls; text
// parts are joined with newlines; tool calls must be functions, their arguments JSON text or
// an object (taken as its JSON text).
func chatMessages(msgs []gen.ChatMessage, marker string) ([]chat.Message, error) {
	out := make([]chat.Message, 0, len(msgs))
	for i, m := range msgs {
		switch {
		case m.Content.Set:
		case m.Role != "assistant":
			return nil, invalidRequest("messages[%d]: a %q message must have 'content'", i, m.Role)
		case !m.ToolCalls.Set:
			return nil, invalidRequest("messages[%d]: an assistant message must have 'content' or 'tool_calls'", i)
		}
		msg := chat.Message{
			Role:             m.Role,
			ReasoningContent: m.ReasoningContent.Or(""),
			Name:             m.Name.Or(""),
			ToolCallID:       m.ToolCallID.Or(""),
		}
		if c, ok := m.Content.Get(); ok {
			if s, isString := c.GetString(); isString {
				msg.Content = s
			} else {
				// Text parts are joined by newlines; an image is the media marker, with no
				// newline next to it (llama.cpp's common_chat_msgs_to_json_oaicompat).
				var sb strings.Builder
				prevText := false
				for _, part := range c.ChatContentPartArray {
					switch part.Type {
					case "text":
						if prevText {
							sb.WriteString("\n")
						}
						sb.WriteString(part.Text.Or(""))
						prevText = true
					case "image_url":
						if marker == "" { // llama-server's words without a multimodal projector
							return nil, errNoVision
						}
						if u, ok := part.ImageURL.Get(); !ok || u.URL == "" {
							return nil, invalidRequest("messages[%d]: an image_url part needs image_url.url", i)
						}
						sb.WriteString(marker)
						prevText = false
					case "input_audio":
						return nil, errNoAudio
					default:
						return nil, invalidRequest("messages[%d]: content part type %q is not supported (only \"text\" and \"image_url\")", i, part.Type)
					}
				}
				msg.Content = sb.String()
			}
		}
		calls, _ := m.ToolCalls.Get()
		for j, c := range calls {
			if c.Type != "function" {
				return nil, invalidRequest("messages[%d].tool_calls[%d]: tool call type %q is not supported (only \"function\")", i, j, c.Type)
			}
			args, err := toolArguments(c.Function.Arguments)
			if err != nil {
				return nil, invalidRequest("messages[%d].tool_calls[%d].function.arguments: %v", i, j, err)
			}
			msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{ID: c.ID.Or(""), Name: c.Function.Name, Arguments: args})
		}
		out = append(out, msg)
	}
	return out, nil
}

// toolArguments reads a tool call's arguments: JSON text in a string (OpenAI's form), or an
// object, which stands for its own JSON text.
func toolArguments(raw jx.Raw) (string, error) {
	switch raw.Type() {
	case jx.String:
		return jx.DecodeBytes(raw).Str()
	case jx.Object:
		return string(raw), nil
	}
	return "", fmt.Errorf("must be a string of JSON or an object, not %s", raw.Type())
}

// toolsJSON re-encodes the request's tools as the JSON array the template reads, in OpenAI's
// shape ({"type": "function", "function": {name, description, parameters}}), keeping each
// parameters schema as sent (its key order shows in rendered prompts).
func toolsJSON(tools []gen.ChatTool) ([]byte, error) {
	e := jx.GetEncoder()
	defer jx.PutEncoder(e)
	e.ArrStart()
	for i, t := range tools {
		if t.Type != "function" {
			return nil, invalidRequest("tools[%d]: tool type %q is not supported (only \"function\")", i, t.Type)
		}
		f := t.Function
		e.ObjStart()
		e.FieldStart("type")
		e.Str("function")
		e.FieldStart("function")
		e.ObjStart()
		e.FieldStart("name")
		e.Str(f.Name)
		e.FieldStart("description")
		e.Str(f.Description.Or(""))
		if len(f.Parameters) > 0 && f.Parameters.Type() != jx.Null {
			e.FieldStart("parameters")
			e.Raw(f.Parameters)
		}
		e.ObjEnd()
		e.ObjEnd()
	}
	e.ArrEnd()
	return append([]byte(nil), e.Bytes()...), nil
}

// kwargsJSON encodes chat_template_kwargs as one JSON object (keys sorted). As llama-server,
// enable_thinking given as a string is refused: templates test it as a boolean.
func kwargsJSON(kw gen.ChatTemplateKwargs) ([]byte, error) {
	if v, ok := kw["enable_thinking"]; ok && v.Type() == jx.String {
		return nil, invalidRequest("'chat_template_kwargs.enable_thinking' must be a boolean, not a string")
	}
	keys := make([]string, 0, len(kw))
	for k := range kw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e := jx.GetEncoder()
	defer jx.PutEncoder(e)
	e.ObjStart()
	for _, k := range keys {
		e.FieldStart(k)
		e.Raw(kw[k])
	}
	e.ObjEnd()
	return append([]byte(nil), e.Bytes()...), nil
}

// renderChat renders in with the model's template. As llama-server, a BOS (EOS) that a Jinja
// template writes at the very start (end) is removed when tokenizing adds it anyway, so the
// prompt does not get it twice; llama.cpp's built-in formatters are taken as they are.
func (l *loaded) renderChat(in chat.Input) (string, error) {
	text, err := l.template.Apply(in)
	if err != nil {
		return "", invalidRequest("rendering the chat template: %v", err)
	}
	if l.template.Builtin() {
		return text, nil
	}
	if l.tok.AddBOS() && l.tok.BOS() >= 0 {
		text = strings.TrimPrefix(text, string(l.tok.Piece(l.tok.BOS(), true)))
	}
	if l.tok.AddEOS() && l.tok.EOS() >= 0 {
		text = strings.TrimSuffix(text, string(l.tok.Piece(l.tok.EOS(), true)))
	}
	return text, nil
}
