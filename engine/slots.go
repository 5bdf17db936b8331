package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/model"
)

// slot is one sequence the engine can run: the tokens in its cache (kept after a request, for
// prefix reuse), the KV cache pages holding them (pages[i] holds positions i*pageRows ..), and
// the generation running in it, if any.
type slot struct {
	id       int
	cached   []int32
	pages    []int32
	reserved int // positions made writable for the batch being built (see reserve)
	gen      *generation
	job      *embedJob   // an embedding or rerank task, when one runs here instead
	prev     *generation // the last generation that ran here, for SlotInfo
	lastUsed time.Time
	lora     string // the adapter scales its cached rows were computed with (loraKey)
	// ckpts are a recurrent model's context checkpoints of the cached tokens, oldest first
	// (recurrent.go).
	ckpts []checkpoint
	// replay, for a recurrent model, are generated tokens to evaluate again before gen.next:
	// a draft was partly rejected, so the state went back to before the verified rows and
	// the rows kept left the cache (speculative.go's rollBack).
	replay []int32
}

// loop is the engine goroutine: it admits requests into idle slots and runs every active slot
// together, one batch per turn (llama-server's update_slots).
func (e *Engine) loop() {
	defer close(e.done)
	for {
		e.checkDevice()
		e.runControls()
		if !e.admit() {
			e.failAll(ErrClosed)
			e.failControls(ErrClosed)
			return
		}
		e.runJobs()
		e.turn()
		e.feedTick()
	}
}

// admit moves queued requests into idle slots, blocking while no slot is busy (once draining,
// it fails them instead); blocked for Config.SleepIdle, it puts the engine to sleep, and the
// next request or control message wakes it (sleep.go). It reports false when the engine is closing. Requests waiting for a
// particular busy slot go first once it is free, in the order they came.
func (e *Engine) admit() bool {
	if e.draining() {
		e.rejectQueued()
	} else {
		e.admitWaiting()
	}
	for {
		idle := e.idleSlots()
		e.nIdle.Store(int64(len(idle)))
		busy := len(idle) < len(e.slots)
		if len(idle) == 0 {
			return !e.closing()
		}
		var r *request
		if busy {
			select {
			case r = <-e.queue:
			case <-e.quit:
				return false
			default:
				return true
			}
		} else {
			sleepAt, stop := e.idleTimer()
		wait:
			select {
			case r = <-e.queue:
			case c := <-e.control:
				stop()
				e.checkDevice()
				if err := e.wakeUp(); err != nil {
					c.finish(err)
					continue
				}
				e.pending = append(e.pending, c)
				e.runControls()
				continue
			case <-e.quit:
				return false
			case <-sleepAt:
				e.sleep()
				continue
			case <-e.feedIdle(): // a snapshot to publish (feed.go); the sleep timer runs on
				e.obs.dirty = true
				goto wait
			}
			stop()
		}
		if r.ctx.Err() != nil {
			r.fail(r.ctx.Err())
			continue
		}
		if e.draining() {
			r.fail(ErrClosed)
			continue
		}
		e.checkDevice()
		if err := e.wakeUp(); err != nil {
			r.fail(err)
			continue
		}
		if r.task.Slot == nil {
			e.startIn(e.pickSlot(idle, r.task.Prompt, loraKey(e.loraScales(r.task.Params))), r)
		} else if s := e.slots[*r.task.Slot]; s.idle() {
			e.startIn(s, r)
		} else {
			e.waiting = append(e.waiting, r)
			e.nWait.Store(int64(len(e.waiting)))
		}
	}
}

// admitWaiting starts the requests waiting for a slot that is now idle and drops those whose
// client left.
func (e *Engine) admitWaiting() {
	kept := e.waiting[:0]
	for _, r := range e.waiting {
		s := e.slots[*r.task.Slot]
		switch {
		case r.ctx.Err() != nil:
			r.fail(r.ctx.Err())
		case s.idle():
			e.startIn(s, r)
		default:
			kept = append(kept, r)
		}
	}
	clear(e.waiting[len(kept):])
	e.waiting = kept
	e.nWait.Store(int64(len(kept)))
}

// startIn starts r in the idle slot s, failing r when it cannot start.
func (e *Engine) startIn(s *slot, r *request) {
	if err := e.start(s, r); err != nil {
		r.fail(err)
		s.gen = nil
		return
	}
	if s.gen != nil {
		r.setPhase(phaseRunning)
		e.progress(s) // llama-server's 0% update: the request has started
	}
}

func (e *Engine) closing() bool {
	select {
	case <-e.quit:
		return true
	default:
		return false
	}
}

// idle reports that no request runs in the slot.
func (s *slot) idle() bool { return s.gen == nil && s.job == nil }

func (e *Engine) idleSlots() []*slot {
	var idle []*slot
	for _, s := range e.slots {
		if s.idle() {
			idle = append(idle, s)
		}
	}
	return idle
}

// pickSlot chooses, as llama-server does, the idle slot whose cache holds the largest part of
// the prompt, above slotPromptSimilarity, else the least recently used. (Busy slots' and the
// prompt cache's prefixes can then be shared: see start.)
func (e *Engine) pickSlot(idle []*slot, prompt []int32, key string) *slot {
	var best *slot
	bestLen := 0
	for _, s := range idle {
		if n := s.prefixFor(prompt, key); n > bestLen && float64(n)/float64(len(prompt)) > slotPromptSimilarity {
			best, bestLen = s, n
		}
	}
	if best != nil {
		return best
	}
	best = idle[0]
	for _, s := range idle[1:] {
		if s.lastUsed.Before(best.lastUsed) {
			best = s
		}
	}
	return best
}

// turn builds one batch from every active slot — one token for each generating slot, then
// prompt chunks while room is left — runs it, and lets each slot that got logits sample.
func (e *Engine) turn() {
	for _, s := range e.slots { // a client that left frees its slot now
		if s.gen != nil && s.gen.r.ctx.Err() != nil {
			e.end(s, e.finish(s, StopNone))
		}
	}
	e.shiftFull()
	b := model.Batch{PageBits: pageBits}
	// one set of adapter scales a pass; slots with another wait (passLora)
	key, scales := e.passLora()
	b.Lora = scales
	other := func(g *generation) bool {
		if g.loraKey != key {
			g.waited++
			return true
		}
		g.waited = 0
		return false
	}
	var bp batchPages
	type row struct {
		s      *slot
		tokens []int32 // what this slot adds to the cache with this batch
		logits int     // how many of its last rows have logits (1 + drafted tokens when generating)
	}
	var rows []row
	budget := e.batch
	// Speculative decoding: the drafted tokens each generating slot verifies after its next one.
	drafts := e.propose()
	for _, s := range e.slots { // generating slots first: they need one token each
		g := s.gen
		if g == nil || !g.promptDone || budget == 0 || other(g) {
			continue
		}
		toks := []int32{g.next}
		replay := len(s.replay)
		switch {
		case replay > 0:
			if replay+1 > budget {
				continue // with the next turn's room
			}
			toks = append(slices.Clone(s.replay), g.next)
		case drafts != nil:
			toks = append(toks, drafts[s.id]...)
		}
		got := e.reserve(s, len(s.cached)+len(toks), &b.Copies)
		if got == 0 && e.cellLimit > 0 {
			// As llama-server when a decode finds no free cell even after purging idle slots:
			// every request being processed fails, and this batch is not run.
			e.contextExceeded()
			return
		}
		if got == 0 {
			e.cacheFull(s)
			continue
		}
		if got < replay+1 {
			e.cacheFull(s)
			continue
		}
		toks = toks[:got] // drafted tokens past the free pages are dropped
		base := bp.base(s)
		for i, tok := range toks {
			b.Tokens = append(b.Tokens, tok)
			b.Pos = append(b.Pos, int32(len(s.cached)+i))
			b.Base = append(b.Base, base)
			if i >= replay {
				b.Logits = append(b.Logits, len(b.Tokens)-1)
			}
		}
		b.MPos = e.appendMRoPE(b.MPos, s.cached, toks)
		e.appendStates(&b, s, len(toks))
		if e.recurrent && len(toks) > replay+1 { // drafted rows: keep the state they start from
			b.StateCopies = append(b.StateCopies, model.StateCopy{Src: s.id, Dst: keptState(s.id, len(e.slots))})
		}
		s.replay = nil
		rows = append(rows, row{s: s, tokens: toks, logits: len(toks) - replay})
		budget -= len(toks)
	}
	blocked := 0
	for _, s := range e.slots {
		g := s.gen
		if g == nil || g.promptDone || budget == 0 || other(g) {
			continue
		}
		rest := g.prompt[len(s.cached):]
		chunk := rest[:e.reserve(s, len(s.cached)+min(len(rest), budget), &b.Copies)]
		if len(chunk) == 0 {
			blocked++
			continue
		}
		if chunk = e.cutMedia(rest, chunk); len(chunk) == 0 {
			continue // an image that does not fit this pass's room: a later pass has more
		}
		chunk = e.checkpointCut(s, g.prompt, chunk)
		base := bp.base(s)
		for i, tok := range chunk {
			b.Tokens = append(b.Tokens, tok)
			b.Pos = append(b.Pos, int32(len(s.cached)+i))
			b.Base = append(b.Base, base)
		}
		b.MPos = e.appendMRoPE(b.MPos, s.cached, chunk)
		e.appendStates(&b, s, len(chunk))
		r := row{s: s, tokens: chunk}
		if len(chunk) == len(rest) {
			b.Logits = append(b.Logits, len(b.Tokens)-1)
			r.logits = 1
		}
		rows = append(rows, r)
		budget -= len(chunk)
	}
	if len(b.Tokens) == 0 {
		if blocked > 0 { // prompts wait for pages that only they hold: give up on the newest
			e.cacheFull(e.newestPrompt())
		}
		return
	}
	b.Pages = bp.pages
	if e.log.GetLevel() <= log.DebugLevel { // the pass's make-up, for tests and diagnosis
		ids := make([]int, len(rows))
		for i, r := range rows {
			ids[i] = r.s.id
		}
		e.log.Debug("forward pass", "slots", ids, "tokens", len(b.Tokens), "lora", key)
	}
	if i, ok := e.attachMedia(&b); !ok {
		// The image was dropped from the engine's store since the request was checked: its
		// request fails, the others run at the next turn.
		at := 0
		for _, r := range rows {
			if i >= at && i < at+len(r.tokens) {
				e.truncate(r.s, 0)
				r.s.gen.res.Err = fmt.Errorf("%w: the image at prompt position %d is no longer held: send the request again", ErrBadMedia, int(b.Pos[i]))
				e.end(r.s, e.finish(r.s, StopNone))
			}
			at += len(r.tokens)
		}
		return
	}
	if q := e.armedProbe(); q != nil { // the probed slot's last row in this pass, if it has one
		at, row := 0, -1
		for _, r := range rows {
			if at += len(r.tokens); r.s.id == q.slot {
				row = at - 1
			}
		}
		if row >= 0 {
			e.setProbe(&b, q, row)
		}
	}
	w := e.watchPass()
	logits, err := e.forward(b)
	if err == nil {
		e.probeDone(b)
	}
	if w != nil {
		for _, r := range rows {
			w.add(r.s.id, len(r.tokens), !r.s.gen.promptDone)
		}
		e.passDone(w)
	}
	if err != nil {
		e.log.Error("forward pass failed", "err", err)
		err = e.clientError(err)
		for _, r := range rows {
			e.truncate(r.s, 0)
			r.s.gen.res.Err = err
			e.end(r.s, e.finish(r.s, StopNone))
		}
		return
	}
	e.noteDecode(b)
	li := 0
	for _, r := range rows {
		if r.logits > 1 { // a drafted continuation: the slot keeps what the model agrees with
			from := len(r.s.cached)
			final, done := e.verify(r.s, r.tokens, logits[li:li+r.logits])
			if e.recurrent && len(r.s.cached)-from < len(r.tokens) {
				if err := e.rollBack(r.s, from, done); err != nil && !done {
					r.s.gen.res.Err = e.clientError(err)
					final, done = e.finish(r.s, StopNone), true
				}
			}
			e.truncate(r.s, len(r.s.cached)) // free pages reserved for rejected drafts
			if done {
				e.end(r.s, final)
			}
			li += r.logits
			continue
		}
		r.s.cached = append(r.s.cached, r.tokens...)
		if !r.s.gen.promptDone {
			e.afterChunk(r.s, r.s.gen.prompt)
			e.progress(r.s)
		}
		if r.logits == 0 {
			continue
		}
		if final, done := e.step(r.s, logits[li]); done {
			e.end(r.s, final)
		}
		li++
	}
}

// shiftFull applies the context shift (when on) to generating slots whose context is full, or
// that need a page when none is free, before the batch is built, as llama-server does at the
// start of update_slots.
func (e *Engine) shiftFull() {
	if !e.ctxShift {
		return
	}
	for _, s := range e.slots {
		g := s.gen
		if g == nil || !g.promptDone {
			continue
		}
		needPage := len(s.cached)&(pageRows-1) == 0 && len(e.pool.free) == 0 && !e.evictable(s) ||
			e.cellLimit > 0 && e.cellsHeld() >= e.cellLimit && !e.evictable(s)
		if len(s.cached)+1 < e.slotCtx && !needPage {
			continue
		}
		if err := e.shiftContext(s); err != nil {
			g.res.Err = err
			e.end(s, e.finish(s, StopNone))
		}
	}
}

// cacheFull ends a request for which no page was free, as llama-server ends one whose context
// is full (truncated, stop type limit), or with an error while its prompt is still being read.
func (e *Engine) cacheFull(s *slot) {
	g := s.gen
	if !g.promptDone {
		g.res.Err = fmt.Errorf("%w: no room for the prompt of %d tokens while %d slots are busy", errCacheFull, len(g.prompt), len(e.slots)-len(e.idleSlots()))
		e.end(s, e.finish(s, StopNone))
		return
	}
	g.res.Truncated = true
	e.end(s, e.finish(s, StopLimit))
}

// ErrContextExceeded ends every request being processed when the unified KV cache has no cell
// left for a generating slot's next token (llama-server's words).
var ErrContextExceeded = errors.New("Context size has been exceeded.")

// contextExceeded fails every running generation with ErrContextExceeded, dropping their caches
// (their pages may hold reservations and copies of the batch that will not run).
func (e *Engine) contextExceeded() {
	for _, s := range e.slots {
		if s.gen == nil {
			continue
		}
		e.truncate(s, 0)
		s.gen.res.Err = ErrContextExceeded
		e.end(s, e.finish(s, StopNone))
	}
}

// newestPrompt is the slot reading a prompt that started last.
func (e *Engine) newestPrompt() *slot {
	var newest *slot
	for _, s := range e.slots {
		if g := s.gen; g != nil && !g.promptDone && (newest == nil || g.promptStart.After(newest.gen.promptStart)) {
			newest = s
		}
	}
	return newest
}

// forward runs a batch (see run), turning a GPU panic into an error so one failure cannot
// take the server down.
func (e *Engine) forward(b model.Batch) (logits []logitsRow, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine: internal error: %v", p)
		}
	}()
	return e.run(b)
}

// end delivers a generation's final result and frees its slot.
func (e *Engine) end(s *slot, final Result) {
	g := s.gen
	e.noteEnd(s, final)
	g.r.send(final)
	g.r.close()
	s.gen, s.prev, s.lastUsed = nil, g, time.Now()
}

// failRunning ends every request holding a slot (generation or embedding job) with err.
func (e *Engine) failRunning(err error) {
	e.failJobs(err)
	for _, s := range e.slots {
		if s.gen != nil {
			s.gen.res.Err = err
			e.end(s, e.finish(s, StopNone))
		}
	}
}

// failAll ends every running and queued request with err (the engine is closing).
func (e *Engine) failAll(err error) {
	e.failRunning(err)
	for _, r := range e.waiting {
		r.fail(err)
	}
	e.waiting = nil
	e.nWait.Store(0)
	for {
		select {
		case r := <-e.queue:
			r.fail(err)
		default:
			return
		}
	}
}
