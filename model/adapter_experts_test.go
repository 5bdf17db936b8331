package model_test

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// expertAdapter writes a LoRA adapter (F32, rank 8, alpha 16) for the MoE file at path with
// random pairs on every layer's experts, shared expert and attn_q.
func expertAdapter(t *testing.T, path string) string {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rng := rand.New(rand.NewPCG(81, 82))
	const rank = 8
	pair := func(base string, in, out, experts uint64, sa, sb float64) []gguf.TensorData {
		var ts []gguf.TensorData
		for _, h := range []struct {
			suffix string
			shape  []uint64
			sigma  float64
		}{{".lora_a", []uint64{in, rank}, sa}, {".lora_b", []uint64{rank, out}, sb}} {
			if experts > 0 {
				h.shape = append(h.shape, experts)
			}
			n := uint64(1)
			for _, d := range h.shape {
				n *= d
			}
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(rng.NormFloat64() * h.sigma)
			}
			ts = append(ts, gguf.TensorData{Name: base + h.suffix, Shape: h.shape, Type: gguf.TypeF32, Data: gpu.Bytes(v)})
		}
		return ts
	}
	var ts []gguf.TensorData
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		s := ti.Shape
		switch {
		case strings.HasSuffix(ti.Name, "_exps.weight"):
			ts = append(ts, pair(ti.Name, s[0], s[1], s[2], 0.1, 0.1)...)
		case strings.HasSuffix(ti.Name, "_shexp.weight") && !strings.Contains(ti.Name, "gate_inp"):
			ts = append(ts, pair(ti.Name, s[0], s[1], 0, 0.1, 0.1)...)
		case strings.HasSuffix(ti.Name, "attn_q.weight"):
			ts = append(ts, pair(ti.Name, s[0], s[1], 0, 0.1, 0.05)...)
		}
	}
	kvs := []gguf.KV{
		{Key: "general.architecture", Type: gguf.TypeString, Value: f.Architecture()},
		{Key: "general.type", Type: gguf.TypeString, Value: "adapter"},
		{Key: "adapter.type", Type: gguf.TypeString, Value: "lora"},
		{Key: "adapter.lora.alpha", Type: gguf.TypeFloat32, Value: float32(16)},
	}
	out := filepath.Join(t.TempDir(), "experts-lora.gguf")
	if err := gguf.WriteFile(out, kvs, ts); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExpertLoraMatchesLlamaCpp runs the shared qwen3moe and gpt-oss F32 files and gen-model's
// qwen2moe (routed and shared experts) with an adapter on their experts (expertAdapter)
// against llama.cpp's own llama-server with --lora, with llama.cpp's arithmetic: its 16 greedy
// tokens, which the adapter changes, and its top-10 probabilities within 1e-5 at every step
// (measured: 4.1e-6, 2.2e-6, 4.4e-6); at scale 0, llama-server's run without the adapter.
func TestExpertLoraMatchesLlamaCpp(t *testing.T) {
	dev := gputest.Device(t)
	llamaCppMath(t, dev)
	gen := filepath.Join(t.TempDir(), "qwen2moe.gguf")
	cfg, err := synth.Preset("moe-tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Arch, cfg.Mix = "qwen2moe", quantize.MixF32
	if _, err := synth.WriteFile(gen, cfg, nil); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{shareddata.Path(t, "models", "moe", "qwen3moe-F32.gguf"), shareddata.Path(t, "models", "moe", "gptoss-F32.gguf"), gen} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			adapter := expertAdapter(t, path)
			body := `{"prompt":"Once upon a time","n_predict":16,"temperature":0,"n_probs":10,"return_tokens":true}`
			base := shareddata.ParseProbs(t, "llama-server's answer", shareddata.LlamaServerCompletion(t, path, body))
			srv := shareddata.LlamaServer(t, path, "-c", "256", "-np", "1", "--lora", adapter)
			ref := shareddata.ParseProbs(t, "llama-server's answer with the adapter", shareddata.LlamaServerPost(t, srv, "/completion", body))
			if slices.Equal(ref.Tokens, base.Tokens) {
				t.Fatalf("the adapter leaves llama.cpp's tokens as they were: %v", ref.Tokens)
			}
			m := loadPath(t, dev, path)
			if id, err := m.LoadAdapterFile(adapter); err != nil || id != 0 {
				t.Fatalf("adapter %d: %v", id, err)
			}
			checkScaledAgainstProbs(t, m, []float32{1}, ref, refLimits{step0: 1e-5, all: 1e-5})
			t.Run("scale 0", func(t *testing.T) {
				checkScaledAgainstProbs(t, m, []float32{0}, base, refLimits{step0: 1e-5, all: 1e-5})
			})
		})
	}
}
