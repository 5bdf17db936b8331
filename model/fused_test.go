package model

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestFusedRoundings runs Q8_0 llamas on GPUs' kernels with integer dot products (on
// lavapipe): a prompt of 13 tokens (the tiles) and a decode step, each with the norms' and
// the gated units' roundings fused into their kernels and as separate dispatches. The logits
// are bit-identical and the decode step takes, per layer, three dispatches fewer (two norms
// and the unit) for gen-model's tiny shape with a feed-forward of 192, two for stories260K,
// whose 172 does not split into the rounding's blocks of 32 (its down projection takes f32).
func TestFusedRoundings(t *testing.T) {
	stories := shareddata.Path(t, "models", "quant", "stories260K-Q8_0.gguf")
	f, err := gguf.Open(stories)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	t.Run("stories260K", func(t *testing.T) { testFusedRoundings(t, f, 2) })
	cfg, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.FF, cfg.Mix = 192, quantize.MixQ8_0
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if _, err := synth.WriteFile(path, cfg, nil); err != nil {
		t.Fatal(err)
	}
	tiny, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tiny.Close()
	t.Run("tiny-ff192", func(t *testing.T) { testFusedRoundings(t, tiny, 3) })
}

func testFusedRoundings(t *testing.T, f *gguf.File, fewer int) {
	dev := gputest.Device(t)
	defer func(b, i, it bool) { dev.BarrierFree, dev.IntDot, dev.IntDotTiles = b, i, it }(dev.BarrierFree, dev.IntDot, dev.IntDotTiles)
	dev.BarrierFree, dev.IntDot, dev.IntDotTiles = false, true, true
	m, err := Load(dev, f, Options{MaxBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	kv, err := m.NewKVCache(64)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	prompt := []int32{1, 403, 407, 261, 378, 432, 383, 286, 261, 300, 301, 302, 303}
	pre := Batch{Tokens: prompt, Logits: []int{len(prompt) - 1}}
	for p := range prompt {
		pre.Pos, pre.Base = append(pre.Pos, int32(p)), append(pre.Base, 0)
	}
	step := Batch{Tokens: []int32{300}, Pos: []int32{int32(len(prompt))}, Base: []int32{0}, Logits: []int{0}}
	var logits [2][][]float32
	var dispatches [2]int
	for i, unfused := range []bool{false, true} {
		m.unfused = unfused
		for _, b := range []Batch{pre, step} {
			out, err := m.ForwardBatch(kv, b)
			if err != nil {
				t.Fatal(err)
			}
			logits[i] = append(logits[i], out[0])
		}
		r, err := m.begin(kv, step)
		if err != nil {
			t.Fatal(err)
		}
		dispatches[i] = r.Dispatches()
		if err := r.Submit(); err != nil {
			t.Fatal(err)
		}
	}
	for j, name := range []string{"prompt", "decode step"} {
		if !slices.Equal(logits[0][j], logits[1][j]) {
			t.Errorf("%s: the fused roundings changed the logits", name)
		}
	}
	if layers := len(m.layers); dispatches[1]-dispatches[0] != fewer*layers {
		t.Errorf("decode step: %d dispatches fused, %d unfused; want %d fewer (%d a layer of %d)", dispatches[0], dispatches[1], fewer*layers, fewer, layers)
	}
	t.Logf("decode step of %d layers: %d dispatches fused, %d unfused", len(m.layers), dispatches[0], dispatches[1])
}
