package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestGenerationMakesNothing runs two requests at once, one greedy and one sampled, 48 tokens
// each, and then the same two again: the second round makes no buffer, bind group or
// pipeline on the engine's device. Its prompts, decode steps, sampling and readbacks reuse
// what the first round made (issue 32: nothing allocated per token). On stories260K and the
// recurrent hybrid.
func TestGenerationMakesNothing(t *testing.T) {
	for _, path := range []string{shareddata.Path(t, "models", "stories260K.gguf"), shareddata.Path(t, "models", "hybrid", "qwen35-F32.gguf")} {
		e := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 512, Slots: 2})
		ctx := context.Background()
		sampled := engine.DefaultParams()
		sampled.NPredict, sampled.Seed, sampled.IgnoreEOS = 48, 3, true
		greedyP := greedy(48)
		greedyP.IgnoreEOS = true
		round := func() {
			var wg sync.WaitGroup
			for _, p := range []engine.Params{greedyP, sampled} {
				p.SkipPromptCache = true
				ch, err := e.Submit(ctx, engine.Task{Prompt: e.Tokenizer().Encode("Once upon a time", true, true), Params: p})
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					n := 0
					for r := range ch {
						if r.Err != nil {
							t.Error(r.Err)
						}
						n += len(r.Tokens)
					}
					if n != 48 {
						t.Errorf("%d tokens, want 48", n)
					}
				}()
			}
			wg.Wait()
		}
		round()
		before, err := e.Creations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		round()
		after, err := e.Creations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if before.Buffers == 0 || after != before {
			t.Errorf("%s: the second round made %d buffers, %d bind groups and %d pipelines (%+v before it)", path, after.Buffers-before.Buffers,
				after.BindGroups-before.BindGroups, after.Pipelines-before.Pipelines, before)
		}
	}
}
