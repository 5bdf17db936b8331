package engine_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// probsGap runs "Once upon a time" greedily through e and returns the largest difference
// between our probabilities and the reference's top 10, at step 0 and over the run; the
// tokens must be the reference's.
func probsGap(t *testing.T, e *engine.Engine, ref shareddata.Probs) (step0, all float64) {
	t.Helper()
	p := greedy(len(ref.Tokens))
	p.NProbs = 10
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: e.Tokenizer().Encode("Once upon a time", true, true), Params: p})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	var probs []engine.StepProbs
	for r := range ch {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		ids, probs = append(ids, r.Tokens...), append(probs, r.Probs...)
	}
	if !slices.Equal(ids, ref.Tokens) {
		t.Fatalf("tokens %v, llama.cpp's %v", ids, ref.Tokens)
	}
	for i, step := range ref.Steps {
		ours := map[int32]float64{}
		for _, c := range probs[i].Top {
			ours[c.ID] = float64(c.Prob)
		}
		for _, c := range step.Top {
			got, ok := ours[c.ID]
			if !ok {
				t.Fatalf("step %d: llama.cpp's candidate %d is not in our top 10", i, c.ID)
			}
			d := math.Abs(got - math.Exp(c.Logprob))
			all = max(all, d)
			if i == 0 {
				step0 = max(step0, d)
			}
		}
	}
	return step0, all
}

// TestSlidingWindowPromptsAsLlamaServer runs the sliding-window references (gpt-oss, Gemma 4)
// through the engine with llama.cpp's arithmetic: llama-server evaluated their prompt in two
// passes (the BOS, then the last 4 tokens, where it would checkpoint its window-sized cache),
// and so does the engine, which gives its probabilities within 1e-5 at every step. With
// --swa-full llama-server makes no such cut, and neither does the engine: the one pass's
// products are other roundings, 1e-4 or more away at the prompt's step.
func TestSlidingWindowPromptsAsLlamaServer(t *testing.T) {
	for _, f := range []struct{ folder, name string }{{"moe", "gptoss-F32.gguf"}, {"gemma4", "gemma4-F32.gguf"}} {
		t.Run(f.name, func(t *testing.T) {
			path := shareddata.Path(t, "models", f.folder, f.name)
			ref := shareddata.ReadProbs(t, path)
			for _, swaFull := range []bool{false, true} {
				e := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 256, Slots: 1, CPUExact: true, SWAFull: swaFull})
				step0, all := probsGap(t, e, ref)
				e.Close()
				t.Logf("swa-full %v: step 0 within %.2e, the run within %.2e", swaFull, step0, all)
				if !swaFull && all > 1e-5 {
					t.Errorf("top-10 probabilities %.3g from llama-server's (step 0: %.3g)", all, step0)
				}
				if swaFull && step0 < 1e-4 {
					t.Errorf("with --swa-full the prompt's step is %.3g from llama-server's cut run: the prompt was cut", step0)
				}
			}
		})
	}
}
