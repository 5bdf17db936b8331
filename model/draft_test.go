package model_test

import (
	"math"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// TestDraftGreedyMatchesDecoding drafts 12 tokens for two sequences at once, in separate
// cache regions, and checks the ids and probabilities against plain greedy decoding of each
// sequence alone, and that the whole draft is one queue submission.
func TestDraftGreedyMatchesDecoding(t *testing.T) {
	for _, name := range []string{"stories260K.gguf", "hybrid/qwen35-F32.gguf"} {
		t.Run(name, func(t *testing.T) { testDraftGreedy(t, name) })
	}
}

// testDraftGreedy checks DraftGreedy on the shared model name: on the hybrid qwen35, each
// sequence in a state slot of its own and text positions turned by M-RoPE.
func testDraftGreedy(t *testing.T, name string) {
	path := shareddata.Path(t, append([]string{"models"}, strings.Split(name, "/")...)...)
	dev := gputest.Device(t)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.Load(dev, f, model.Options{MaxBatch: 64, MaxOutputs: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const steps, region = 12, 64
	seqs := [][]int32{{1, 403, 407, 261, 378}, {1, 300, 301}}
	type step struct {
		id   int32
		prob float64
	}
	alone := make([][]step, len(seqs))
	for i, s := range seqs {
		greedy(t, m, s, steps, func(_ int, logits []float32) {
			lp := logSoftmax(logits)
			id := argmax(logits)
			alone[i] = append(alone[i], step{id, math.Exp(lp[id])})
		})
	}
	kv, err := m.NewKVCacheFor(len(seqs)*region, len(seqs))
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	var first model.Batch
	for i, s := range seqs {
		for p, tok := range s {
			first.Tokens = append(first.Tokens, tok)
			first.Pos = append(first.Pos, int32(p))
			first.Base = append(first.Base, int32(i*region))
			if m.Recurrent() {
				first.States = append(first.States, int32(i))
			}
		}
		first.Logits = append(first.Logits, len(first.Tokens)-1)
	}
	before := dev.Submits()
	ids, probs, err := m.DraftGreedy(kv, first, steps)
	if err != nil {
		t.Fatal(err)
	}
	if n := dev.Submits() - before; n != 1 {
		t.Errorf("a draft of %d tokens for %d sequences took %d submits, want 1", steps, len(seqs), n)
	}
	for i := range seqs {
		if len(ids[i]) != steps || len(probs[i]) != steps {
			t.Fatalf("sequence %d: %d ids and %d probabilities, want %d", i, len(ids[i]), len(probs[i]), steps)
		}
		for j, want := range alone[i] {
			if ids[i][j] != want.id {
				t.Fatalf("sequence %d step %d: drafted %d, greedy decoding %d (draft %v)", i, j, ids[i][j], want.id, ids[i])
			}
			if d := math.Abs(float64(probs[i][j]) - want.prob); d > 1e-3 {
				t.Errorf("sequence %d step %d: probability %.5f, greedy decoding %.5f", i, j, probs[i][j], want.prob)
			}
		}
	}
	// A draft whose later passes would leave the sequence's region of the cache is refused.
	last := model.Batch{Tokens: []int32{1}, Pos: []int32{region - 2}, Base: []int32{region}, Logits: []int{0}}
	if _, _, err := m.DraftGreedy(kv, last, 4); err == nil {
		t.Error("a draft past the end of the cache was accepted")
	}
}
