package model_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// TestForwardTopK checks that a batch's candidates are exactly the best logits of the rows
// ForwardBatch returns for the same batch (ids, order and values), with the rows' maxima and
// log-sum-exps, on both kernel families: on stories260K (vocabulary 512) and on a synthetic
// model whose 5000-token rows span several of the barrier-free kernel's spans.
func TestForwardTopK(t *testing.T) {
	dev := gputest.Device(t)
	defer func(v bool) { dev.BarrierFree = v }(dev.BarrierFree)
	stories := loadOpts(t, model.Options{MaxBatch: 64, MaxOutputs: 4}, "models", "stories260K.gguf")
	f := tinyModel(t, func(c *synth.Config) { c.Vocab = 5000 })
	wide, err := model.Load(dev, f, model.Options{MaxBatch: 64, MaxOutputs: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wide.Close)
	// Three sequences in one pass; logits of each one's last token and of one earlier token.
	var b model.Batch
	for i, s := range [][]int32{{1, 403, 407, 261, 378}, {1, 300, 301}, {1, 45, 46, 47}} {
		for p, tok := range s {
			b.Tokens = append(b.Tokens, tok)
			b.Pos = append(b.Pos, int32(p))
			b.Base = append(b.Base, int32(i*16))
			if p == len(s)-1 || (i == 0 && p == 2) {
				b.Logits = append(b.Logits, len(b.Tokens)-1)
			}
		}
	}
	for name, m := range map[string]*model.Model{"stories260K": stories, "synth-5000": wide} {
		for _, bf := range []bool{false, true} {
			dev.BarrierFree = bf
			t.Run(fmt.Sprintf("%s/barrier-free=%v", name, bf), func(t *testing.T) {
				full := forwardFresh(t, m, b, func(kv *model.KVCache) ([][]float32, error) { return m.ForwardBatch(kv, b) })
				kv, err := m.NewKVCache(64)
				if err != nil {
					t.Fatal(err)
				}
				defer kv.Release()
				before := dev.Submits()
				if _, err := m.ForwardTopK(kv, b, 40); err != nil {
					t.Fatal(err)
				}
				if n := dev.Submits() - before; n != 1 {
					t.Errorf("%d submits for one pass, want 1", n)
				}
				for _, k := range []int{1, 40, gpu.MaxTopK} {
					got := forwardFresh(t, m, b, func(kv *model.KVCache) ([]model.Candidates, error) { return m.ForwardTopK(kv, b, k) })
					if len(got) != len(b.Logits) {
						t.Fatalf("k %d: %d rows, want %d", k, len(got), len(b.Logits))
					}
					for row, c := range got {
						checkCandidates(t, fmt.Sprintf("k %d row %d", k, row), c, full[row], k)
					}
				}
			})
		}
	}
}

func checkCandidates(t *testing.T, what string, c model.Candidates, logits []float32, k int) {
	t.Helper()
	ids, vals, lse := cpuref.TopK(logits, len(logits), k)
	if len(c.IDs) != len(ids[0]) || len(c.Logits) != len(ids[0]) {
		t.Fatalf("%s: %d ids and %d logits, want %d", what, len(c.IDs), len(c.Logits), len(ids[0]))
	}
	for j := range ids[0] {
		if c.IDs[j] != ids[0][j] || c.Logits[j] != vals[0][j] {
			t.Fatalf("%s: candidate %d is %d (%g), want %d (%g)", what, j, c.IDs[j], c.Logits[j], ids[0][j], vals[0][j])
		}
	}
	if c.Max != vals[0][0] {
		t.Errorf("%s: max %g, want %g", what, c.Max, vals[0][0])
	}
	if math.Abs(c.LogSumExp-lse[0]) > 1e-5*math.Abs(lse[0]) {
		t.Errorf("%s: log-sum-exp %g, want %g", what, c.LogSumExp, lse[0])
	}
	if p := c.Prob(0); math.Abs(p-math.Exp(float64(vals[0][0])-lse[0])) > 1e-5 {
		t.Errorf("%s: top probability %g, want %g", what, p, math.Exp(float64(vals[0][0])-lse[0]))
	}
}

// forwardFresh runs one pass on a new cache.
func forwardFresh[T any](t *testing.T, m *model.Model, b model.Batch, run func(*model.KVCache) (T, error)) T {
	t.Helper()
	kv, err := m.NewKVCache(64)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	out, err := run(kv)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestForwardTopKErrors checks the limits on k and that a pass without logits rows returns
// no candidates.
func TestForwardTopKErrors(t *testing.T) {
	m := load(t, "models", "stories260K.gguf")
	kv, err := m.NewKVCache(16)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	b := model.Batch{Tokens: []int32{1, 403}, Pos: []int32{0, 1}, Base: []int32{0, 0}, Logits: []int{1}}
	for _, k := range []int{0, gpu.MaxTopK + 1} {
		if _, err := m.ForwardTopK(kv, b, k); err == nil {
			t.Errorf("k %d: no error", k)
		}
	}
	b.Logits = nil
	if got, err := m.ForwardTopK(kv, b, 40); err != nil || got != nil {
		t.Errorf("no logits rows: %v, %v", got, err)
	}
}
