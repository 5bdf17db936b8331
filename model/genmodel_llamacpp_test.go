package model_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
	"github.com/wgpu-llama/wgpu-llama/gguf/synth"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// llamaServerProbs is llama.cpp's own llama-server's greedy /completion of n tokens from
// "Once upon a time" on the model at path, with the top-10 probabilities of each step, as the
// shared references were made (models/moe/refs.sh).
func llamaServerProbs(t *testing.T, path string, n int) shareddata.Probs {
	t.Helper()
	body := fmt.Sprintf(`{"prompt":"Once upon a time","n_predict":%d,"temperature":0,"n_probs":10,"return_tokens":true}`, n)
	return shareddata.ParseProbs(t, "llama-server's answer", shareddata.LlamaServerCompletion(t, path, body))
}

// TestGenModelMoEMatchesLlamaCpp writes gen-model's qwen3moe, qwen2moe and gpt-oss files (moe-tiny's
// shape; F32, Q8_0, and MXFP4 experts) and checks that llama.cpp's own llama-server loads
// them and generates, from "Once upon a time", our greedy tokens (or parts at a near-tie).
func TestGenModelMoEMatchesLlamaCpp(t *testing.T) {
	dev := gputest.Device(t)
	for _, arch := range []string{"qwen3moe", "qwen2moe", "gpt-oss"} {
		for _, mix := range []quantize.Mix{quantize.MixF32, quantize.MixQ8_0, quantize.MixMXFP4_MOE} {
			t.Run(arch+"/"+mix.String(), func(t *testing.T) {
				c, err := synth.Preset("moe-tiny")
				if err != nil {
					t.Fatal(err)
				}
				c.Arch, c.Mix = arch, mix
				checkGenModel(t, dev, c, refLimits{step0: 1e-5, all: 1e-4}) // measured: within 7e-6
			})
		}
	}
}

// TestGenModelQwen35MatchesLlamaCpp writes gen-model's qwen35 hybrids (the tiny preset's width,
// 8 layers, feed-forward 192, recurrent layers with their own head counts: 4 value heads of 32
// over 2 key heads; F32 and Q8_0) and checks them against llama.cpp's own llama-server as the
// MoE files are, with llama.cpp's arithmetic (CPUMath): all 16 tokens, within 1e-4
// (measured: F32 3.4e-6, Q8_0 5.2e-6).
func TestGenModelQwen35MatchesLlamaCpp(t *testing.T) {
	dev := gputest.Device(t)
	for _, c := range []struct {
		mix quantize.Mix
		lim refLimits
	}{{quantize.MixF32, refLimits{step0: 1e-5, all: 1e-4}}, {quantize.MixQ8_0, refLimits{step0: 1e-5, all: 1e-4}}} {
		t.Run(c.mix.String(), func(t *testing.T) {
			cfg, err := synth.Preset("tiny")
			if err != nil {
				t.Fatal(err)
			}
			cfg.Arch, cfg.Mix, cfg.Layers, cfg.HeadDim, cfg.FF = "qwen35", c.mix, 8, 32, 192
			cfg.SSMHeads, cfg.SSMGroups, cfg.SSMState = 4, 2, 32
			checkGenModel(t, dev, cfg, c.lim)
		})
	}
}

// TestGenModelQwen35MoEMatchesLlamaCpp writes gen-model's qwen35moe-tiny (qwen35's hybrid with
// 8 experts, 2 used, beside a sigmoid-gated shared expert; F32, Q8_0 and MXFP4 experts) and
// checks it against llama.cpp's own llama-server with llama.cpp's arithmetic (CPUMath): all 16
// tokens, within 1e-4 (measured: F32 5.9e-6, Q8_0 8.0e-6, MXFP4 6.7e-6).
func TestGenModelQwen35MoEMatchesLlamaCpp(t *testing.T) {
	dev := gputest.Device(t)
	for _, c := range []struct {
		mix quantize.Mix
		lim refLimits
	}{{quantize.MixF32, refLimits{step0: 1e-5, all: 1e-4}}, {quantize.MixQ8_0, refLimits{step0: 1e-5, all: 1e-4}},
		{quantize.MixMXFP4_MOE, refLimits{step0: 1e-5, all: 1e-4}}} {
		t.Run(c.mix.String(), func(t *testing.T) {
			cfg, err := synth.Preset("qwen35moe-tiny")
			if err != nil {
				t.Fatal(err)
			}
			cfg.Mix = c.mix
			checkGenModel(t, dev, cfg, c.lim)
		})
	}
}

// TestGenModelGemma4MatchesLlamaCpp writes gen-model's gemma4 (the tiny preset's width with
// heads of 32 on its global layers and 16 on its sliding ones, 8 layers of which the last 4
// read earlier layers' caches; F32 and Q8_0; dense and with the 26B-A4B's experts beside the
// dense FFN: 8 of 64 rows, 2 used) and checks it against llama.cpp's own
// llama-server with llama.cpp's arithmetic (CPUMath): all 16 tokens, within 1e-4 (measured:
// Q8_0 6.1e-6 dense, 8.3e-6 with experts; F32 5.8e-6 dense, 8.0e-6 with experts).
func TestGenModelGemma4MatchesLlamaCpp(t *testing.T) {
	dev := gputest.Device(t)
	for _, c := range []struct {
		mix     quantize.Mix
		lim     refLimits
		experts int
	}{{quantize.MixF32, refLimits{step0: 1e-5, all: 1e-4}, 0}, {quantize.MixQ8_0, refLimits{step0: 1e-5, all: 1e-4}, 0},
		{quantize.MixF32, refLimits{step0: 1e-5, all: 1e-4}, 8}, {quantize.MixQ8_0, refLimits{step0: 1e-5, all: 1e-4}, 8}} {
		mix := c.mix
		t.Run(fmt.Sprintf("%s/experts=%d", mix, c.experts), func(t *testing.T) {
			cfg, err := synth.Preset("tiny")
			if err != nil {
				t.Fatal(err)
			}
			cfg.Arch, cfg.Mix, cfg.Layers, cfg.HeadDim, cfg.FF = "gemma4", mix, 8, 32, 192
			if c.experts > 0 {
				cfg.Experts, cfg.ExpertsUsed, cfg.ExpertFF = c.experts, 2, 64
			}
			checkGenModel(t, dev, cfg, c.lim)
		})
	}
}

// checkGenModel writes gen-model's file of cfg, has llama.cpp's own llama-server run it
// greedily for 16 tokens and checks our run against that within lim (checkAgainstProbs).
func checkGenModel(t *testing.T, dev *gpu.Device, cfg synth.Config, lim refLimits) {
	t.Helper()
	llamaCppMath(t, dev)
	path := filepath.Join(t.TempDir(), "m.gguf")
	if _, err := synth.WriteFile(path, cfg, nil); err != nil {
		t.Fatal(err)
	}
	ref := llamaServerProbs(t, path, 16)
	checkAgainstProbs(t, loadPath(t, dev, path), ref, lim)
}

// loadPath loads the model file at path on dev; it is closed when the test ends.
func loadPath(t *testing.T, dev *gpu.Device, path string) *model.Model {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := model.Load(dev, f, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}
