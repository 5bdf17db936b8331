package model_test

import (
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// TestResidualsAddInPlace checks the residual adds that ride on other dispatches, on GPU
// kernels: Gemma's post-norms add their output to the stream in the norm's dispatch
// (gpu.RMSNormAdd), so a gemma4 decode step dispatches no separate add, and every rms_norm is
// a post-norm or the output norm (the pre-norms are fused into the activations' rounding);
// gpt-oss's attention output bias is added with the residual (gpu.AddBiased, one add a
// layer) and its router's bias in the routing, so it has no bias_act. The reference files'
// probabilities stay llama.cpp's (TestGemma4FilesMatchLlamaCpp, TestMoEFilesMatchLlamaCpp).
func TestResidualsAddInPlace(t *testing.T) {
	t.Run("gemma4", func(t *testing.T) {
		calls, layers := decodeCalls(t, "gemma4", "gemma4-Q8_0.gguf")
		if calls["add"] != 0 || calls["rms_norm"] != 2*layers+1 {
			t.Errorf("a decode step of %d layers: %d adds, %d rms_norm (want 0 and %d)", layers, calls["add"], calls["rms_norm"], 2*layers+1)
		}
	})
	t.Run("gpt-oss", func(t *testing.T) {
		calls, layers := decodeCalls(t, "moe", "gptoss-MXFP4_MOE.gguf")
		if calls["add"] != layers || calls["bias_act"] != 0 {
			t.Errorf("a decode step of %d layers: %d adds, %d bias_act (want %d and 0)", layers, calls["add"], calls["bias_act"], layers)
		}
	})
}

// decodeCalls is the dispatches by kernel family of a decode step of the shared model file,
// on GPU kernels, and its layer count.
func decodeCalls(t *testing.T, folder, name string) (map[string]int, int) {
	dev := gputest.Device(t)
	defer func(b, i, it bool) { dev.BarrierFree, dev.IntDot, dev.IntDotTiles = b, i, it }(dev.BarrierFree, dev.IntDot, dev.IntDotTiles)
	dev.BarrierFree, dev.IntDot, dev.IntDotTiles = false, true, true
	m := loadPath(t, dev, shareddata.Path(t, "models", folder, name))
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
	return calls, m.Config.NLayer
}
