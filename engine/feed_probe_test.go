package engine_test

import (
	"math"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestFeedProbe asks for slot 1's attention in layer 2, head 1, while two slots generate: the
// final snapshot holds the weights of slot 1's last pass over every position it attended to,
// a distribution; a probe outside the model is ignored rather than failing passes; off, no
// new weights come.
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
	// the last pass slot 1 took part in fed its last-but-one generated token back, at
	// position cached-1
	if len(a.Weights) != run.final.TokensCached {
		t.Errorf("%d weights, want %d (slot 1's cached tokens)", len(a.Weights), run.final.TokensCached)
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
	last := 0
	for _, r := range recs {
		for _, s := range r.Shares {
			if s.Slot == 1 {
				last = int(r.Pass)
			}
		}
	}
	if a.Pass != uint64(last) {
		t.Errorf("weights from pass %d, slot 1 last ran in pass %d", a.Pass, last)
	}

	// out of the model's range: passes run, the old weights stay
	f.Probe(0, 99, 0)
	feedRunIn(t, e, 0, "The cat", 4)
	recs = f.Passes(0)
	if snap = settled(t, f, idleAt(recs[len(recs)-1].Pass)); snap.Attention == nil || snap.Attention.Pass != a.Pass {
		t.Errorf("after a probe out of range: attention %+v", snap.Attention)
	}
	f.Probe(-1, 0, 0)
	feedRunIn(t, e, 1, "The dog", 4)
	recs = f.Passes(0)
	if snap = settled(t, f, idleAt(recs[len(recs)-1].Pass)); snap.Attention.Pass != a.Pass {
		t.Errorf("probe off, yet new weights from pass %d", snap.Attention.Pass)
	}
}
