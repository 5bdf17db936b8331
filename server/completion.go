package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/go-faster/jx"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// CreateCompletion implements POST /completion, llama.cpp's native completion, as JSON or as
// an event stream.
func (s *Server) CreateCompletion(ctx context.Context, req *gen.CompletionRequest, w http.ResponseWriter) error {
	return s.complete(ctx, req, w)
}

// CreateCompletionAlias implements POST /completions, an alias of POST /completion.
func (s *Server) CreateCompletionAlias(ctx context.Context, req *gen.CompletionRequest, w http.ResponseWriter) error {
	return s.complete(ctx, req, w)
}

// completion is one native completion request on its way through the engine.
type completion struct {
	tok          *tokenizer.Tokenizer
	model        string
	promptText   string
	settings     gen.GenerationSettings
	returnTokens bool

	content strings.Builder
	tokens  []int32
	probs   []engine.StepProbs
}

func (s *Server) complete(ctx context.Context, req *gen.CompletionRequest, w http.ResponseWriter) error {
	m := s.model()
	if m == nil {
		return errLoading
	}
	params, err := m.samplingFields(req, firstSet(req.NPredict, req.MaxTokens)).params()
	if err != nil {
		return err
	}
	// OpenAI's logprobs counts when n_probs is not given, as in llama-server.
	params.NProbs = req.NProbs.Or(req.Logprobs.Or(0))
	prompt, err := promptTokens(m.tok, req.Prompt)
	if err != nil {
		return err
	}
	return s.completeTokens(ctx, m, prompt, params, req.Stream.Or(false), req.ReturnTokens.Or(false), w)
}

// completeTokens runs a native completion of a tokenized prompt and writes its answer.
func (s *Server) completeTokens(ctx context.Context, m *loaded, prompt []int32, params engine.Params, stream, returnTokens bool, w http.ResponseWriter) error {
	if len(prompt) == 0 {
		return invalidRequest("the prompt is empty")
	}
	c := &completion{
		tok:          m.tok,
		model:        m.name,
		promptText:   m.tok.Detokenize(prompt, false, true),
		settings:     generationSettings(params, stream, m.info.SpecType),
		returnTokens: returnTokens,
	}
	c.settings.ReasoningFormat = s.cfg.ReasoningFormat.String()

	ch, err := m.backend.Submit(ctx, engine.Task{Prompt: prompt, Params: params, Stream: stream})
	if err != nil {
		return submitError(err, len(prompt), m.info.NCtx)
	}
	defer drain(ch)
	fail := func(err error) *apiError { return submitError(err, len(prompt), m.info.NCtx) }

	if !stream {
		final, err := c.collect(ctx, ch)
		if err != nil {
			if ctx.Err() != nil {
				return nil // the client is gone; nobody reads an answer
			}
			return fail(err)
		}
		noteTokens(ctx, final.TokensEvaluated, final.TokensPredicted)
		resp := c.final(final, c.content.String())
		if params.NProbs > 0 {
			resp.CompletionProbabilities = probabilities(m.tok, c.probs, params.PostSamplingProbs, params.NProbs)
		}
		return writeJSON(w, &resp)
	}

	sse := newSSE(w)
	for {
		res, over, err := s.nextStreamed(ctx, ch, sse, fail, func(ae *apiError) { _ = sse.fail(ae) })
		if over {
			return err
		}
		c.add(res)
		// As llama-server, every piece of text goes out in a partial event and the final event
		// has empty content: text that arrives with the final result gets a partial of its own.
		if !res.Stop || res.Text != "" || len(res.Tokens) > 0 {
			chunk := gen.CompletionChunk{
				Index:           0,
				Content:         res.Text,
				Tokens:          nonNil(res.Tokens),
				Stop:            false,
				IDSlot:          -1,
				TokensPredicted: res.TokensPredicted,
				TokensEvaluated: res.TokensEvaluated,
			}
			if params.NProbs > 0 {
				chunk.CompletionProbabilities = probabilities(m.tok, res.Probs, params.PostSamplingProbs, params.NProbs)
			}
			if sse.data(&chunk) != nil {
				return nil // the client is gone
			}
		}
		if !res.Stop {
			continue
		}
		noteTokens(ctx, res.TokensEvaluated, res.TokensPredicted)
		resp := c.final(res, "")
		_ = sse.data(&resp)
		return nil
	}
}

// add records a result's text and tokens.
func (c *completion) add(res engine.Result) {
	c.content.WriteString(res.Text)
	c.tokens = append(c.tokens, res.Tokens...)
	c.probs = append(c.probs, res.Probs...)
}

// collect reads results up to the final one, accumulating the content.
func (c *completion) collect(ctx context.Context, ch <-chan engine.Result) (engine.Result, error) {
	for {
		res, err := nextResult(ctx, ch)
		if err != nil {
			return res, err
		}
		if res.Err != nil {
			return res, res.Err
		}
		c.add(res)
		if res.Stop {
			return res, nil
		}
	}
}

// final builds the full response for the final result, with content as given.
func (c *completion) final(res engine.Result, content string) gen.CompletionResponse {
	tokens := []int32{}
	if c.returnTokens {
		tokens = nonNil(c.tokens)
	}
	return gen.CompletionResponse{
		Index:              0,
		Content:            content,
		Tokens:             tokens,
		IDSlot:             res.Slot,
		Stop:               true,
		Model:              c.model,
		TokensPredicted:    res.TokensPredicted,
		TokensEvaluated:    res.TokensEvaluated,
		GenerationSettings: c.settings,
		Prompt:             c.promptText,
		HasNewLine:         strings.Contains(c.content.String(), "\n"),
		Truncated:          res.Truncated,
		StopType:           stopType(res.StopType),
		StoppingWord:       res.StoppingWord,
		TokensCached:       res.TokensCached,
		Timings:            timings(res.Timings),
	}
}

func stopType(t engine.StopType) gen.CompletionResponseStopType {
	switch t {
	case engine.StopEOS:
		return gen.CompletionResponseStopTypeEos
	case engine.StopLimit:
		return gen.CompletionResponseStopTypeLimit
	case engine.StopWord:
		return gen.CompletionResponseStopTypeWord
	}
	return gen.CompletionResponseStopTypeNone
}

// nonNil makes a nil slice encode as [] rather than be taken for a missing value.
func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// writeJSON writes v as a 200 JSON response.
func writeJSON(w http.ResponseWriter, v encoder) error {
	var enc jx.Encoder
	v.Encode(&enc)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(enc.Bytes())
	return nil
}
