package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/chat/toolcall"
)

// anthropicMaxTokens is llama-server's max_tokens when a messages request has none (Anthropic
// requires the field; llama-server is lenient).
const anthropicMaxTokens = 4096

// errNoVision is llama-server's answer to an image it cannot see (no multimodal projector): a
// 500 server_error, as llama-server throws it as a runtime error from its chat parsing.
var errNoVision = &apiError{typ: errServer, message: "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"}

// CreateAnthropicMessage implements POST /v1/messages, Anthropic's Messages API, as a message or
// as Anthropic's event stream.
func (s *Server) CreateAnthropicMessage(ctx context.Context, req *gen.AnthropicMessagesRequest, w http.ResponseWriter) error {
	m := s.model()
	if m == nil {
		return errLoading
	}
	g, err := anthropicGeneration(m, req)
	if err != nil {
		return err
	}
	if g.media, err = s.encodeImages(ctx, m, imageURLs(g.messages)); err != nil {
		return err
	}
	pl, err := m.plan(g, s.cfg)
	if err != nil {
		return err
	}
	model := req.Model.Or("")
	if model == "" {
		model = m.name
	}
	ch, err := m.backend.Submit(ctx, engine.Task{Prompt: pl.prompt, Params: pl.params})
	if err != nil {
		return submitError(err, len(pl.prompt), m.info.NCtx)
	}
	defer drain(ch)
	fail := func(err error) *apiError { return submitError(err, len(pl.prompt), m.info.NCtx) }
	parsed := toolcall.NewStream(pl.syntax, newToolCallID)
	id := newChatID()

	if !g.stream {
		msg, final, gone, err := collectMessage(ctx, ch, parsed, fail)
		if gone || err != nil {
			return err
		}
		out := anthropicMessage(id, model, final)
		out.Content = anthropicBlocks(msg)
		out.StopReason = gen.NewNilString(stopReason(final.StopType, msg))
		return writeJSON(w, &out)
	}

	sse := newSSE(w, s.pingInterval(req.SsePingInterval))
	as := anthropicStream{sse: sse}
	for {
		res, over, err := s.nextStreamed(ctx, ch, sse, fail, func(ae *apiError) {
			body := ae.body()
			_ = sse.event("error", &body.Error)
		})
		if over {
			return err
		}
		if !as.begun {
			start := anthropicMessage(id, model, res)
			start.Usage.OutputTokens = 0
			start.StopReason, start.StopSequence = gen.NilString{Null: true}, gen.NilString{Null: true}
			if as.send(gen.AnthropicStreamEvent{Type: "message_start", Message: gen.NewOptAnthropicMessage(start)}) != nil {
				return nil
			}
			as.begun = true
		}
		deltas, msg := parseStep(parsed, res)
		if as.deltas(deltas, parsed.Message()) != nil {
			return nil
		}
		if !res.Stop {
			continue
		}
		noteTokens(ctx, res.TokensEvaluated, res.TokensPredicted)
		_ = as.finish(msg, res)
		return nil
	}
}

// CountAnthropicTokens implements POST /v1/messages/count_tokens: the prompt a messages request
// would be rendered to, in tokens.
func (s *Server) CountAnthropicTokens(ctx context.Context, req *gen.AnthropicMessagesRequest) (*gen.AnthropicTokenCount, error) {
	m := s.model()
	if m == nil {
		return nil, errLoading
	}
	g, err := anthropicGeneration(m, req)
	if err != nil {
		return nil, err
	}
	if g.media, err = s.encodeImages(ctx, m, imageURLs(g.messages)); err != nil {
		return nil, err
	}
	pl, err := m.plan(g, s.cfg)
	if err != nil {
		return nil, err
	}
	return &gen.AnthropicTokenCount{InputTokens: len(pl.prompt)}, nil
}

// anthropicGeneration converts a messages request to a chat generation as llama-server's
// convert_anthropic_to_oai: the system text becomes a system message; text blocks become text
// parts, tool_use blocks tool calls and tool_result blocks "tool" messages after their message;
// tools take their input_schema as parameters; other block types are skipped.
func anthropicGeneration(m *loaded, req *gen.AnthropicMessagesRequest) (chatGeneration, error) {
	var msgs []gen.ChatMessage
	if sys, ok := req.System.Get(); ok {
		text := sys.String
		if !sys.IsString() {
			// A builder: adding to a string copies it, quadratic in the blocks.
			var sb strings.Builder
			for _, b := range sys.AnthropicContentBlockArray {
				if b.Type == "text" {
					sb.WriteString(b.Text.Or(""))
				}
			}
			text = sb.String()
		}
		msgs = append(msgs, gen.ChatMessage{Role: "system", Content: gen.NewOptNilChatMessageContent(gen.NewStringChatMessageContent(text))})
	}
	for i, am := range req.Messages {
		content, ok := am.Content.Get()
		switch {
		case !ok && am.Role == "assistant":
			continue
		case !ok:
			msgs = append(msgs, gen.ChatMessage{Role: am.Role})
			continue
		case content.IsString():
			msgs = append(msgs, gen.ChatMessage{Role: am.Role, Content: gen.NewOptNilChatMessageContent(gen.NewStringChatMessageContent(content.String))})
			continue
		}
		var parts []gen.ChatContentPart
		var calls []gen.ChatToolCall
		var results []gen.ChatMessage
		var reasoning strings.Builder
		for j, b := range content.AnthropicContentBlockArray {
			switch b.Type {
			case "text":
				parts = append(parts, gen.ChatContentPart{Type: "text", Text: gen.NewOptString(b.Text.Or(""))})
			case "thinking": // an earlier answer's reasoning, which templates such as Qwen3's render
				reasoning.WriteString(b.Thinking.Or(""))
			case "image":
				// llama-server turns a base64 or url source into an image_url part, which a
				// model without a projector refuses; other sources are dropped.
				if !imageSource(b.Source) {
					continue
				}
				if m.marker() == "" {
					return chatGeneration{}, errNoVision
				}
				u, err := anthropicImageURL(b.Source)
				if err != nil {
					return chatGeneration{}, invalidRequest("messages[%d].content[%d].source: %v", i, j, err)
				}
				parts = append(parts, gen.ChatContentPart{Type: "image_url", ImageURL: gen.NewOptImageURL(gen.ImageURL{URL: u})})
			case "tool_use":
				args := jx.Raw("{}")
				if !isNull(b.Input) {
					var buf bytes.Buffer
					if err := json.Compact(&buf, b.Input); err != nil || jx.Raw(buf.Bytes()).Type() != jx.Object {
						return chatGeneration{}, invalidRequest("messages[%d].content[%d].input must be an object", i, j)
					}
					args = buf.Bytes()
				}
				calls = append(calls, gen.ChatToolCall{
					ID: gen.NewOptNilString(b.ID.Or("")), Type: "function",
					Function: gen.ChatToolCallFunction{Name: b.Name.Or(""), Arguments: args},
				})
			case "tool_result":
				text, err := toolResultText(b.Content)
				if err == errNoVision {
					return chatGeneration{}, err
				} else if err != nil {
					return chatGeneration{}, invalidRequest("messages[%d].content[%d].content: %v", i, j, err)
				}
				results = append(results, gen.ChatMessage{
					Role:       "tool",
					ToolCallID: gen.NewOptNilString(b.ToolUseID.Or("")),
					Content:    gen.NewOptNilChatMessageContent(gen.NewStringChatMessageContent(text)),
				})
			}
		}
		if len(parts) > 0 || len(calls) > 0 || reasoning.Len() > 0 {
			msg := gen.ChatMessage{Role: am.Role, Content: gen.NewOptNilChatMessageContent(gen.NewStringChatMessageContent(""))}
			if reasoning.Len() > 0 {
				msg.ReasoningContent = gen.NewOptNilString(reasoning.String())
			}
			if len(parts) > 0 {
				msg.Content = gen.NewOptNilChatMessageContent(gen.NewChatContentPartArrayChatMessageContent(parts))
			}
			if len(calls) > 0 {
				msg.ToolCalls = gen.NewOptNilChatToolCallArray(calls)
			}
			msgs = append(msgs, msg)
		}
		msgs = append(msgs, results...)
	}

	var tools gen.ChatTools
	if list, ok := req.Tools.Get(); ok {
		for _, t := range list {
			params := t.InputSchema
			if isNull(params) {
				params = jx.Raw("{}")
			}
			tools = append(tools, gen.ChatTool{Type: "function", Function: gen.ChatToolFunction{
				Name: t.Name, Description: gen.NewOptNilString(t.Description.Or("")), Parameters: params,
			}})
		}
	}
	choice, err := anthropicToolChoice(req.ToolChoice)
	if err != nil {
		return chatGeneration{}, err
	}
	g := chatGeneration{
		chatRequest: chatRequest{messages: msgs, kwargs: req.ChatTemplateKwargs, addGenerationPrompt: true, marker: m.marker()},
		toolChoice:  choice,
		stream:      req.Stream.Or(false),
		budget:      reasoningBudget{alias: anthropicThinkingBudget(req.Thinking)},
	}
	if len(tools) > 0 {
		g.tools = gen.NewOptNilChatTools(tools)
	}
	nPredict := gen.NewOptNilInt(anthropicMaxTokens)
	if _, ok := req.MaxTokens.Get(); ok {
		nPredict = req.MaxTokens
	}
	g.sampling = samplingFields{
		nPredict:    nPredict,
		temperature: req.Temperature,
		topK:        req.TopK,
		topP:        req.TopP,
		nCtx:        m.info.NCtx,
		tok:         m.tok,
		byModel:     m.adapterNamed(req.Model.Or("")),
	}
	if stops, ok := req.StopSequences.Get(); ok {
		g.sampling.stop = gen.NewOptNilStop(gen.NewStringArrayStop(stops))
	}
	return g, nil
}

// toolResultText is a tool_result's content: a string, or its text blocks joined. An image
// block with a base64 or url source is errNoVision, as llama-server passes it on as an
// image_url part; a result that had images of other sources keeps its text blocks as parts,
// which join with newlines.
func toolResultText(raw jx.Raw) (string, error) {
	switch {
	case isNull(raw):
		return "", nil
	case raw.Type() == jx.String:
		return jx.DecodeBytes(raw).Str()
	case raw.Type() == jx.Array:
		var blocks []struct {
			Type   string          `json:"type"`
			Text   string          `json:"text"`
			Source json.RawMessage `json:"source"`
		}
		if err := json.Unmarshal(raw, &blocks); err != nil {
			return "", err
		}
		var texts []string
		images := false
		for _, b := range blocks {
			switch b.Type {
			case "image":
				if imageSource(jx.Raw(b.Source)) {
					return "", errNoVision
				}
				images = true
			case "text":
				texts = append(texts, b.Text)
			}
		}
		if images {
			return strings.Join(texts, "\n"), nil
		}
		return strings.Join(texts, ""), nil
	}
	return "", errString("must be a string or an array of content blocks")
}

// imageSource reports whether an image block's source is one llama-server converts to an
// image_url part: {"type":"base64",...} or {"type":"url",...}.
func imageSource(raw jx.Raw) bool {
	var src struct {
		Type string `json:"type"`
	}
	if raw.Type() != jx.Object || json.Unmarshal(raw, &src) != nil {
		return false
	}
	return src.Type == "base64" || src.Type == "url"
}

// anthropicImageURL is an image block's source as an image_url URL: a base64 source as a
// data: URI of its media_type, a url source as its url.
func anthropicImageURL(raw jx.Raw) (string, error) {
	var src struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	}
	if err := json.Unmarshal(raw, &src); err != nil {
		return "", err
	}
	if src.Type == "url" {
		return src.URL, nil
	}
	if src.MediaType == "" || src.Data == "" {
		return "", errors.New("a base64 source needs media_type and data")
	}
	return "data:" + src.MediaType + ";base64," + src.Data, nil
}

// errString is an error with a fixed message.
type errString string

func (e errString) Error() string { return string(e) }

// anthropicToolChoice maps Anthropic's tool_choice to OpenAI's: auto, any (some tool must be
// called, llama-server's "required"), tool (llama-server also maps it to "required"; here the
// named tool is required) and none.
func anthropicToolChoice(tc gen.OptNilAnthropicToolChoice) (jx.Raw, error) {
	c, ok := tc.Get()
	if !ok {
		return nil, nil
	}
	switch c.Type {
	case "auto":
		return jx.Raw(`"auto"`), nil
	case "any":
		return jx.Raw(`"required"`), nil
	case "none":
		return jx.Raw(`"none"`), nil
	case "tool":
		name, ok := c.Name.Get()
		if !ok || name == "" {
			return nil, invalidRequest("'tool_choice' of type \"tool\" needs a 'name'")
		}
		fn, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": name}})
		return fn, nil
	}
	return nil, invalidRequest("'tool_choice' type must be \"auto\", \"any\", \"tool\" or \"none\" (got %q)", c.Type)
}

// anthropicMessage is the message object for a final result, without content.
func anthropicMessage(id, model string, res engine.Result) gen.AnthropicMessage {
	return gen.AnthropicMessage{
		ID:           id,
		Type:         "message",
		Role:         "assistant",
		Content:      []gen.AnthropicOutputBlock{},
		Model:        model,
		StopSequence: stopSequence(res),
		Usage:        anthropicUsage(res),
	}
}

// anthropicUsage is a message's token accounting as llama-server gives it: the prompt tokens
// reused from the slot's cache as cache_read_input_tokens, the rest as input_tokens.
func anthropicUsage(res engine.Result) gen.AnthropicUsage {
	return gen.AnthropicUsage{
		CacheReadInputTokens: gen.NewOptInt(res.Timings.CacheN),
		InputTokens:          gen.NewOptInt(res.TokensEvaluated - res.Timings.CacheN),
		OutputTokens:         res.TokensPredicted,
	}
}

// stopReason is Anthropic's stop_reason as llama-server gives it: max_tokens at the token
// limit, else tool_use when the answer calls tools and end_turn otherwise (a stop sequence
// too, with stop_sequence set).
func stopReason(t engine.StopType, msg toolcall.Message) string {
	switch {
	case t == engine.StopLimit:
		return "max_tokens"
	case len(msg.Calls) > 0:
		return "tool_use"
	}
	return "end_turn"
}

// stopSequence is the stop string that ended generation, or null.
func stopSequence(res engine.Result) gen.NilString {
	if res.StoppingWord == "" {
		return gen.NilString{Null: true}
	}
	return gen.NewNilString(res.StoppingWord)
}

// anthropicBlocks are a message's content blocks: thinking (with an empty signature: a local
// model cannot sign), text, then one tool_use block per call.
func anthropicBlocks(msg toolcall.Message) []gen.AnthropicOutputBlock {
	out := []gen.AnthropicOutputBlock{}
	if msg.Reasoning != "" {
		out = append(out, gen.AnthropicOutputBlock{Type: "thinking", Thinking: gen.NewOptString(msg.Reasoning), Signature: gen.NewOptString("")})
	}
	if msg.Content != "" {
		out = append(out, gen.AnthropicOutputBlock{Type: "text", Text: gen.NewOptString(msg.Content)})
	}
	for _, c := range msg.Calls {
		out = append(out, gen.AnthropicOutputBlock{Type: "tool_use", ID: gen.NewOptString(c.ID), Name: gen.NewOptString(c.Name), Input: toolInput(c.Arguments)})
	}
	return out
}

// toolInput is a call's arguments as a JSON object; arguments that are not one give {}, as
// llama-server.
func toolInput(args string) jx.Raw {
	if !json.Valid([]byte(args)) || jx.Raw(args).Type() != jx.Object {
		return jx.Raw("{}")
	}
	return jx.Raw(args)
}

// anthropicThinkingBudget is the reasoning budget of Anthropic's thinking parameter, as
// llama-server reads it: {"type": "enabled", "budget_tokens": N} (N defaults to 10000); any
// other value sets none.
func anthropicThinkingBudget(raw jx.Raw) gen.OptNilInt {
	var t struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
	}
	if isNull(raw) || json.Unmarshal(raw, &t) != nil || t.Type != "enabled" {
		return gen.OptNilInt{}
	}
	if t.BudgetTokens == nil {
		return gen.NewOptNilInt(10000)
	}
	return gen.NewOptNilInt(*t.BudgetTokens)
}
