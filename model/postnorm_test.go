package model_test

import (
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// TestPostNormsAddInPlace checks that Gemma's post-norms add their output to the residual
// stream in the norm's own dispatch (gpu.RMSNormAdd): a gemma4 decode step dispatches no
// separate add, and every rms_norm is a post-norm or the output norm (the pre-norms are fused
// into the activations' rounding on GPU kernels). The reference files' probabilities stay
// llama.cpp's (TestGemma4FilesMatchLlamaCpp).
func TestPostNormsAddInPlace(t *testing.T) {
	dev := gputest.Device(t)
	defer func(b, i, it bool) { dev.BarrierFree, dev.IntDot, dev.IntDotTiles = b, i, it }(dev.BarrierFree, dev.IntDot, dev.IntDotTiles)
	dev.BarrierFree, dev.IntDot, dev.IntDotTiles = false, true, true
	m := loadPath(t, dev, shareddata.Path(t, "models", "gemma4", "gemma4-Q8_0.gguf"))
	kv, err := m.NewKVCache(64)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	step := model.Batch{Tokens: []int32{300}, Pos: []int32{0}, Base: []int32{0}, Logits: []int{0}}
	dev.Profile = gpu.NewProfile()
	defer func() { dev.Profile = nil }()
	if _, err := m.ForwardBatch(kv, step); err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for _, k := range dev.Profile.Sorted() {
		calls[k.Family] = k.Calls
	}
	if layers := m.Config.NLayer; calls["add"] != 0 || calls["rms_norm"] != 2*layers+1 {
		t.Errorf("a decode step of %d layers: %d adds, %d rms_norm (want 0 and %d)", layers, calls["add"], calls["rms_norm"], 2*layers+1)
	}
}
