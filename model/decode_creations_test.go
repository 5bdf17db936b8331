package model_test

import (
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// TestDecodeMakesNothing decodes after a prompt and checks that, once the first steps have
// made what decoding needs, a step makes no buffer, bind group or pipeline: every scratch
// buffer, readback buffer, bind group and kernel is made once and reused (issue 32: nothing
// allocated per token). It runs a dense model, a Mixture of Experts, the recurrent hybrid (its
// state slots) and Gemma 4 (sliding window, shared caches), on CPU adapters' kernels and on
// GPUs' (integer-dot products and their fused roundings).
func TestDecodeMakesNothing(t *testing.T) {
	dev := gputest.Device(t)
	for _, gpuKernels := range []bool{false, true} {
		for _, name := range [][]string{{"quant", "stories260K-Q8_0.gguf"}, {"moe", "qwen3moe-Q8_0.gguf"}, {"hybrid", "qwen35-Q8_0.gguf"}, {"gemma4", "gemma4-Q8_0.gguf"}} {
			kernels := "cpu kernels"
			if gpuKernels {
				kernels = "gpu kernels"
			}
			t.Run(kernels+"/"+name[1], func(t *testing.T) {
				defer func(b, i, it bool) { dev.BarrierFree, dev.IntDot, dev.IntDotTiles = b, i, it }(dev.BarrierFree, dev.IntDot, dev.IntDotTiles)
				if gpuKernels {
					dev.BarrierFree, dev.IntDot, dev.IntDotTiles = false, true, true
				}
				m := loadPath(t, dev, shareddata.Path(t, "models", name[0], name[1]))
				kv, err := m.NewKVCache(256)
				if err != nil {
					t.Fatal(err)
				}
				defer kv.Release()
				prompt := m.Tokenizer.Encode("Once upon a time", true, true)
				logits, err := m.Forward(kv, prompt, 0)
				if err != nil {
					t.Fatal(err)
				}
				pos := len(prompt)
				step := func() {
					b := model.Batch{Tokens: []int32{argmax(logits)}, Pos: []int32{int32(pos)}, Base: []int32{0}, Logits: []int{0}}
					out, err := m.ForwardBatch(kv, b)
					if err != nil {
						t.Fatal(err)
					}
					logits, pos = out[0], pos+1
				}
				for range 3 {
					step()
				}
				before := dev.Creations()
				if before.Buffers == 0 || before.BindGroups == 0 || before.Pipelines == 0 {
					t.Fatalf("the counts miss what loading and the first steps made: %+v", before)
				}
				for range 16 {
					step()
				}
				if after := dev.Creations(); after != before {
					t.Errorf("16 decode steps made %d buffers, %d bind groups and %d pipelines", after.Buffers-before.Buffers,
						after.BindGroups-before.BindGroups, after.Pipelines-before.Pipelines)
				}
			})
		}
	}
}
