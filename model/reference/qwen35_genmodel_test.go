package reference

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// TestGenModelQwen35MatchesLlamaCpp writes gen-model's qwen35 (the tiny preset's width with
// heads of 32: a quarter of each rotated, in interleaved sections) in F32 and Q8_0 and checks
// that llama.cpp's own llama-server loads it and generates, from "Once upon a time", this
// reference's greedy tokens (rounding as llama.cpp's CPU rounds), with top-10 probabilities
// within 1e-3.
func TestGenModelQwen35MatchesLlamaCpp(t *testing.T) {
	for _, mix := range []quantize.Mix{quantize.MixF32, quantize.MixQ8_0} {
		t.Run(mix.String(), func(t *testing.T) {
			c, err := synth.Preset("tiny")
			if err != nil {
				t.Fatal(err)
			}
			c.Arch, c.Mix, c.HeadDim, c.Layers = "qwen35", mix, 32, 4
			if mix == quantize.MixQ8_0 {
				c.FF = 192 // rows of whole Q8_0 blocks
			}
			path := filepath.Join(t.TempDir(), "m.gguf")
			if _, err := synth.WriteFile(path, c, nil); err != nil {
				t.Fatal(err)
			}
			var run llamaRun
			body := shareddata.LlamaServerCompletion(t, path, `{"prompt":"Once upon a time","n_predict":16,"temperature":0,"n_probs":10,"return_tokens":true}`)
			if err := json.Unmarshal(body, &run); err != nil || len(run.Tokens) == 0 {
				t.Fatalf("llama-server's answer: %v %s", err, body)
			}
			f := open(t, path)
			// llama.cpp's rounding: its f16 cache and flash attention, and 8-bit activations
			// for the quantized products.
			m, err := newQwen35(f, options{kvF16: true, actQuant: true})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := tokenizer.FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			first, diffs := qwen35Greedy(t, m, tok.Encode("Once upon a time", true, true), run, 16)
			judgeRun(t, "gen-model qwen35 "+mix.String(), first, diffs, 1e-3, 0, 0)
		})
	}
}
