package model_test

import (
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// TestEstimateFootprint compares the estimate made from the file's config with what loading
// the model and a cache of 100 rows (and, for the hybrid qwen35, 3 recurrent state slots; for
// gemma4, rows of two sizes and layers without a cache of their own)
// allocates on a device of its own: the cache, the state and the activations exactly, the
// weights within 10% (the file's bytes against the device's).
func TestEstimateFootprint(t *testing.T) {
	for _, parts := range [][]string{{"models", "stories260K.gguf"}, {"models", "hybrid", "qwen35-F32.gguf"}, {"models", "gemma4", "gemma4-F32.gguf"}} {
		t.Run(parts[len(parts)-1], func(t *testing.T) {
			path := shareddata.Path(t, parts...)
			dev, err := gpu.Open(-1)
			gputest.Check(t, err)
			defer dev.Close()
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			c, err := model.ReadConfig(f)
			if err != nil {
				t.Fatal(err)
			}
			emb, _ := f.Tensor("token_embd.weight")
			c.NVocab = int(emb.Shape[1])
			opts := model.Options{MaxBatch: 37, MaxOutputs: 3}
			est := model.EstimateFootprint(c, opts, 100, 3, dev.BarrierFree)

			m, err := model.Load(dev, f, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := m.ScratchBytes(); got != est.Scratch {
				t.Errorf("scratch: estimated %d bytes, loaded %d", est.Scratch, got)
			}
			weights := dev.StorageBytes() - m.ScratchBytes()
			if d := float64(weights) - float64(est.Weights); d > 0.1*float64(weights) || d < -0.1*float64(weights) {
				t.Errorf("weights: estimated %d bytes, loaded %d", est.Weights, weights)
			}
			kv, err := m.NewKVCacheFor(100, 3)
			if err != nil {
				t.Fatal(err)
			}
			defer kv.Release()
			if got := kv.Bytes(); got != est.KV+est.State {
				t.Errorf("cache: estimated %d bytes of keys and values and %d of state, allocated %d", est.KV, est.State, got)
			}
			if m.Recurrent() != (est.State > 0) || est.State != 3*uint64(m.StateBytes()) {
				t.Errorf("state: estimated %d bytes, %d a sequence", est.State, m.StateBytes())
			}
			if want := est.Weights + est.KV + est.State + est.Scratch; est.Total() != want {
				t.Errorf("Total %d, want %d", est.Total(), want)
			}
		})
	}
}

// TestDeviceSize checks ReadConfig's estimate of the weights' device size against what loading
// them takes: MXFP4's 17-byte blocks padded to 20, Q5_0's and Q8_0's to whole words.
func TestDeviceSize(t *testing.T) {
	for _, file := range []string{"gptoss-MXFP4_MOE.gguf", "qwen3moe-Q4_K_M.gguf"} {
		m := load(t, "models", "moe", file)
		if got, want := m.WeightBytes(), m.Config.DeviceSize; got != want {
			t.Errorf("%s: %d bytes on the device, estimated %d (file %d)", file, got, want, m.Config.TensorSize)
		}
		if m.Config.DeviceSize <= m.Config.TensorSize {
			t.Errorf("%s: device size %d not above the file's %d", file, m.Config.DeviceSize, m.Config.TensorSize)
		}
	}
}
