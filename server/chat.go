package server

import (
	"context"
	"crypto/rand"
	"net/http"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
)

// CreateChatCompletion implements POST /v1/chat/completions, OpenAI's chat API, as JSON or as
// an event stream ending with `data: [DONE]`.
func (s *Server) CreateChatCompletion(ctx context.Context, req *gen.ChatCompletionRequest, w http.ResponseWriter) error {
	m := s.model()
	if m == nil {
		return errLoading
	}
	if len(req.Messages) == 0 {
		return invalidRequest("'messages' must hold at least one message")
	}
	text, err := m.chatPrompt(chatRequest{
		messages:            req.Messages,
		tools:               req.Tools,
		kwargs:              req.ChatTemplateKwargs,
		addGenerationPrompt: req.AddGenerationPrompt.Or(true),
	})
	if err != nil {
		return err
	}
	prompt := tokenize(m.tok, text)
	params, err := m.samplingFields(req, firstSet(req.NPredict, req.MaxCompletionTokens, req.MaxTokens)).params()
	if err != nil {
		return err
	}
	// logprobs asks for each token's log-probability, top_logprobs for that many candidates.
	logprobs, topLogprobs := req.Logprobs.Or(false), req.TopLogprobs.Or(0)
	if logprobs {
		params.NProbs = max(topLogprobs, 1)
	}
	chatLogprobs := func(steps []engine.StepProbs) gen.OptChatLogprobs {
		if !logprobs {
			return gen.OptChatLogprobs{}
		}
		return gen.NewOptChatLogprobs(gen.ChatLogprobs{Content: probabilities(m.tok, steps, false, topLogprobs)})
	}
	model := req.Model.Or("")
	if model == "" {
		model = m.name
	}
	head := chatHead{
		id:          newChatID(),
		created:     time.Now().Unix(),
		model:       model,
		fingerprint: s.cfg.SystemFingerprint,
	}

	ch, err := m.backend.Submit(ctx, engine.Task{Prompt: prompt, Params: params, Stream: req.Stream.Or(false)})
	if err != nil {
		return submitError(err, len(prompt), m.info.NCtx)
	}
	defer drain(ch)
	fail := func(err error) *apiError { return submitError(err, len(prompt), m.info.NCtx) }

	if !req.Stream.Or(false) {
		var c completion
		final, err := c.collect(ctx, ch)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fail(err)
		}
		noteTokens(ctx, final.TokensEvaluated, final.TokensPredicted)
		return writeJSON(w, &gen.ChatCompletionResponse{
			Choices: []gen.ChatChoice{{
				FinishReason: finishReason(final.StopType),
				Index:        0,
				Message:      gen.ChatResponseMessage{Role: "assistant", Content: c.content.String()},
				Logprobs:     chatLogprobs(c.probs),
			}},
			Created:           head.created,
			Model:             head.model,
			SystemFingerprint: head.fingerprint,
			Object:            "chat.completion",
			Usage:             usage(final),
			ID:                head.id,
			Timings:           timings(final.Timings),
		})
	}

	includeUsage := false
	if so, ok := req.StreamOptions.Get(); ok {
		includeUsage = so.IncludeUsage.Or(false)
	}
	sse := newSSE(w)
	for {
		res, err := nextResult(ctx, ch)
		if err == nil && res.Err != nil {
			err = res.Err
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !sse.started:
			return fail(err)
		case err != nil:
			ae := fail(err)
			s.noteError(ctx, ae)
			_ = sse.fail(ae)
			return nil
		}
		if !sse.started {
			// The first chunk announces the role, with null content.
			role := head.chunk(gen.ChatDelta{Role: gen.NewOptString("assistant"), Content: gen.OptNilString{Set: true, Null: true}})
			if sse.data(&role) != nil {
				return nil
			}
		}
		if res.Text != "" {
			piece := head.chunk(gen.ChatDelta{Content: gen.NewOptNilString(res.Text)})
			piece.Choices[0].Logprobs = chatLogprobs(res.Probs)
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
		finish.Choices[0].FinishReason = gen.NewNilString(finishReason(res.StopType))
		if !includeUsage {
			finish.Timings = gen.NewOptTimings(timings(res.Timings))
		}
		if sse.data(&finish) != nil {
			return nil
		}
		if includeUsage {
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
func newChatID() string { return "chatcmpl-" + randomAlnum(32) }

// randomAlnum returns n random alphanumerics, drawn without bias.
func randomAlnum(n int) string {
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
