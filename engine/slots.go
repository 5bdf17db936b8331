package engine

import (
	"fmt"
	"time"

	"github.com/wgpu-llama/wgpu-llama/model"
)

// slot is one sequence the engine can run: a region of the KV cache, the tokens cached in it
// (kept after a request, for prefix reuse), and the generation running in it, if any.
type slot struct {
	id       int
	base     int32 // first KV cache row of the region
	cached   []int32
	gen      *generation
	prev     *generation // the last generation that ran here, for SlotInfo
	lastUsed time.Time
}

// loop is the engine goroutine: it admits requests into idle slots and runs every active slot
// together, one batch per turn (llama-server's update_slots).
func (e *Engine) loop() {
	defer close(e.done)
	for {
		e.runControls()
		if !e.admit() {
			e.failAll(ErrClosed)
			e.failControls(ErrClosed)
			return
		}
		e.turn()
	}
}

// admit moves queued requests into idle slots, blocking while no slot is busy. It reports
// false when the engine is closing.
func (e *Engine) admit() bool {
	for {
		idle := e.idleSlots()
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
			select {
			case r = <-e.queue:
			case c := <-e.control:
				e.pending = append(e.pending, c)
				e.runControls()
				continue
			case <-e.quit:
				return false
			}
		}
		if r.ctx.Err() != nil {
			r.out <- Result{Stop: true, StopType: StopNone, Err: r.ctx.Err()}
			close(r.out)
			continue
		}
		s := e.pickSlot(idle, r.task.Prompt)
		if err := e.start(s, r); err != nil {
			r.out <- Result{Stop: true, StopType: StopNone, Err: err}
			close(r.out)
			s.gen = nil
		}
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

func (e *Engine) idleSlots() []*slot {
	var idle []*slot
	for _, s := range e.slots {
		if s.gen == nil {
			idle = append(idle, s)
		}
	}
	return idle
}

// pickSlot chooses, as llama-server does, the idle slot whose cache shares the longest prefix
// with the prompt, else the least recently used.
func (e *Engine) pickSlot(idle []*slot, prompt []int32) *slot {
	best, bestLen := idle[0], -1
	for _, s := range idle {
		if n := commonPrefix(s.cached, prompt); n > bestLen || (n == bestLen && s.lastUsed.Before(best.lastUsed)) {
			best, bestLen = s, n
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
	var b model.Batch
	type row struct {
		s      *slot
		tokens []int32 // what this slot adds to the cache with this batch
		logits bool
	}
	var rows []row
	budget := e.batch
	for _, s := range e.slots { // generating slots first: they need one token each
		g := s.gen
		if g == nil || !g.promptDone || budget == 0 {
			continue
		}
		b.Tokens = append(b.Tokens, g.next)
		b.Pos = append(b.Pos, int32(len(s.cached)))
		b.Base = append(b.Base, s.base)
		b.Logits = append(b.Logits, len(b.Tokens)-1)
		rows = append(rows, row{s: s, tokens: []int32{g.next}, logits: true})
		budget--
	}
	for _, s := range e.slots {
		g := s.gen
		if g == nil || g.promptDone || budget == 0 {
			continue
		}
		rest := g.prompt[len(s.cached):]
		chunk := rest[:min(len(rest), budget)]
		for i, tok := range chunk {
			b.Tokens = append(b.Tokens, tok)
			b.Pos = append(b.Pos, int32(len(s.cached)+i))
			b.Base = append(b.Base, s.base)
		}
		last := len(chunk) == len(rest)
		if last {
			b.Logits = append(b.Logits, len(b.Tokens)-1)
		}
		rows = append(rows, row{s: s, tokens: chunk, logits: last})
		budget -= len(chunk)
	}
	if len(b.Tokens) == 0 {
		return
	}
	logits, err := e.forward(b)
	if err != nil {
		e.log.Error("forward pass failed", "err", err)
		for _, r := range rows {
			r.s.cached = nil
			r.s.gen.res.Err = err
			e.end(r.s, e.finish(r.s, StopNone))
		}
		return
	}
	e.noteDecode(b)
	li := 0
	for _, r := range rows {
		r.s.cached = append(r.s.cached, r.tokens...)
		if !r.logits {
			continue
		}
		if final, done := e.step(r.s, logits[li]); done {
			e.end(r.s, final)
		}
		li++
	}
}

// forward runs a batch, turning a GPU panic into an error so one failure cannot take the
// server down.
func (e *Engine) forward(b model.Batch) (logits [][]float32, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine: internal error: %v", p)
		}
	}()
	return e.model.ForwardBatch(e.kv, b)
}

// end delivers a generation's final result and frees its slot.
func (e *Engine) end(s *slot, final Result) {
	g := s.gen
	e.noteEnd(s, final)
	g.r.send(final)
	close(g.r.out)
	s.gen, s.prev, s.lastUsed = nil, g, time.Now()
}

// failAll ends every running and queued request with err (the engine is closing).
func (e *Engine) failAll(err error) {
	for _, s := range e.slots {
		if s.gen != nil {
			s.gen.res.Err = err
			e.end(s, e.finish(s, StopNone))
		}
	}
	for {
		select {
		case r := <-e.queue:
			r.out <- Result{Stop: true, StopType: StopNone, Err: err}
			close(r.out)
		default:
			return
		}
	}
}
