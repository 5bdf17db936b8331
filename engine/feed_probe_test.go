package engine_test

import (
	"math"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// firstPassOf is the first of recs (after pass after) that slot took part in, 0 for none.
func firstPassOf(recs []engine.PassRecord, slot int, after uint64) uint64 {
	for _, r := range recs {
		for _, s := range r.Shares {
			if s.Slot == slot && r.Pass > after {
				return r.Pass
			}
		}
	}
	return 0
}

// TestFeedProbe asks for slot 1's attention in layer 2, head 1, while two slots generate. The
// engine probes once per snapshot read, not every pass: with no reader, only slot 1's first
// pass (its prompt) is probed, and the weights over its prompt positions form a distribution;
// a read arms the next. A probe outside the model is ignored rather than failing passes, and
// off, no new weights come.
func TestFeedProbe(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 512, Slots: 2})
	f := e.Feed()
	f.Probe(1, 2, 1)
	done := make(chan feedRun, 1)
	go func() { done <- feedRunIn(t, e, 0, "Once upon a time", 20) }()
	run := feedRunIn(t, e, 1, "Lily and Tom went to the park", 9)
	<-done
	recs := f.Passes(0)
	snap := settled(t, f, idleAt(recs[len(recs)-1].Pass))
	a := snap.Attention
	if a == nil || a.Slot != 1 || a.Layer != 2 || a.Head != 1 {
		t.Fatalf("attention %+v", a)
	}
	// the prompt's tokens: those evaluated and any prefix shared from slot 0's cache
	prompt := run.final.Timings.PromptN + run.final.Timings.CacheN
	if first := firstPassOf(recs, 1, 0); a.Pass != first || len(a.Weights) != prompt {
		t.Errorf("weights from pass %d over %d positions; want slot 1's first pass %d, over its %d prompt tokens", a.Pass, len(a.Weights), first, prompt)
	}
	var sum float64
	for _, w := range a.Weights {
		if w < 0 || w > 1 {
			t.Fatalf("weight %v", w)
		}
		sum += float64(w)
	}
	if math.Abs(sum-1) > 1e-4 {
		t.Errorf("weights sum to %v", sum)
	}

	// settled read a snapshot: the next request's first pass is probed
	last := recs[len(recs)-1].Pass
	feedRunIn(t, e, 1, "The dog", 4)
	recs = f.Passes(last)
	snap = settled(t, f, idleAt(recs[len(recs)-1].Pass))
	if first := firstPassOf(recs, 1, last); snap.Attention == nil || snap.Attention.Pass != first {
		t.Errorf("after a read: attention %+v, want pass %d's", snap.Attention, first)
	}
	probed := snap.Attention.Pass

	// out of the model's range: passes run, the old weights stay
	f.Probe(0, 99, 0)
	feedRunIn(t, e, 0, "The cat", 4)
	recs = f.Passes(0)
	if snap = settled(t, f, idleAt(recs[len(recs)-1].Pass)); snap.Attention == nil || snap.Attention.Pass != probed {
		t.Errorf("after a probe out of range: attention %+v", snap.Attention)
	}
	f.Probe(-1, 0, 0)
	feedRunIn(t, e, 1, "The bird", 4)
	recs = f.Passes(0)
	if snap = settled(t, f, idleAt(recs[len(recs)-1].Pass)); snap.Attention.Pass != probed {
		t.Errorf("probe off, yet new weights from pass %d", snap.Attention.Pass)
	}
}
