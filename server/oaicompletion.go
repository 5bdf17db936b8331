package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
)

// CreateOAICompletion implements POST /v1/completions, OpenAI's text completions: every prompt
// of the request is completed n (or n_cmpl) times, each completion one choice (index
// prompt*n + j); id_slot binds each prompt's first completion to that slot. As JSON,
// or as an event stream of text_completion chunks ending with `data: [DONE]`.
//
// llama-server answers several prompts with a JSON array of single-choice objects, which OpenAI
// clients cannot read; here they are the choices of one object, with the usage summed.
func (s *Server) CreateOAICompletion(ctx context.Context, req *gen.CompletionRequest, w http.ResponseWriter) error {
	m := s.model()
	if m == nil {
		return errLoading
	}
	// The refusals of llama-server's oaicompat_completion_params_parse.
	if req.Echo.Or(false) {
		return invalidRequest("Only no echo is supported")
	}
	for name, set := range map[string]bool{"best_of": req.BestOf.Set, "suffix": req.Suffix.Set} {
		if set {
			return invalidRequest("Unsupported param: %s", name)
		}
	}
	n, err := choiceCount(req.NCmpl, req.N, m.info.NSlots)
	if err != nil {
		return err
	}
	params, err := m.samplingFields(req, firstSet(req.NPredict, req.MaxTokens)).params()
	if err != nil {
		return err
	}
	params.NProbs = req.NProbs.Or(req.Logprobs.Or(0))
	prompts, err := promptList(m.tok, req.Prompt, nil)
	if err != nil {
		return err
	}
	var tasks []engine.Task
	for _, p := range prompts {
		if len(p) == 0 {
			return invalidRequest("the prompt is empty")
		}
		tasks = append(tasks, generationTasks(p, params, false, slotOf(req.IDSlot), n)...)
	}
	head := chatHead{id: newChatID(), created: time.Now().Unix(), model: req.Model.Or(""), fingerprint: s.cfg.SystemFingerprint}
	if head.model == "" {
		head.model = m.name
	}
	set, failed, err := submitAll(ctx, m.backend, tasks)
	if err != nil {
		return submitError(err, len(tasks[failed].Prompt), m.info.NCtx)
	}
	defer set.close()
	fail := func(task int, err error) *apiError { return submitError(err, len(tasks[task].Prompt), m.info.NCtx) }
	logprobs := func(steps []engine.StepProbs) gen.NilOAICompletionLogprobs {
		if params.NProbs == 0 || len(steps) == 0 {
			return gen.NilOAICompletionLogprobs{Null: true}
		}
		return gen.NewNilOAICompletionLogprobs(gen.OAICompletionLogprobs{
			Content: probabilities(m.tok, steps, params.PostSamplingProbs, params.NProbs),
		})
	}
	stream := req.Stream.Or(false)

	texts := make([]strings.Builder, len(tasks))
	probs := make([][]engine.StepProbs, len(tasks))
	finals := make([]engine.Result, len(tasks))
	sse := newSSE(w, s.pingInterval(req.SsePingInterval))
	for done := 0; done < len(tasks); {
		tr, err := set.next(ctx, sse)
		failTask := func(err error) *apiError { return fail(tr.task, err) }
		if over, err := s.streamEnds(ctx, tr.res, err, sse, failTask, func(ae *apiError) { _ = sse.fail(ae) }); over {
			return err
		}
		res := tr.res
		if !stream {
			texts[tr.task].WriteString(res.Text)
			probs[tr.task] = append(probs[tr.task], res.Probs...)
		} else if !res.Stop || res.Text != "" {
			// As llama-server, text goes out in partial chunks; the final chunk has none.
			chunk := head.textCompletion(gen.OAICompletionChoice{
				Text: res.Text, Index: tr.task, Logprobs: logprobs(res.Probs), FinishReason: gen.NilString{Null: true},
			})
			if sse.data(&chunk) != nil {
				return nil
			}
		}
		if !res.Stop {
			continue
		}
		done++
		finals[tr.task] = res
		if stream {
			chunk := head.textCompletion(gen.OAICompletionChoice{
				Index: tr.task, Logprobs: gen.NilOAICompletionLogprobs{Null: true}, FinishReason: gen.NewNilString(finishReason(res.StopType)),
			})
			chunk.Usage = gen.NewOptUsage(usage(res))
			chunk.Timings = gen.NewOptTimings(timings(res.Timings))
			if sse.data(&chunk) != nil {
				return nil
			}
		}
	}
	total := sumResults(finals)
	noteTokens(ctx, total.TokensEvaluated, total.TokensPredicted)
	if stream {
		_ = sse.done()
		return nil
	}
	resp := head.textCompletion()
	for i, f := range finals {
		resp.Choices = append(resp.Choices, gen.OAICompletionChoice{
			Text: texts[i].String(), Index: i, Logprobs: logprobs(probs[i]), FinishReason: gen.NewNilString(finishReason(f.StopType)),
		})
	}
	resp.Usage = gen.NewOptUsage(usage(total))
	if s.verboseOf(req.Verbose) {
		resp.Verbose = gen.NewOptCompletionResponse(s.verboseAnswer(m, tasks[0].Prompt, params, false, texts[0].String(), finals[0]))
	}
	resp.Timings = gen.NewOptTimings(timings(total.Timings))
	return writeJSON(w, &resp)
}

// textCompletion is a text_completion object (or chunk) with the given choices.
func (h chatHead) textCompletion(choices ...gen.OAICompletionChoice) gen.OAICompletionResponse {
	if choices == nil {
		choices = []gen.OAICompletionChoice{}
	}
	return gen.OAICompletionResponse{
		Choices:           choices,
		Created:           h.created,
		Model:             h.model,
		SystemFingerprint: h.fingerprint,
		Object:            "text_completion",
		ID:                h.id,
	}
}

// sumResults adds up the token counts and timings of several final results.
func sumResults(finals []engine.Result) engine.Result {
	var t engine.Result
	for _, f := range finals {
		t.TokensEvaluated += f.TokensEvaluated
		t.TokensPredicted += f.TokensPredicted
		t.Timings.CacheN += f.Timings.CacheN
		t.Timings.PromptN += f.Timings.PromptN
		t.Timings.Prompt += f.Timings.Prompt
		t.Timings.PredictedN += f.Timings.PredictedN
		t.Timings.Predicted += f.Timings.Predicted
		t.Timings.DraftN += f.Timings.DraftN
		t.Timings.DraftNAccepted += f.Timings.DraftNAccepted
	}
	return t
}
