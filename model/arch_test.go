package model_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/model"
	"github.com/wgpu-llama/wgpu-llama/model/reference"
)

// TestArchitecturesMatchReference generates a small random model of every architecture the
// reference knows, runs a prompt through the GPU forward pass (prompt batch, then decode
// steps) and compares the last logits with the plain-Go reference: relative error < 1e-3.
func TestArchitecturesMatchReference(t *testing.T) {
	dev := gputest.Device(t)
	for _, arch := range reference.Supported {
		for _, mix := range []quantize.Mix{quantize.MixF32, quantize.MixQ8_0} {
			t.Run(arch+"/"+mix.String(), func(t *testing.T) {
				f := tinyModel(t, func(cfg *synth.Config) {
					cfg.Arch, cfg.Mix, cfg.Seed = arch, mix, 7
					if mix == quantize.MixQ8_0 {
						cfg.FF = 192 // ffn_down rows must fit 32-element blocks
					}
					if arch == "gemma3" {
						cfg.Layers = 6 // the sixth layer is global: its own RoPE base and scaling
					}
				})
				tokens := []int32{1, 403, 407, 261, 378, 290, 300, 310, 320, 330, 340, 350}
				want, err := reference.Forward(f, tokens)
				if err != nil {
					t.Fatal(err)
				}
				m, err := model.Load(dev, f, model.Options{MaxBatch: 16, KVF32: true, RawActivations: true})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				kv, err := m.NewKVCache(64)
				if err != nil {
					t.Fatal(err)
				}
				defer kv.Release()
				// Prompt in one pass, then the rest token by token.
				if _, err := m.Forward(kv, tokens[:8], 0); err != nil {
					t.Fatal(err)
				}
				var got []float32
				for i := 8; i < len(tokens); i++ {
					if got, err = m.Forward(kv, tokens[i:i+1], i); err != nil {
						t.Fatal(err)
					}
				}
				if e := cpuref.RelErr(got, want); e > 1e-3 {
					t.Errorf("GPU vs reference logits: relative error %.3g", e)
				} else {
					t.Logf("relative error %.2g", e)
				}
			})
		}
	}
}

// TestRopeFreqsMatchReference adds Llama 3.1's rope_freqs tensor to a generated llama model
// and checks the GPU forward pass against the reference, which divides each frequency's angle
// by its factor.
func TestRopeFreqsMatchReference(t *testing.T) {
	dev := gputest.Device(t)
	f := tinyModel(t, func(*synth.Config) {})
	var tensors []gguf.TensorData
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		tensors = append(tensors, gguf.TensorData{Name: ti.Name, Shape: ti.Shape, Type: ti.Type, Data: f.TensorData(ti)})
	}
	nRot, _ := f.Uint("llama.rope.dimension_count")
	factors := make([]float32, nRot/2)
	for i := range factors {
		factors[i] = 1 + float32(i) // distinct factors, so a wrong pairing shows
	}
	tensors = append(tensors, gguf.TensorData{Name: "rope_freqs.weight", Shape: []uint64{uint64(len(factors))}, Type: gguf.TypeF32, Data: float32Bytes(factors)})
	dst := filepath.Join(t.TempDir(), "llama31.gguf")
	if err := gguf.WriteFile(dst, f.KV, tensors); err != nil {
		t.Fatal(err)
	}
	plain, err := reference.Forward(f, []int32{1, 403, 407, 261, 378, 290, 300, 310, 320, 330, 340, 350})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	tokens := []int32{1, 403, 407, 261, 378, 290, 300, 310, 320, 330, 340, 350}
	want, err := reference.Forward(g, tokens)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dev, g, model.Options{KVF32: true, RawActivations: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	kv, err := m.NewKVCache(64)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	got, err := m.Forward(kv, tokens, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e := cpuref.RelErr(got, want); e > 1e-3 {
		t.Errorf("GPU vs reference logits with rope_freqs: relative error %.3g", e)
	}
	var diff float64
	for i := range want {
		diff = math.Max(diff, math.Abs(float64(want[i]-plain[i])))
	}
	if diff < 1e-3 {
		t.Errorf("rope_freqs changed the reference logits by only %.3g: the test proves nothing", diff)
	}
}

func float32Bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		b := math.Float32bits(x)
		out[4*i], out[4*i+1], out[4*i+2], out[4*i+3] = byte(b), byte(b>>8), byte(b>>16), byte(b>>24)
	}
	return out
}

// TestBertMatchesReference runs a generated BERT model's embedding on the GPU and in the Go
// reference, for each pooling type: relative error < 1e-3.
func TestBertMatchesReference(t *testing.T) {
	dev := gputest.Device(t)
	for _, pooling := range []int{1, 2, 3} {
		f := tinyModel(t, func(cfg *synth.Config) { cfg.Arch, cfg.Pooling, cfg.KVHeads = "bert", pooling, cfg.Heads })
		tokens := []int32{1, 403, 407, 261, 378, 290, 300}
		want, err := reference.Embed(f, tokens)
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(dev, f, model.Options{KVF32: true, RawActivations: true})
		if err != nil {
			t.Fatal(err)
		}
		kv, err := m.NewKVCache(16)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Embed(kv, tokens)
		kv.Release()
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
		if e := cpuref.RelErr(got, want); e > 1e-3 {
			t.Errorf("pooling %d: GPU vs reference embedding: relative error %.3g", pooling, e)
		}
	}
}

// tinyModel writes gen-model's tiny preset, changed by edit, and opens it; it is closed when
// the test ends.
func tinyModel(t *testing.T, edit func(*synth.Config)) *gguf.File {
	t.Helper()
	cfg, err := synth.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	edit(&cfg)
	path := filepath.Join(t.TempDir(), "model.gguf")
	if _, err := synth.WriteFile(path, cfg, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestLongContextMatchesReference runs a 1000-token prompt through a model with a 128-wide head,
// long enough that attention on a CPU adapter must run in chunks (gpu.AttentionChunked), and
// checks the logits against the reference.
func TestLongContextMatchesReference(t *testing.T) {
	dev := gputest.Device(t)
	f := tinyModel(t, func(cfg *synth.Config) { cfg.Dim, cfg.Heads, cfg.KVHeads, cfg.Layers, cfg.Ctx = 128, 1, 1, 1, 2048 })
	tokens := make([]int32, 1000)
	for i := range tokens {
		tokens[i] = int32(3 + (i*37)%500)
	}
	want, err := reference.Forward(f, tokens)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dev, f, model.Options{MaxBatch: 256, KVF32: true, RawActivations: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if dev.BarrierFree && !dev.AttentionChunked(len(tokens), 128) {
		t.Fatal("the test no longer reaches the chunked attention")
	}
	kv, err := m.NewKVCache(2048)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	got, err := m.Forward(kv, tokens, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e := cpuref.RelErr(got, want); e > 1e-3 {
		t.Errorf("GPU vs reference logits at 1000 tokens: relative error %.3g", e)
	}
}

// TestManyLayersLongPrompt runs a 512-token prompt through a 24-layer model in one pass: on a
// CPU adapter the matrix-vector kernel takes its token groups in one dispatch per weight (the
// grid's z), so the pass stays within a submit's dispatch limit; the logits match the
// reference.
func TestManyLayersLongPrompt(t *testing.T) {
	dev := gputest.Device(t)
	f := tinyModel(t, func(cfg *synth.Config) { cfg.Layers = 24 })
	tokens := make([]int32, 512)
	for i := range tokens {
		tokens[i] = int32(3 + (i*31)%500)
	}
	want, err := reference.Forward(f, tokens)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dev, f, model.Options{MaxBatch: 512, KVF32: true, RawActivations: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	kv, err := m.NewKVCache(512)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()
	got, err := m.Forward(kv, tokens, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e := cpuref.RelErr(got, want); e > 1e-3 {
		t.Errorf("GPU vs reference logits: relative error %.3g", e)
	}
}
