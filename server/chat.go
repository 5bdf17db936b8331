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
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// CreateChatCompletion implements POST /v1/chat/completions, OpenAI's chat API, as JSON or as
// an event stream ending with `data: [DONE]`. Reasoning and tool calls in the output come back
// as reasoning_content and tool_calls (see chatplan.go and package toolcall). With
// X-Conversation-Id the stream is resumable (streams.go).
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
	// logprobs asks for each token's log-probability, top_logprobs for that many candidates.
	logprobs, topLogprobs := req.Logprobs.Or(false), req.TopLogprobs.Or(0)
	if tools, _ := req.Tools.Get(); logprobs && stream && len(tools) > 0 {
		return invalidRequest("logprobs is not supported with tools + stream")
	}
	pl, err := m.plan(chatGeneration{
		chatRequest: chatRequest{
			messages:            req.Messages,
			tools:               req.Tools,
			kwargs:              req.ChatTemplateKwargs,
			addGenerationPrompt: req.AddGenerationPrompt.Or(true),
		},
		toolChoice:      req.ToolChoice,
		parallel:        req.ParallelToolCalls.Or(false),
		reasoningFormat: req.ReasoningFormat,
		stream:          stream,
		sampling:        m.samplingFields(req, firstSet(req.NPredict, req.MaxCompletionTokens, req.MaxTokens)),
	}, s.cfg)
	if err != nil {
		return err
	}
	if logprobs {
		pl.params.NProbs = max(topLogprobs, 1)
	}
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
		logprobs:    logprobs,
		topLogprobs: topLogprobs,
		nPrompt:     len(pl.prompt),
		nCtx:        m.info.NCtx,
	}
	if so, ok := req.StreamOptions.Get(); ok {
		run.includeUsage = so.IncludeUsage.Or(false)
	}
	task := engine.Task{Prompt: pl.prompt, Params: pl.params, Stream: stream}
	if resumable {
		return s.startResumable(ctx, string(conversation), m.backend, task, run, w)
	}

	ch, err := m.backend.Submit(ctx, task)
	if err != nil {
		return run.fail(err)
	}
	defer drain(ch)
	if stream {
		sse := newSSE(w)
		if err := run.stream(ctx, ch, sse); err != nil && !sse.started {
			return err // nothing sent yet: an ordinary JSON error
		}
		return nil
	}

	var c completion
	final, err := c.collect(ctx, ch)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return run.fail(err)
	}
	noteTokens(ctx, final.TokensEvaluated, final.TokensPredicted)
	parsed := toolcall.NewStream(run.syntax, newToolCallID)
	parsed.Add(c.content.String())
	msg, _ := parsed.Finish()
	return writeJSON(w, &gen.ChatCompletionResponse{
		Choices: []gen.ChatChoice{{
			FinishReason: chatFinishReason(final.StopType, msg),
			Index:        0,
			Message:      responseMessage(msg),
			Logprobs:     run.chatLogprobs(c.probs),
		}},
		Created:           run.head.created,
		Model:             run.head.model,
		SystemFingerprint: run.head.fingerprint,
		Object:            "chat.completion",
		Usage:             usage(final),
		ID:                run.head.id,
		Timings:           timings(final.Timings),
	})
}

// chatRun is what one chat completion needs after its request was checked, to answer from the
// engine's results.
type chatRun struct {
	server       *Server
	head         chatHead
	tok          *tokenizer.Tokenizer
	syntax       toolcall.Syntax // how the model's output carries reasoning and tool calls
	logprobs     bool
	topLogprobs  int
	includeUsage bool
	// nPrompt and nCtx explain a prompt that does not fit.
	nPrompt, nCtx int
}

// fail is the client's view of an engine error for this request.
func (r *chatRun) fail(err error) *apiError { return submitError(err, r.nPrompt, r.nCtx) }

// chatLogprobs is a choice's logprobs: the steps' probabilities when the request asked for them.
func (r *chatRun) chatLogprobs(steps []engine.StepProbs) gen.OptChatLogprobs {
	if !r.logprobs {
		return gen.OptChatLogprobs{}
	}
	return gen.NewOptChatLogprobs(gen.ChatLogprobs{Content: probabilities(r.tok, steps, false, r.topLogprobs)})
}

// stream sends the engine's results as chunks, ending with `data: [DONE]`, until the final
// result, a failed write or the end of ctx. A failure is returned as an *apiError; when sse had
// started it was also sent as an error event.
func (r *chatRun) stream(ctx context.Context, ch <-chan engine.Result, sse *sseWriter) error {
	head := r.head
	parsed := toolcall.NewStream(r.syntax, newToolCallID)
	var pendingProbs []engine.StepProbs // probabilities of tokens whose text is held back
	for {
		var failed *apiError
		res, over, err := r.server.nextStreamed(ctx, ch, sse, r.fail, func(ae *apiError) {
			_ = sse.fail(ae)
			failed = ae
		})
		if failed != nil {
			return failed
		}
		if over {
			return err
		}
		if !sse.started {
			// The first chunk announces the role, with null content.
			role := head.chunk(gen.ChatDelta{Role: gen.NewOptString("assistant"), Content: gen.OptNilString{Set: true, Null: true}})
			if sse.data(&role) != nil {
				return nil
			}
		}
		deltas := parsed.Add(res.Text)
		var msg toolcall.Message
		if res.Stop {
			var last []toolcall.Delta
			msg, last = parsed.Finish()
			deltas = append(deltas, last...)
		}
		pendingProbs = append(pendingProbs, res.Probs...)
		for i, d := range deltas {
			piece := head.chunk(chatDelta(d))
			if i == len(deltas)-1 && len(pendingProbs) > 0 {
				piece.Choices[0].Logprobs = r.chatLogprobs(pendingProbs)
				pendingProbs = nil
			}
			if sse.data(&piece) != nil {
				return nil
			}
		}
		if !res.Stop {
			continue
		}
		noteTokens(ctx, res.TokensEvaluated, res.TokensPredicted)
		// The finish chunk has an empty delta; timings ride on the last chunk before [DONE],
		// which is the usage chunk (with no choices) when the client asked for usage.
		finish := head.chunk(gen.ChatDelta{})
		finish.Choices[0].FinishReason = gen.NewNilString(chatFinishReason(res.StopType, msg))
		if !r.includeUsage {
			finish.Timings = gen.NewOptTimings(timings(res.Timings))
		}
		if sse.data(&finish) != nil {
			return nil
		}
		if r.includeUsage {
			u := head.chunk(gen.ChatDelta{})
			u.Choices = []gen.ChatChunkChoice{}
			u.Usage = gen.NewOptUsage(usage(res))
			u.Timings = gen.NewOptTimings(timings(res.Timings))
			if sse.data(&u) != nil {
				return nil
			}
		}
		_ = sse.done()
		return nil
	}
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
	})
	if err != nil {
		return nil, err
	}
	return &gen.ApplyTemplateResponse{Prompt: text}, nil
}

// chatPrompt renders a chat request into prompt text.
func (l *loaded) chatPrompt(r chatRequest) (string, error) {
	in, err := r.input()
	if err != nil {
		return "", err
	}
	return l.renderChat(in)
}

// chatHead is what every response and chunk of one chat completion repeats.
type chatHead struct {
	id          string
	created     int64
	model       string
	fingerprint string
}

// chunk builds a stream chunk with one choice carrying delta and a null finish_reason.
func (h chatHead) chunk(delta gen.ChatDelta) gen.ChatCompletionChunk {
	return gen.ChatCompletionChunk{
		Choices:           []gen.ChatChunkChoice{{FinishReason: gen.NilString{Null: true}, Index: 0, Delta: delta}},
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
