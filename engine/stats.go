package engine

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/wgpu-llama/wgpu-llama/gpu"
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
	// KVPageSize is the rows of a KV cache page (the unit slots take and share) and KVPages
	// their number: the cache configuration an inference gateway reads.
	KVPageSize int
	KVPages    int
	// KVPagesAdrift counts KV cache pages whose count of users differs from the slots and
	// prompt cache entries holding them, as last checked when a request ended: a leak (or a
	// double release) when not 0.
	KVPagesAdrift int

	// Spec counts speculative decoding's drafts (zero without it).
	Spec SpecStats

	// GPUMemory is the device memory the engine's buffers take (weights, KV cache,
	// activations; 0 while asleep), Recoveries the device losses it has reloaded after.
	GPUMemory  uint64
	Recoveries int
}

// stats holds the counters: writers (the engine goroutine, and enqueue's shedding) update them
// under mu and publish a copy, which Stats reads without a lock, so that a gateway scraping
// /metrics twenty times a second never waits on the engine.
type stats struct {
	mu  sync.Mutex
	s   Stats
	pub atomic.Pointer[Stats]
}

// update applies f to the counters and publishes the result.
func (st *stats) update(f func(*Stats)) {
	st.mu.Lock()
	defer st.mu.Unlock()
	f(&st.s)
	c := st.s
	st.pub.Store(&c)
}

// Stats returns a snapshot of the engine's counters; it takes no lock.
func (e *Engine) Stats() Stats {
	var s Stats
	if p := e.stats.pub.Load(); p != nil {
		s = *p
	}
	s.Deferred = len(e.queue) + int(e.nWait.Load())
	s.MaxQueue = e.cfg.MaxQueue
	s.Spec = e.SpecStats()
	if devs := e.liveDevs.Load(); devs != nil { // asleep, the figure from before sleeping (sleep.go)
		s.GPUMemory = storageBytes(*devs)
	}
	s.Recoveries = e.Recoveries()
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
	e.stats.update(func(st *Stats) {
		st.Decodes++
		st.BusySlots += uint64(busy)
		st.TokensMax = max(st.TokensMax, uint64(longest))
		st.Processing, st.KVTokens = busy, held
	})
}

// notePromptDone counts a prompt whose evaluation has finished.
func (e *Engine) notePromptDone(t Timings) {
	e.stats.update(func(st *Stats) {
		st.PromptTokens += uint64(t.PromptN)
		st.PromptCached += uint64(t.CacheN)
		st.PromptTime += t.Prompt
	})
}

// noteEnd counts a generation ending in slot s with its final result, before the client sees
// it, so that a scrape after the response counts it.
func (e *Engine) noteEnd(s *slot, final Result) {
	busy, held := e.slotUsage(s)
	adrift := e.pagesAdrift()
	e.stats.update(func(st *Stats) {
		n := uint64(final.TokensPredicted)
		st.PredictedTokens += n
		if n > 0 {
			st.PredictedSteps += n - 1
		}
		st.PredictedTime += final.Timings.Predicted
		st.TokensMax = max(st.TokensMax, uint64(len(s.cached)))
		st.Generations++
		st.Processing, st.KVTokens, st.KVPagesAdrift = busy, held, adrift
	})
}

// noteSlots refreshes the gauges after a control message changed what the slots hold.
func (e *Engine) noteSlots() {
	busy, held := e.slotUsage(nil)
	adrift := e.pagesAdrift()
	e.stats.update(func(st *Stats) { st.Processing, st.KVTokens, st.KVPagesAdrift = busy, held, adrift })
}

// pagesAdrift counts the pages whose users in the pool differ from the slots and prompt cache
// entries that hold them. It runs on the engine goroutine between passes, when every page in
// use belongs to one of those.
func (e *Engine) pagesAdrift() int {
	held := make([]int32, len(e.pool.refs))
	count := func(s *slot) {
		for _, pg := range s.pages {
			held[pg]++
		}
	}
	for _, s := range e.slots {
		count(s)
	}
	if e.cache != nil {
		for _, c := range e.cache.entries {
			count(c)
		}
	}
	n := 0
	for pg, r := range e.pool.refs {
		if r != held[pg] {
			n++
		}
	}
	return n
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

// storageBytes is the device memory the engine's buffers take over devs (a split's devices).
func storageBytes(devs []*gpu.Device) uint64 {
	var n uint64
	for _, d := range devs {
		n += d.StorageBytes()
	}
	return n
}
