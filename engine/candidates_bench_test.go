package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// BenchmarkCandidateReadback compares decode speed (64 tokens a request, one slot) reading back
// whole logits rows against reading back the GPU's best candidates, greedy, with the default
// sampler chain (top_k 40) and with it and n_probs 10, on stories260K (vocabulary 512), on a random model with Llama 2's
// 32000 tokens and on gen-model's tiny shape with Qwen2's 151936 (F16). The small models'
// compute is tiny, so the vocabulary's readback and sampling dominate what changes.
func BenchmarkCandidateReadback(b *testing.B) {
	wide, err := synth.Preset("tiny")
	if err != nil {
		b.Fatal(err)
	}
	wide.Vocab, wide.Mix = 151936, quantize.MixF16
	widePath := filepath.Join(b.TempDir(), "synth-tiny-151936.gguf")
	if _, err := synth.WriteFile(widePath, wide, nil); err != nil {
		b.Fatal(err)
	}
	models := []struct{ name, path string }{
		{"stories260K", shareddata.Path(b, "models", "stories260K.gguf")},
		{"llama2-random-32000", shareddata.Path(b, "models", "llama-2-tiny-random.gguf")},
		{"synth-151936", widePath},
	}
	samplers := []struct {
		name string
		p    engine.Params
	}{{"greedy", greedy(64)}, {"top_k40", engine.DefaultParams()}, {"top_k40+n_probs10", engine.DefaultParams()}}
	samplers[2].p.NProbs = 10
	for _, m := range models {
		for _, rb := range []struct {
			name string
			mode engine.Readback
		}{{"full-rows", engine.ReadbackFullRows}, {"candidates", engine.ReadbackCandidates}} {
			e := enginetest.LoadConfig(b, engine.Config{ModelPath: m.path, CtxSize: 512, Readback: rb.mode})
			prompt := e.Tokenizer().Encode("Once upon a time", true, true)
			for _, s := range samplers {
				b.Run(fmt.Sprintf("%s/%s/%s", m.name, s.name, rb.name), func(b *testing.B) {
					p := s.p
					p.NPredict, p.IgnoreEOS, p.Seed = 64, true, 1
					tokens := 0
					var gen time.Duration
					for range b.N {
						ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: p})
						if err != nil {
							b.Fatal(err)
						}
						var last engine.Result
						for r := range ch {
							last = r
						}
						if last.Err != nil {
							b.Fatal(last.Err)
						}
						tokens += last.TokensPredicted
						gen += last.Timings.Predicted
					}
					b.ReportMetric(float64(tokens)/gen.Seconds(), "tokens/s")
				})
			}
		}
	}
}
