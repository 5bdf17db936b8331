package engine

import (
	"bytes"
	"cmp"
	"strings"
	"time"

	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// commonPrefix is the length of the longest shared prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// generation is one request's progress in a slot: the prompt still to evaluate, then the
// sampler, the text produced and what of it has been delivered.
type generation struct {
	r      *request
	p      Params
	prompt []int32
	images bool   // the prompt holds images (media.go)
	res    Result // accumulates the final result's fields

	promptStart, genStart time.Time
	promptDone            bool
	newline               bool // a newline has been generated (t_max_predict_ms)
	lineStart             int  // where the newest line of text starts, 0 before any newline (n_indent)

	smp          *sampler
	gram         *constraint
	budget       *reasoningBudget // the reasoning budget, nil for none
	dec          *tokenizer.StreamDecoder
	text         []byte // generated text so far (complete UTF-8)
	sent         int    // bytes of text already delivered
	pending      []int32
	pendingProbs []StepProbs
	next         int32 // the sampled token to evaluate in the next batch

	lora    []float32 // the adapters' scales (Params.Lora, resolved)
	loraKey string    // loraKey(lora): which slots may share a pass
	waited  int       // passes run without this slot since it last took part (passLora)
}

// start prepares a request in slot s: it reuses the longest cached prefix of the prompt held by
// the slot, a busy slot or the prompt cache (sharing its pages; always leaving one token to
// evaluate, whose logits are needed), then, with cache reuse on, later chunks of the slot's
// own cache, and builds the sampler. The prompt cache is updated around it (promptcache.go).
func (e *Engine) start(s *slot, r *request) error {
	if r.task.Kind != TaskGenerate {
		return e.startJob(s, r)
	}
	t := r.task
	lora := e.loraScales(t.Params)
	key := loraKey(lora)
	if e.updatesCache(s, t.Prompt, key, t.Slot != nil) {
		e.log.Debug("updating prompt cache", "slot", s.id)
		e.saveToCache(s)
	}
	defer e.saveIdleSlots(s) // once this request has its prefix
	nPast := 0
	if e.recurrent {
		var err error
		if nPast, err = e.startRecurrent(s, t.Prompt, key, t.Params.SkipPromptCache); err != nil {
			return err
		}
	} else if !t.Params.SkipPromptCache {
		donor, n := e.donorFor(s, t.Prompt, key)
		nPast = min(n, len(t.Prompt)-1)
		if donor != s {
			e.adopt(s, donor, nPast)
		} else if reuse := cmp.Or(t.Params.NCacheReuse, e.cacheReuse); reuse > 0 && s.lora == key {
			var err error
			if nPast, err = e.reuseChunks(s, t.Prompt, nPast, reuse); err != nil {
				return err
			}
		}
	}
	e.truncate(s, nPast)
	s.lora = key // the rows written from here on
	g := &generation{r: r, p: t.Params, prompt: t.Prompt, promptStart: time.Now(), dec: e.tok.NewStreamDecoder(), images: holdsImages(t.Prompt), lora: lora, loraKey: key}
	g.res = Result{TokensEvaluated: len(t.Prompt), Slot: s.id}
	g.res.Timings.CacheN = nPast
	g.res.Timings.PromptN = len(t.Prompt) - nPast
	// DRY matches token text as llama.cpp's detokenize(special=true) renders it.
	g.smp = newSampler(g.p, t.Prompt, func(id int32) string { return string(e.tok.Piece(id, true)) })
	if g.p.Grammar != nil {
		var err error
		if g.gram, err = newConstraint(g.p.Grammar, g.p.GrammarTriggers, func(id int32) string { return string(e.tok.Piece(id, true)) }, e.tok.IsEOG); err != nil {
			return err
		}
	}
	if b := g.p.ReasoningBudget; b != nil {
		g.budget = newReasoningBudget(*b, func(id int32) []byte { return e.tok.Piece(id, false) })
	}
	s.gen = g
	return nil
}

// finish is the final result of a generation ending for reason st.
func (e *Engine) finish(s *slot, st StopType) Result {
	g := s.gen
	if st != StopWord {
		g.text = append(g.text, g.dec.Flush()...)
	}
	res := g.res
	res.Text = string(g.text[g.sent:])
	res.Tokens, res.Probs = g.pending, g.pendingProbs
	res.Stop, res.StopType = true, st
	res.TokensCached = len(s.cached)
	res.Timings = g.timingsNow(len(s.cached))
	return res
}

// step samples the next token of a slot from its logits row and delivers what it can of the
// text. It returns the final result and true when the generation has ended.
func (e *Engine) step(s *slot, logits logitsRow) (Result, bool) {
	g, p := s.gen, s.gen.p
	if !g.promptDone {
		g.promptDone = true
		g.res.Timings.Prompt = time.Since(g.promptStart)
		g.genStart = time.Now()
		e.notePromptDone(g.res.Timings)
	}
	if g.r.ctx.Err() != nil {
		return e.finish(s, StopNone), true
	}
	if p.NPredict == 0 {
		return e.finish(s, StopLimit), true
	}
	if f, ok := g.budget.forcedToken(); ok { // a budget gets whole rows (candidatesNeeded)
		logits = logitsRow{full: forceToken(logits.full, f)}
	}
	var id int32
	if g.gram != nil {
		var err error
		if id, err = g.gram.sample(g.smp, logits.full); err == nil { // a grammar gets full rows
			err = g.gram.accept(id)
		}
		if err != nil {
			g.res.Err = err
			return e.finish(s, StopNone), true
		}
	} else {
		id = g.smp.sampleRow(logits)
	}
	g.smp.accept(id)
	g.budget.follow(id)
	if e.tok.IsEOG(id) && !p.IgnoreEOS {
		return e.finish(s, StopEOS), true
	}
	g.res.TokensPredicted++
	g.pending = append(g.pending, id)
	if p.NProbs > 0 {
		top, picked := g.smp.probs(p.NProbs)
		g.pendingProbs = append(g.pendingProbs, StepProbs{ID: id, Prob: picked, Top: top})
	}
	before := len(g.text)
	g.text = append(g.text, g.dec.Add(id)...)
	if idx, word := findStop(string(g.text), p.Stop, before); idx >= 0 {
		g.text = g.text[:max(idx, g.sent)]
		g.res.StoppingWord = word
		return e.finish(s, StopWord), true
	}
	if p.NIndent > 0 && g.indentEnds() {
		return e.finish(s, StopLimit), true
	}
	if p.NPredict >= 0 && g.res.TokensPredicted >= p.NPredict {
		return e.finish(s, StopLimit), true
	}
	if len(s.cached)+1 >= e.slotCtx && !e.ctxShift {
		// Context full and no context shift: stop as llama-server does.
		g.res.Truncated = true
		return e.finish(s, StopLimit), true
	}
	if g.newline = g.newline || strings.ContainsRune(string(g.text[before:]), '\n'); g.newline &&
		p.TMaxPredictMs > 0 && time.Since(g.genStart) > time.Duration(p.TMaxPredictMs)*time.Millisecond {
		// llama-server's t_max_predict_ms: past the limit, stop once a line is complete.
		return e.finish(s, StopLimit), true
	}
	if safe := len(g.text) - heldBack(string(g.text), p.Stop); safe > g.sent {
		part := Result{Text: string(g.text[g.sent:safe]), Tokens: g.pending, Probs: g.pendingProbs,
			TokensEvaluated: g.res.TokensEvaluated, TokensPredicted: g.res.TokensPredicted, Timings: g.timingsNow(len(s.cached)), Slot: s.id}
		if !g.r.send(part) {
			return e.finish(s, StopNone), true
		}
		g.sent, g.pending, g.pendingProbs = safe, nil, nil
	}
	g.next = id
	return Result{}, false
}

// indentEnds is llama-server's n_indent check after a token: once the newest line has a
// character past its indentation, an indentation shorter than NIndent ends the generation and
// the line is cut after its indentation (text already delivered stays). It then moves
// lineStart past the next newline.
func (g *generation) indentEnds() bool {
	if g.lineStart > 0 {
		pos := g.lineStart
		for pos < len(g.text) && (g.text[pos] == ' ' || g.text[pos] == '\t') {
			pos++
		}
		if pos < len(g.text) && pos-g.lineStart < g.p.NIndent {
			g.text = g.text[:max(pos, g.sent)]
			return true
		}
	}
	if i := bytes.IndexByte(g.text[g.lineStart:], '\n'); i >= 0 {
		g.lineStart += i + 1
	}
	return false
}

// progress sends a prompt progress result when the request asked for them. A client that has
// gone is noticed at the next turn, as for any request.
func (e *Engine) progress(s *slot) {
	g := s.gen
	if !g.p.ReturnProgress {
		return
	}
	g.r.send(Result{Slot: s.id, TokensEvaluated: len(g.prompt), Timings: g.timingsNow(len(s.cached)), Progress: &PromptProgress{
		Total: len(g.prompt), Cache: g.res.Timings.CacheN, Processed: len(s.cached), Elapsed: time.Since(g.promptStart),
	}})
}

// timingsNow are the timings so far, with cached tokens in the slot's cache: while the prompt
// is evaluated, the prompt tokens evaluated and the time since evaluation began (none before
// the first batch, as llama-server's first progress update); then the prompt's totals and the
// generation so far. Every result carries them: for llama-server's timings_per_token, and for
// the prompt tokens reused from the cache that Anthropic's and the Responses API's usage
// report from the first result.
func (g *generation) timingsNow(cached int) Timings {
	t := g.res.Timings
	t.PredictedN = g.res.TokensPredicted
	if !g.promptDone {
		t.PromptN = max(cached-t.CacheN, 0)
		t.Prompt = 0
		if t.PromptN > 0 {
			t.Prompt = time.Since(g.promptStart)
		}
		return t
	}
	if !g.genStart.IsZero() {
		t.Predicted = time.Since(g.genStart)
	}
	return t
}
