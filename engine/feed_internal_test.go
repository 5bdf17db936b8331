package engine

import (
	"math/rand/v2"
	"testing"
)

// feedEngine is an engine of nSlots generating slots over a 128K-token page pool, each slot
// with 4K cached tokens and a sampler that last sampled from a 150K-token row: a large
// deployment's shape, for the feed's costs.
func feedEngine(nSlots int) *Engine {
	e := poolEngine(8192, nSlots)
	e.slotCtx = 8192
	row := make([]float32, 150_000)
	for i := range row {
		row[i] = float32(rand.NormFloat64() * 4)
	}
	for _, s := range e.slots {
		e.reserve(s, 4096, nil)
		fill(s, 4096)
		g := &generation{r: &request{id: s.id}, prompt: s.cached[:100], promptDone: true, smp: &sampler{last: row, picked: argmax(row)}}
		s.gen = g
	}
	e.obs.feed.Store(&Feed{changed: make(chan struct{}, 1)})
	return e
}

// BenchmarkFeedPass is what a watched engine adds to every forward pass.
func BenchmarkFeedPass(b *testing.B) {
	e := feedEngine(8)
	b.ReportAllocs()
	for b.Loop() {
		w := e.watchPass()
		for _, s := range e.slots {
			w.add(s.id, 1, false)
		}
		e.passDone(w)
		e.feedTick() // within snapshotEvery of the last: nothing to build
	}
}

// BenchmarkFeedPublish is one snapshot built on the engine goroutine (at most 60 a second).
func BenchmarkFeedPublish(b *testing.B) {
	e := feedEngine(8)
	f := e.obs.feed.Load()
	f.Select(0)
	b.ReportAllocs()
	for b.Loop() {
		e.publish(f)
	}
}
