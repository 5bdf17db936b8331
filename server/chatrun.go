package server

import (
	"context"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/gen"
	"github.com/wgpu-llama/wgpu-llama/model/chat/toolcall"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// chatRun is what one chat completion needs after its request was checked, to answer from the
// engine's results: n choices, each one generation (task i is choice i).
type chatRun struct {
	server       *Server
	head         chatHead
	tok          *tokenizer.Tokenizer
	syntax       toolcall.Syntax // how the model's output carries reasoning and tool calls
	logprobs     bool
	topLogprobs  int
	includeUsage bool
	// timingsPerToken puts the timings so far on every chunk of a stream (timings_per_token).
	timingsPerToken bool
	n               int
	// ping is how long the stream may stay silent before a keep-alive (0: never).
	ping time.Duration
	// nPrompt and nCtx explain a prompt that does not fit.
	nPrompt, nCtx int
	// verbose, when set, makes the JSON answer carry "__verbose": the native answer of the
	// first choice's generation, built from its text and final result.
	verbose func(text string, final engine.Result) gen.CompletionResponse
}

// chatChoice is one choice's state while its results arrive.
type chatChoice struct {
	parsed    *toolcall.Stream
	text      strings.Builder    // the whole output (answers as JSON)
	probs     []engine.StepProbs // all of them (JSON), or those whose text is held back (streams)
	announced bool               // the stream sent its role chunk
}

// choices returns the state of r's n choices.
func (r *chatRun) choices() []chatChoice {
	cs := make([]chatChoice, r.n)
	for i := range cs {
		cs[i].parsed = toolcall.NewStream(r.syntax, newToolCallID)
	}
	return cs
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

// collect reads every choice to its end and builds the JSON answer: the choices in index
// order, the usage and timings summed over them.
func (r *chatRun) collect(ctx context.Context, set *taskSet) (*gen.ChatCompletionResponse, error) {
	cs := r.choices()
	finals := make([]engine.Result, r.n)
	for done := 0; done < r.n; {
		tr, err := set.next(ctx, nil)
		if err == nil && tr.res.Err != nil {
			err = tr.res.Err
		}
		if err != nil {
			return nil, r.fail(err)
		}
		c := &cs[tr.task]
		c.text.WriteString(tr.res.Text)
		c.probs = append(c.probs, tr.res.Probs...)
		if tr.res.Stop {
			finals[tr.task] = tr.res
			done++
		}
	}
	total := totalOf(finals)
	noteTokens(ctx, total.TokensEvaluated, total.TokensPredicted)
	resp := &gen.ChatCompletionResponse{
		Created:           r.head.created,
		Model:             r.head.model,
		SystemFingerprint: r.head.fingerprint,
		Object:            "chat.completion",
		Usage:             usage(total),
		ID:                r.head.id,
		Timings:           timings(total.Timings),
	}
	for i := range cs {
		cs[i].parsed.Add(cs[i].text.String())
		msg, _ := cs[i].parsed.Finish()
		resp.Choices = append(resp.Choices, gen.ChatChoice{
			FinishReason: chatFinishReason(finals[i].StopType, msg),
			Index:        i,
			Message:      responseMessage(msg),
			Logprobs:     r.chatLogprobs(cs[i].probs),
		})
	}
	if r.verbose != nil {
		resp.Verbose = gen.NewOptCompletionResponse(r.verbose(cs[0].text.String(), finals[0]))
	}
	return resp, nil
}

// stream sends the engine's results as chunks, ending with `data: [DONE]`, until every choice's
// final result, a failed write or the end of ctx. Each choice starts with a chunk announcing the
// role and ends with one carrying its finish_reason (and, without include_usage, its timings);
// with include_usage a last chunk without choices has the usage and timings of all. A failure
// is returned as an *apiError; when sse had started it was also sent as an error event.
func (r *chatRun) stream(ctx context.Context, set *taskSet, sse *sseWriter) error {
	cs := r.choices()
	finals := make([]engine.Result, r.n)
	for done := 0; done < r.n; {
		tr, err := set.next(ctx, sse)
		var failed *apiError // a failure sent mid-stream, reported to a resumable session
		over, err := r.server.streamEnds(ctx, tr.res, err, sse, r.fail, func(ae *apiError) {
			_ = sse.fail(ae)
			failed = ae
		})
		if failed != nil {
			return failed
		}
		if over {
			return err
		}
		i, res, c := tr.task, tr.res, &cs[tr.task]
		if res.Progress != nil {
			// llama-server's progress chunk: the role delta, with prompt_progress.
			c.announced = true
			pc := r.head.chunk(i, gen.ChatDelta{Role: gen.NewOptString("assistant"), Content: gen.OptNilString{Set: true, Null: true}})
			pc.PromptProgress = gen.NewOptPromptProgress(promptProgress(res.Progress))
			if r.timingsPerToken {
				pc.Timings = gen.NewOptTimings(timings(res.Timings))
			}
			if sse.data(&pc) != nil {
				return nil
			}
			continue
		}
		if !c.announced {
			// A choice's first chunk announces the role, with null content.
			c.announced = true
			role := r.head.chunk(i, gen.ChatDelta{Role: gen.NewOptString("assistant"), Content: gen.OptNilString{Set: true, Null: true}})
			if sse.data(&role) != nil {
				return nil
			}
		}
		deltas, msg := parseStep(c.parsed, res)
		c.probs = append(c.probs, res.Probs...)
		for j, d := range deltas {
			piece := r.head.chunk(i, chatDelta(d))
			if j == len(deltas)-1 && len(c.probs) > 0 {
				piece.Choices[0].Logprobs = r.chatLogprobs(c.probs)
				c.probs = nil
			}
			if r.timingsPerToken {
				piece.Timings = gen.NewOptTimings(timings(res.Timings))
			}
			if sse.data(&piece) != nil {
				return nil
			}
		}
		if !res.Stop {
			continue
		}
		done++
		finals[i] = res
		// The finish chunk has an empty delta; timings ride on the last chunk before [DONE],
		// which is the usage chunk (with no choices) when the client asked for usage.
		finish := r.head.chunk(i, gen.ChatDelta{})
		finish.Choices[0].FinishReason = gen.NewNilString(chatFinishReason(res.StopType, msg))
		if !r.includeUsage {
			finish.Timings = gen.NewOptTimings(timings(res.Timings))
		}
		if sse.data(&finish) != nil {
			return nil
		}
	}
	total := totalOf(finals)
	noteTokens(ctx, total.TokensEvaluated, total.TokensPredicted)
	r.end(sse, total)
	return nil
}

// end closes a stream: with include_usage a chunk without choices carries the usage and
// timings of total, then `data: [DONE]`.
func (r *chatRun) end(sse *sseWriter, total engine.Result) {
	if r.includeUsage {
		u := r.head.chunk(0, gen.ChatDelta{})
		u.Choices = []gen.ChatChunkChoice{}
		u.Usage = gen.NewOptUsage(usage(total))
		u.Timings = gen.NewOptTimings(timings(total.Timings))
		if sse.data(&u) != nil {
			return
		}
	}
	_ = sse.done()
}
