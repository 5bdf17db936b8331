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

// completion is one native completion on its way through the engine.
type completion struct {
	tok          *tokenizer.Tokenizer
	model        string
	promptText   string
	settings     gen.GenerationSettings
	returnTokens bool
	index        int // among the completions of one request (n_cmpl)

	content strings.Builder
	tokens  []int32
	probs   []engine.StepProbs
}

// nativeOptions are the native endpoints' (/completion, /infill) settings of the answer.
type nativeOptions struct {
	stream       bool
	returnTokens bool
	n            int           // completions of the prompt (n_cmpl, or n)
	slot         *int          // id_slot: the first completion's slot, nil for any
	fields       []string      // response_fields: nil keeps every field
	ping         gen.OptNilInt // sse_ping_interval
}

// nativeRequest is what nativeOptionsOf reads of the native requests.
type nativeRequest interface {
	GetStream() gen.OptNilBool
	GetReturnTokens() gen.OptNilBool
	GetNCmpl() gen.OptNilInt
	GetN() gen.OptNilInt
	GetIDSlot() gen.OptNilInt
	GetResponseFields() gen.OptNilStringArray
	GetSsePingInterval() gen.OptNilInt
}

// nativeOptionsOf reads a native request's answer settings for the loaded model.
func (m *loaded) nativeOptionsOf(req nativeRequest) (nativeOptions, error) {
	n, err := choiceCount(req.GetNCmpl(), req.GetN(), m.info.NSlots)
	if err != nil {
		return nativeOptions{}, err
	}
	fields, _ := req.GetResponseFields().Get()
	return nativeOptions{
		stream:       req.GetStream().Or(false),
		returnTokens: req.GetReturnTokens().Or(false),
		n:            n,
		slot:         slotOf(req.GetIDSlot()),
		fields:       fields,
		ping:         req.GetSsePingInterval(),
	}, nil
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
	opts, err := m.nativeOptionsOf(req)
	if err != nil {
		return err
	}
	prompts, err := promptList(m.tok, req.Prompt, m.mediaPrompts(ctx))
	if err != nil {
		return err
	}
	return s.completePrompts(ctx, m, prompts, params, opts, w)
}

// promptEcho is a prompt as answers echo it. Token prompts need not join into UTF-8 (a lone
// byte token): bytes that do not are U+FFFD, so the answer stays valid JSON.
func promptEcho(tok *tokenizer.Tokenizer, prompt []int32) string {
	return strings.ToValidUTF8(tok.Detokenize(prompt, false, true), "\uFFFD")
}

// completePrompts runs the native completions of tokenized prompts, opts.n (n_cmpl) of each,
// and writes the answer: one completion as an object, several as an array of them in the
// order prompt*n + j (their index), or a stream of the events of all, told apart by index.
func (s *Server) completePrompts(ctx context.Context, m *loaded, prompts [][]int32, params engine.Params, opts nativeOptions, w http.ResponseWriter) error {
	settings := generationSettings(params, opts.stream, m.info.SpecType)
	settings.ReasoningFormat = s.cfg.ReasoningFormat.String()
	var tasks []engine.Task
	var cs []*completion
	for _, prompt := range prompts {
		if len(prompt) == 0 {
			return invalidRequest("the prompt is empty")
		}
		promptText := promptEcho(m.tok, prompt)
		for range opts.n {
			cs = append(cs, &completion{
				tok:          m.tok,
				model:        m.name,
				promptText:   promptText,
				settings:     settings,
				returnTokens: opts.returnTokens,
				index:        len(cs),
			})
		}
		tasks = append(tasks, generationTasks(prompt, params, opts.stream, opts.slot, opts.n)...)
	}
	set, failed, err := submitAll(ctx, m.backend, tasks)
	if err != nil {
		return submitError(err, len(tasks[failed].Prompt), m.info.NCtx)
	}
	defer set.close()

	finals := make([]engine.Result, len(tasks))
	sse := newSSE(w, s.pingInterval(opts.ping))
	for done := 0; done < len(tasks); {
		tr, err := set.next(ctx, sse)
		fail := func(err error) *apiError { return submitError(err, len(tasks[tr.task].Prompt), m.info.NCtx) }
		if over, err := s.streamEnds(ctx, tr.res, err, sse, fail, func(ae *apiError) { _ = sse.fail(ae) }); over {
			return err
		}
		c, res := cs[tr.task], tr.res
		c.add(res)
		// As llama-server, every piece of text goes out in a partial event and the final event
		// has empty content: text that arrives with the final result gets a partial of its own.
		if opts.stream && (!res.Stop || res.Text != "" || len(res.Tokens) > 0) {
			chunk := gen.CompletionChunk{
				Index:           c.index,
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
			if res.Progress != nil {
				chunk.PromptProgress = gen.NewOptPromptProgress(promptProgress(res.Progress))
			}
			if params.TimingsPerToken {
				chunk.Timings = gen.NewOptTimings(timings(res.Timings))
			}
			if sse.data(&chunk) != nil {
				return nil // the client is gone
			}
		}
		if !res.Stop {
			continue
		}
		done++
		finals[tr.task] = res
		if opts.stream {
			// As llama-server's, the final event has neither content nor tokens: every piece and
			// id already went out in a partial event, so a client collecting them gets each once.
			resp := c.final(res, "")
			resp.Tokens = []int32{}
			if sse.data(pickFields(&resp, opts.fields)) != nil {
				return nil
			}
		}
	}
	total := totalOf(finals)
	noteTokens(ctx, total.TokensEvaluated, total.TokensPredicted)
	if opts.stream {
		return nil
	}
	answers := make([]encoder, len(cs))
	for i, c := range cs {
		resp := c.final(finals[i], c.content.String())
		if params.NProbs > 0 {
			resp.CompletionProbabilities = probabilities(m.tok, c.probs, params.PostSamplingProbs, params.NProbs)
		}
		answers[i] = pickFields(&resp, opts.fields)
	}
	if len(answers) == 1 {
		return writeJSON(w, answers[0])
	}
	return writeJSON(w, jsonArray(answers))
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
		res, err := nextResult(ctx, ch, nil)
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
		Index:              c.index,
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

// promptProgress is the engine's progress report as llama-server's prompt_progress.
func promptProgress(p *engine.PromptProgress) gen.PromptProgress {
	return gen.PromptProgress{Total: p.Total, Cache: p.Cache, Processed: p.Processed, TimeMs: p.Elapsed.Milliseconds()}
}
