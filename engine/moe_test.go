package engine_test

import (
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// TestMoEEngine serves Mixture-of-Experts models (gpt-oss with its sinks and sliding layers,
// qwen3moe) through the engine's features as a dense model goes through them: four requests
// batched give what each gives alone; a model drafting for itself gives plain greedy output
// with every draft accepted; a request extending an earlier one reuses its cached prefix and
// continues as a fresh engine does.
func TestMoEEngine(t *testing.T) {
	for _, file := range []string{"gptoss-F32.gguf", "qwen3moe-F32.gguf"} {
		t.Run(file, func(t *testing.T) {
			plain := enginetest.LoadSlots(t, 4, "models", "moe", file)
			var alone []string
			for _, p := range specPrompts {
				text, _ := generate(t, plain, p, greedy(24))
				alone = append(alone, text)
			}
			batched, _ := generateAll(t, plain, specPrompts, greedy(24))
			for i := range specPrompts {
				if batched[i] != alone[i] {
					t.Errorf("prompt %d: batched %q, alone %q", i, batched[i], alone[i])
				}
			}

			spec := engine.DefaultSpecConfig()
			spec.DraftModel = "models/moe/" + file
			e := enginetest.LoadSpec(t, 4, spec, "models", "moe", file)
			texts, finals := generateAll(t, e, specPrompts, greedy(24))
			for i := range specPrompts {
				if tm := finals[i].Timings; texts[i] != alone[i] || tm.DraftN == 0 || tm.DraftNAccepted != tm.DraftN {
					t.Errorf("prompt %d self-drafted: %q (draft_n %d, accepted %d), plain %q", i, texts[i], tm.DraftN, tm.DraftNAccepted, alone[i])
				}
			}

			one := enginetest.Load(t, "models", "moe", file)
			first, _ := generate(t, one, specPrompts[0], greedy(8))
			longer := specPrompts[0] + first
			fresh, _ := generate(t, enginetest.Load(t, "models", "moe", file), longer, greedy(8))
			again, final := generate(t, one, longer, greedy(8))
			if again != fresh || final.Timings.CacheN == 0 {
				t.Errorf("prefix reuse: %q with cache_n %d, a fresh engine %q", again, final.Timings.CacheN, fresh)
			}
		})
	}
}
