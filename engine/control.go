package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// ErrInvalidSlot is returned for a slot id the engine does not have.
var ErrInvalidSlot = errors.New("engine: invalid slot id")

// control is work for the engine goroutine between turns: reading slot states, saving,
// restoring or erasing a slot. One that names a slot waits until no request runs in it, as
// llama-server defers slot tasks while the slot is processing.
type control struct {
	ctx  context.Context
	slot *slot // nil: runs at the next turn whatever the slots do
	run  func() error
	err  error
	done chan struct{}
}

func (c *control) finish(err error) {
	c.err = err
	close(c.done)
}

// do runs fn on the engine goroutine (after slot s, if any, is idle) and returns its error.
// A caller whose ctx ends stops waiting; fn then runs only if it had already started.
func (e *Engine) do(ctx context.Context, s *slot, fn func() error) error {
	c := &control{ctx: ctx, slot: s, run: fn, done: make(chan struct{})}
	select {
	case e.control <- c:
	case <-e.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-c.done:
		return c.err
	case <-e.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runControls takes queued control messages and runs those that can run now; the rest wait
// for their slot. It runs on the engine goroutine.
func (e *Engine) runControls() {
	for drained := false; !drained; {
		select {
		case c := <-e.control:
			e.pending = append(e.pending, c)
		default:
			drained = true
		}
	}
	waiting := e.pending[:0]
	for _, c := range e.pending {
		switch {
		case c.ctx.Err() != nil:
			c.finish(c.ctx.Err())
		case c.slot != nil && c.slot.gen != nil:
			waiting = append(waiting, c)
		default:
			c.finish(c.run())
			e.obs.dirty = true // for the feed's next snapshot (feed.go)
		}
	}
	clear(e.pending[len(waiting):])
	e.pending = waiting
}

// failControls ends every queued and waiting control message with err (the engine is closing).
func (e *Engine) failControls(err error) {
	for _, c := range e.pending {
		c.finish(err)
	}
	e.pending = nil
	for {
		select {
		case c := <-e.control:
			c.finish(err)
		default:
			return
		}
	}
}

// slotByID returns the slot with id, or ErrInvalidSlot.
func (e *Engine) slotByID(id int) (*slot, error) {
	if id < 0 || id >= len(e.slots) {
		return nil, fmt.Errorf("%w: %d (the engine has slots 0 to %d)", ErrInvalidSlot, id, len(e.slots)-1)
	}
	return e.slots[id], nil
}

// rowSpan is a run of KV cache rows [start, end) holding consecutive tokens of one slot.
type rowSpan struct{ start, end int }

// slotRows lists, in token order, the KV cache rows that hold (or, for a restore, will hold)
// the first n tokens of slot s: its pages, runs of adjacent pages merged. s must have the
// pages for n tokens (reserve).
func (e *Engine) slotRows(s *slot, n int) []rowSpan {
	var spans []rowSpan
	for i := 0; i < pagesFor(n); i++ {
		start := int(s.pages[i]) << pageBits
		end := start + min(pageRows, n-i<<pageBits)
		if k := len(spans) - 1; k >= 0 && spans[k].end == start {
			spans[k].end = end
			continue
		}
		spans = append(spans, rowSpan{start, end})
	}
	return spans
}

// SlotState is where a slot is in serving a request: llama-server's slot states, less the
// transient ones its loop passes through within one iteration (started, done prompt).
type SlotState int

// The slot states, in the order a request goes through them.
const (
	SlotIdle             SlotState = iota // no request; the cache keeps the last one's tokens
	SlotProcessingPrompt                  // evaluating the prompt, a chunk a turn
	SlotGenerating                        // sampling a token a turn
)

// String names the state as llama.cpp's slot_state enumerators do, lower case.
func (s SlotState) String() string {
	switch s {
	case SlotIdle:
		return "idle"
	case SlotProcessingPrompt:
		return "processing_prompt"
	case SlotGenerating:
		return "generating"
	}
	return fmt.Sprintf("SlotState(%d)", int(s))
}

// SlotInfo is one slot's state as llama-server's GET /slots reports it.
type SlotInfo struct {
	// ID is the slot's index (llama-server's id_slot).
	ID int
	// NCtx is the slot's context size.
	NCtx int
	// Processing is set while a request runs in the slot (State is not SlotIdle).
	Processing bool
	State      SlotState
	// Task describes the running request or, in an idle slot, the last one that ran; nil
	// before the slot's first request.
	Task *SlotTask
}

// SlotTask is a slot's request as /slots shows it. Between requests the per-request counters
// read as llama-server resets them (0, and -1 for NRemain).
type SlotTask struct {
	// ID numbers the engine's requests in order of submission (llama-server's id_task).
	ID     int
	Params Params
	Stream bool
	// NPromptTokens is how many tokens the slot holds in its cache.
	NPromptTokens int
	// NPromptProcessed are the prompt tokens evaluated so far, NPromptCached those reused.
	NPromptProcessed int
	NPromptCached    int
	HasNextToken     bool
	HasNewLine       bool
	// NRemain is how many tokens the request may still generate, -1 for no limit.
	NRemain int
	// NDecoded is how many tokens it has generated.
	NDecoded int
}

// Slots returns the state of every slot, taken on the engine goroutine between turns.
func (e *Engine) Slots(ctx context.Context) ([]SlotInfo, error) {
	var out []SlotInfo
	err := e.do(ctx, nil, func() error {
		for _, s := range e.slots {
			out = append(out, e.slotInfo(s))
		}
		return nil
	})
	return out, err
}

func (e *Engine) slotInfo(s *slot) SlotInfo {
	info := SlotInfo{ID: s.id, NCtx: e.slotCtx, Processing: s.gen != nil}
	switch {
	case s.gen == nil:
		info.State = SlotIdle
	case s.gen.promptDone:
		info.State = SlotGenerating
	default:
		info.State = SlotProcessingPrompt
	}
	g := s.gen
	if g == nil {
		g = s.prev
	}
	if g == nil {
		return info
	}
	t := &SlotTask{ID: g.r.id, Params: g.p, Stream: g.r.task.Stream, NPromptTokens: len(s.cached), NRemain: -1}
	if s.gen != nil {
		t.NPromptCached = g.res.Timings.CacheN
		t.NPromptProcessed = min(len(s.cached), len(g.prompt)) - t.NPromptCached
		t.NDecoded = g.res.TokensPredicted
		t.HasNextToken = true
		t.HasNewLine = bytes.Contains(g.text, []byte("\n"))
		if g.p.NPredict >= 0 {
			t.NRemain = g.p.NPredict - t.NDecoded
		}
	}
	info.Task = t
	return info
}

// EraseSlot drops what slot id holds in the KV cache and returns how many tokens that was. It
// waits for a request running in the slot to finish.
func (e *Engine) EraseSlot(ctx context.Context, id int) (int, error) {
	s, err := e.slotByID(id)
	if err != nil {
		return 0, err
	}
	n := 0
	err = e.do(ctx, s, func() error {
		n = len(s.cached)
		e.truncate(s, 0)
		e.noteSlots()
		return nil
	})
	return n, err
}
