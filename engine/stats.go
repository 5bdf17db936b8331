package engine

import (
	"sync"
	"time"

	"github.com/wgpu-llama/wgpu-llama/model"
)

// Stats are the engine's counters since it started, as llama-server's /metrics reports them
// (server_metrics in server-context.cpp). The engine goroutine fills them; Stats copies them.
type Stats struct {
	// Start is when the engine started (llama-server's Process-Start-Time-Unix).
	Start time.Time

	// PromptTokens are prompt tokens evaluated, PromptCached those reused from a slot's cache
	// instead, and PromptTime the time spent evaluating prompts.
	PromptTokens uint64
	PromptCached uint64
	PromptTime   time.Duration

	// PredictedTokens are generated tokens; PredictedSteps excludes each generation's first
	// token, whose logits came with the prompt, so that rates count decode steps only.
	PredictedTokens uint64
	PredictedSteps  uint64
	PredictedTime   time.Duration

	// Decodes counts forward passes, BusySlots the slots processing at each (summed), and
	// TokensMax is the longest sequence (prompt and generation) seen in a slot.
	Decodes   uint64
	BusySlots uint64
	TokensMax uint64

	// Generations counts finished generation requests, whatever their outcome.
	Generations uint64

	// Processing is the number of slots running a request, Deferred the requests waiting
	// for a slot; Shed counts requests refused because Config.MaxQueue were waiting, and
	// MaxQueue is that limit (0: none).
	Processing int
	Deferred   int
	Shed       uint64
	MaxQueue   int

	// KVTokens is how many KV cache rows the slots' pages take, of KVCapacity rows.
	KVTokens   int
	KVCapacity int

	// Spec counts speculative decoding's drafts (zero without it).
	Spec SpecStats
}

// stats guards the counters the engine goroutine updates and Stats reads.
type stats struct {
	mu sync.Mutex
	s  Stats
}

// Stats returns a snapshot of the engine's counters.
func (e *Engine) Stats() Stats {
	e.stats.mu.Lock()
	s := e.stats.s
	e.stats.mu.Unlock()
	s.Deferred = len(e.queue) + int(e.nWait.Load())
	s.MaxQueue = e.cfg.MaxQueue
	s.Spec = e.SpecStats()
	return s
}

// noteDecode counts a forward pass over b, as llama-server's on_decoded does after each
// llama_decode: the slots busy in it and the longest sequence it extends.
func (e *Engine) noteDecode(b model.Batch) {
	longest := 0
	for _, p := range b.Pos {
		longest = max(longest, int(p)+1)
	}
	busy, held := e.slotUsage(nil)
	if e.cellLimit == 0 {
		held += len(b.Tokens) // the batch's tokens join the slots' caches (cells count them already)
	}
	e.stats.mu.Lock()
	defer e.stats.mu.Unlock()
	st := &e.stats.s
	st.Decodes++
	st.BusySlots += uint64(busy)
	st.TokensMax = max(st.TokensMax, uint64(longest))
	st.Processing, st.KVTokens = busy, held
}

// notePromptDone counts a prompt whose evaluation has finished.
func (e *Engine) notePromptDone(t Timings) {
	e.stats.mu.Lock()
	defer e.stats.mu.Unlock()
	st := &e.stats.s
	st.PromptTokens += uint64(t.PromptN)
	st.PromptCached += uint64(t.CacheN)
	st.PromptTime += t.Prompt
}

// noteEnd counts a generation ending in slot s with its final result, before the client sees
// it, so that a scrape after the response counts it.
func (e *Engine) noteEnd(s *slot, final Result) {
	busy, held := e.slotUsage(s)
	e.stats.mu.Lock()
	defer e.stats.mu.Unlock()
	st := &e.stats.s
	n := uint64(final.TokensPredicted)
	st.PredictedTokens += n
	if n > 0 {
		st.PredictedSteps += n - 1
	}
	st.PredictedTime += final.Timings.Predicted
	st.TokensMax = max(st.TokensMax, uint64(len(s.cached)))
	st.Generations++
	st.Processing, st.KVTokens = busy, held
}

// noteSlots refreshes the gauges after a control message changed what the slots hold.
func (e *Engine) noteSlots() {
	busy, held := e.slotUsage(nil)
	e.stats.mu.Lock()
	e.stats.s.Processing, e.stats.s.KVTokens = busy, held
	e.stats.mu.Unlock()
}

// slotUsage counts the slots running a request (counting ending as idle) and the KV cache rows
// in use: the rows of the pages the slots hold, shared pages counted once (with a unified
// cache, the cells: only the rows the slots fill).
func (e *Engine) slotUsage(ending *slot) (busy, held int) {
	for _, s := range e.slots {
		if s.gen != nil && s != ending {
			busy++
		}
	}
	if e.cellLimit > 0 {
		return busy, e.cellsHeld()
	}
	return busy, e.pool.used() << pageBits
}
