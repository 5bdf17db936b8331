package server

import (
	"context"
	"crypto/rand"
	"net/http"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/chat/toolcall"
)

// CreateChatCompletion implements POST /v1/chat/completions, OpenAI's chat API, as JSON or as
// an event stream ending with `data: [DONE]`. Reasoning and tool calls in the output come back
// as reasoning_content and tool_calls (see chatplan.go and package toolcall). With n (or
// n_cmpl) above 1 each choice is its own generation (chatrun.go). With X-Conversation-Id the
// stream is resumable (streams.go).
func (s *Server) CreateChatCompletion(ctx context.Context, req *gen.ChatCompletionRequest, p gen.CreateChatCompletionParams, w http.ResponseWriter) error {
	m := s.model()
	if m == nil {
		return errLoading
	}
	if len(req.Messages) == 0 {
		return invalidRequest("'messages' must hold at least one message")
	}
	stream := req.Stream.Or(false)
	conversation, resumable := p.XConversationID.Get()
	if resumable && !stream {
		return invalidRequest(`X-Conversation-Id makes a resumable stream: it needs "stream": true`)
	}
	// As llama-server's oaicompat_chat_params_parse: logprobs lists top_logprobs candidates
	// per token (n_probs, 20 by default); top_logprobs alone is refused.
	nProbs := 0
	if req.Logprobs.Or(false) {
		if tools, _ := req.Tools.Get(); stream && len(tools) > 0 {
			return invalidRequest("logprobs is not supported with tools + stream")
		}
		nProbs = req.TopLogprobs.Or(20)
	} else if _, ok := req.TopLogprobs.Get(); ok {
		return invalidRequest("top_logprobs requires logprobs to be set to true")
	} else {
		nProbs = req.NProbs.Or(0) // llama-server copies native fields of the body into the task
	}
	n, err := choiceCount(req.NCmpl, req.N, m.info.NSlots)
	if err != nil {
		return err
	}
	serverTools, err := s.agentTools(req.ServerTools)
	if err != nil {
		return err
	}
	if serverTools != nil {
		if resumable {
			return invalidRequest("'server_tools' does not make resumable streams (X-Conversation-Id)")
		}
		return s.runAgent(ctx, m, req, serverTools, n, nProbs, w)
	}
	if id, ok := req.SessionID.Get(); ok && id != "" {
		return invalidRequest("'session_id' keeps the conversations of 'server_tools', which this request does not name")
	}
	pl, err := s.chatPlan(ctx, m, req, stream)
	if err != nil {
		return err
	}
	pl.params.NProbs = nProbs
	model := req.Model.Or("")
	if model == "" {
		model = m.name
	}
	run := &chatRun{
		server: s,
		head: chatHead{
			id:          newChatID(),
			created:     time.Now().Unix(),
			model:       model,
			fingerprint: s.cfg.SystemFingerprint,
		},
		tok:         m.tok,
		syntax:      pl.syntax,
		logprobs:    nProbs > 0, // as llama-server, no probabilities means no logprobs field
		topLogprobs: nProbs,
		n:           n,
		ping:        s.pingInterval(req.SsePingInterval),
		nPrompt:     len(pl.prompt),
		nCtx:        m.info.NCtx,
		// timingsPerToken: every chunk carries the timings so far, as llama-server's.
		timingsPerToken: pl.params.TimingsPerToken,
	}
	if so, ok := req.StreamOptions.Get(); ok {
		run.includeUsage = so.IncludeUsage.Or(false)
	}
	if s.verboseOf(req.Verbose) {
		run.verbose = func(text string, final engine.Result) gen.CompletionResponse {
			return s.verboseAnswer(m, pl.prompt, pl.params, stream, text, final)
		}
	}
	pl.params.ControlID = run.head.id // what POST /v1/chat/completions/control names
	tasks := generationTasks(pl.prompt, pl.params, stream, slotOf(req.IDSlot), n)
	if resumable {
		return s.startResumable(ctx, string(conversation), m.backend, tasks, run, w)
	}

	set, _, err := submitAll(ctx, m.backend, tasks)
	if err != nil {
		return run.fail(err)
	}
	defer set.close()
	if stream {
		sse := newSSE(w, run.ping)
		if err := run.stream(ctx, set, sse); err != nil && !sse.started {
			return err // nothing sent yet: an ordinary JSON error
		}
		return nil
	}
	resp, err := run.collect(ctx, set)
	if err != nil {
		if ctx.Err() != nil {
			return nil // the client is gone; nobody reads an answer
		}
		return err
	}
	return writeJSON(w, resp)
}

// CreateChatCompletionAlias implements POST /chat/completions, an alias of POST
// /v1/chat/completions.
func (s *Server) CreateChatCompletionAlias(ctx context.Context, req *gen.ChatCompletionRequest, p gen.CreateChatCompletionAliasParams, w http.ResponseWriter) error {
	return s.CreateChatCompletion(ctx, req, gen.CreateChatCompletionParams{XConversationID: p.XConversationID}, w)
}

// CreateChatCompletionOllamaAlias implements POST /api/chat (ollama's path), an alias of POST
// /v1/chat/completions: the request and the answer are OpenAI's, as in llama-server.
func (s *Server) CreateChatCompletionOllamaAlias(ctx context.Context, req *gen.ChatCompletionRequest, p gen.CreateChatCompletionOllamaAliasParams, w http.ResponseWriter) error {
	return s.CreateChatCompletion(ctx, req, gen.CreateChatCompletionParams{XConversationID: p.XConversationID}, w)
}

// responseMessage is the assistant message of a chat answer: content (null when the message
// only calls tools), reasoning_content when there is reasoning, and the tool calls.
func responseMessage(msg toolcall.Message) gen.ChatResponseMessage {
	out := gen.ChatResponseMessage{Role: "assistant", Content: gen.NewNilString(msg.Content)}
	if msg.Content == "" && len(msg.Calls) > 0 {
		out.Content = gen.NilString{Null: true}
	}
	if msg.Reasoning != "" {
		out.ReasoningContent = gen.NewOptString(msg.Reasoning)
	}
	for _, c := range msg.Calls {
		out.ToolCalls = append(out.ToolCalls, gen.ChatResponseToolCall{
			Type:     "function",
			Function: gen.ChatResponseFunction{Name: c.Name, Arguments: c.Arguments},
			ID:       c.ID,
		})
	}
	return out
}

// chatDelta is one streamed change as a chunk's delta. A tool call's first delta has its index,
// id, type and name with empty arguments; later ones its index and a piece of the arguments.
func chatDelta(d toolcall.Delta) gen.ChatDelta {
	switch {
	case d.IsTool():
		tc := gen.ChatDeltaToolCall{Index: d.ToolIndex, Function: gen.ChatDeltaFunction{Arguments: d.ToolArgs}}
		if d.ToolID != "" {
			tc.ID = gen.NewOptString(d.ToolID)
		}
		if d.ToolName != "" {
			tc.Type = gen.NewOptString("function")
			tc.Function.Name = gen.NewOptString(d.ToolName)
		}
		return gen.ChatDelta{ToolCalls: []gen.ChatDeltaToolCall{tc}}
	case d.Reasoning != "":
		return gen.ChatDelta{ReasoningContent: gen.NewOptString(d.Reasoning)}
	}
	return gen.ChatDelta{Content: gen.NewOptNilString(d.Content)}
}

// chatFinishReason is OpenAI's finish_reason for a chat answer: "length" when the token limit
// ended it, "tool_calls" when it calls tools, "stop" otherwise.
func chatFinishReason(t engine.StopType, msg toolcall.Message) string {
	if t != engine.StopLimit && len(msg.Calls) > 0 {
		return "tool_calls"
	}
	return finishReason(t)
}

// ApplyTemplate implements POST /apply-template: the prompt a chat request would generate from.
func (s *Server) ApplyTemplate(_ context.Context, req *gen.ApplyTemplateRequest) (*gen.ApplyTemplateResponse, error) {
	m := s.model()
	if m == nil {
		return nil, errLoading
	}
	text, err := m.chatPrompt(chatRequest{
		messages:            req.Messages,
		tools:               req.Tools,
		kwargs:              req.ChatTemplateKwargs,
		addGenerationPrompt: req.AddGenerationPrompt.Or(true),
		continueFinal:       req.ContinueFinalMessage.Or(false),
		marker:              m.marker(), // an image shows as the media marker
	}, s.cfg)
	if err != nil {
		return nil, err
	}
	return &gen.ApplyTemplateResponse{Prompt: text}, nil
}

// chatPrompt renders a chat request into prompt text, with the server's reasoning settings.
func (l *loaded) chatPrompt(r chatRequest, cfg Config) (string, error) {
	ci, err := l.chatInput(r, cfg)
	if err != nil {
		return "", err
	}
	text, err := l.renderChat(ci.Input)
	return text + ci.prefill, err
}

// chatHead is what every response and chunk of one chat completion repeats.
type chatHead struct {
	id          string
	created     int64
	model       string
	fingerprint string
}

// chunk builds a stream chunk with choice index carrying delta and a null finish_reason.
func (h chatHead) chunk(index int, delta gen.ChatDelta) gen.ChatCompletionChunk {
	return gen.ChatCompletionChunk{
		Choices:           []gen.ChatChunkChoice{{FinishReason: gen.NilString{Null: true}, Index: index, Delta: delta}},
		Created:           h.created,
		ID:                h.id,
		Model:             h.model,
		SystemFingerprint: h.fingerprint,
		Object:            "chat.completion.chunk",
	}
}

// finishReason is OpenAI's finish_reason: "length" when the token limit ended generation,
// otherwise "stop".
func finishReason(t engine.StopType) string {
	if t == engine.StopLimit {
		return "length"
	}
	return "stop"
}

// usage is OpenAI's token accounting for a final result.
func usage(final engine.Result) gen.Usage {
	return gen.Usage{
		CompletionTokens:    final.TokensPredicted,
		PromptTokens:        final.TokensEvaluated,
		TotalTokens:         final.TokensEvaluated + final.TokensPredicted,
		PromptTokensDetails: gen.PromptTokensDetails{CachedTokens: final.Timings.CacheN},
	}
}

// newChatID returns "chatcmpl-" and 32 random alphanumerics, as llama-server's ids.
func newChatID() string { return "chatcmpl-" + randomString(32) }

// newToolCallID returns 32 random alphanumerics, as llama-server's gen_tool_call_id.
func newToolCallID() string { return randomString(32) }

// randomString returns n random letters and digits.
func randomString(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	const unbiased = 256 / len(alphabet) * len(alphabet) // bytes at or above this would skew the draw
	var sb strings.Builder
	var b [64]byte
	for sb.Len() < n {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		for _, c := range b {
			if int(c) < unbiased && sb.Len() < n {
				sb.WriteByte(alphabet[int(c)%len(alphabet)])
			}
		}
	}
	return sb.String()
}
