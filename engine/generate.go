package engine

import (
	"time"
)

// commonPrefix is the length of the longest shared prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// generate evaluates the prompt (reusing the cached prefix) and samples until a stop
// condition, streaming partial results; it returns the final result.
func (e *Engine) generate(r *request) Result {
	t := r.task
	p := t.Params
	res := Result{TokensEvaluated: len(t.Prompt)}

	// Reuse the cached prefix but always evaluate at least one token, whose logits we need.
	nPast := min(commonPrefix(e.cached, t.Prompt), len(t.Prompt)-1)
	e.cached = e.cached[:nPast]
	res.Timings.CacheN = nPast
	res.Timings.PromptN = len(t.Prompt) - nPast

	start := time.Now()
	logits, err := e.model.Forward(e.kv, t.Prompt[nPast:], nPast)
	if err != nil {
		e.cached = nil
		res.Stop, res.StopType, res.Err = true, StopNone, err
		return res
	}
	e.cached = append(e.cached, t.Prompt[nPast:]...)
	res.Timings.Prompt = time.Since(start)
	genStart := time.Now()

	// DRY matches token text as llama.cpp's detokenize(special=true) renders it.
	smp := newSampler(p, t.Prompt, func(id int32) string { return string(e.tok.Piece(id, true)) })
	var gram *constraint
	if p.Grammar != nil {
		if gram, err = newConstraint(p.Grammar, func(id int32) string { return string(e.tok.Piece(id, false)) }, e.tok.IsEOG); err != nil {
			res.Stop, res.StopType, res.Err = true, StopNone, err
			return res
		}
	}
	dec := e.tok.NewStreamDecoder()
	var text []byte // generated text so far (complete UTF-8)
	sent := 0       // bytes of text already delivered
	var pending []int32
	var pendingProbs []StepProbs
	finish := func(st StopType) Result {
		if st != StopWord {
			text = append(text, dec.Flush()...)
		}
		res.Text = string(text[sent:])
		res.Tokens, res.Probs = pending, pendingProbs
		res.Stop, res.StopType = true, st
		res.TokensCached = len(e.cached)
		res.Timings.Predicted = time.Since(genStart)
		res.Timings.PredictedN = res.TokensPredicted
		return res
	}
	for {
		if r.ctx.Err() != nil {
			return finish(StopNone)
		}
		if p.NPredict == 0 {
			return finish(StopLimit)
		}
		id := int32(0)
		if gram != nil {
			if id, err = gram.sample(smp, logits); err == nil {
				err = gram.accept(id)
			}
			if err != nil {
				res.Err = err
				return finish(StopNone)
			}
		} else {
			id = smp.sample(logits)
		}
		smp.accept(id)
		if e.tok.IsEOG(id) && !p.IgnoreEOS {
			return finish(StopEOS)
		}
		res.TokensPredicted++
		pending = append(pending, id)
		if p.NProbs > 0 {
			top, picked := smp.probs(p.NProbs)
			pendingProbs = append(pendingProbs, StepProbs{ID: id, Prob: picked, Top: top})
		}
		before := len(text)
		text = append(text, dec.Add(id)...)

		if idx, word := findStop(string(text), p.Stop, before); idx >= 0 {
			text = text[:max(idx, sent)]
			res.StoppingWord = word
			return finish(StopWord)
		}
		if p.NPredict >= 0 && res.TokensPredicted >= p.NPredict {
			return finish(StopLimit)
		}
		pos := len(e.cached)
		if pos+1 >= e.kv.NCtx {
			// Context full (no context shift yet): stop as llama-server does.
			res.Truncated = true
			return finish(StopLimit)
		}
		if safe := len(text) - heldBack(string(text), p.Stop); safe > sent {
			if !r.send(Result{Text: string(text[sent:safe]), Tokens: pending, Probs: pendingProbs, TokensEvaluated: res.TokensEvaluated, TokensPredicted: res.TokensPredicted}) {
				return finish(StopNone)
			}
			sent, pending, pendingProbs = safe, nil, nil
		}
		logits, err = e.model.Forward(e.kv, []int32{id}, pos)
		if err != nil {
			e.cached = nil
			res.Err = err
			return finish(StopNone)
		}
		e.cached = append(e.cached, id)
	}
}
