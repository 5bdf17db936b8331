package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

var batchPrompts = []string{
	"Once upon a time",
	"Lily and Tom went to the park to play with a big red ball",
	"The cat",
	"One day, a little bird flew into the garden and saw a shiny stone near the old tree",
	"Ben had a toy car",
	"It was a sunny day. Mia wanted to go outside, but her mom said she had to clean her room first",
	"The dog ran",
	"Sara found a box",
}

// TestBatchedGreedyMatchesAlone is issue 5's first check: greedy output for each of 8
// requests of different lengths is identical run alone and run together in 8 slots.
func TestBatchedGreedyMatchesAlone(t *testing.T) {
	e := enginetest.LoadSlots(t, 8, "models", "stories260K.gguf")
	run := func(prompt string) string {
		ch, err := e.Submit(context.Background(), engine.Task{Prompt: e.Tokenizer().Encode(prompt, true, true), Params: greedy(40)})
		if err != nil {
			t.Error(err)
			return ""
		}
		text, final, _ := collect(t, ch)
		if final.Err != nil {
			t.Error(final.Err)
		}
		return text
	}
	alone := make([]string, len(batchPrompts))
	for i, p := range batchPrompts {
		alone[i] = run(p)
	}
	together := make([]string, len(batchPrompts))
	var wg sync.WaitGroup
	for i, p := range batchPrompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			together[i] = run(p)
		}()
	}
	wg.Wait()
	for i := range batchPrompts {
		if together[i] != alone[i] || alone[i] == "" {
			t.Errorf("prompt %d: batched %q, alone %q", i, together[i], alone[i])
		}
	}
}

// TestSlotsQueueAndCancel fills 2 slots, queues a third request, and cancels a running one:
// the queued request runs as soon as a slot is free.
func TestSlotsQueueAndCancel(t *testing.T) {
	e := enginetest.LoadSlots(t, 2, "models", "stories260K.gguf")
	p := greedy(-1)
	p.IgnoreEOS = true
	ctx, cancel := context.WithCancel(context.Background())
	long, err := e.Submit(ctx, engine.Task{Prompt: []int32{1, 403}, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.Submit(context.Background(), engine.Task{Prompt: []int32{1, 300}, Params: greedy(200)})
	if err != nil {
		t.Fatal(err)
	}
	queued, err := e.Submit(context.Background(), engine.Task{Prompt: []int32{1, 301}, Params: greedy(4)})
	if err != nil {
		t.Fatal(err)
	}
	<-long
	cancel()
	for range long {
	}
	if _, final, _ := collect(t, queued); final.TokensPredicted != 4 || final.Err != nil {
		t.Errorf("queued request: %+v", final)
	}
	if _, final, _ := collect(t, other); final.TokensPredicted != 200 {
		t.Errorf("other request: predicted %d", final.TokensPredicted)
	}
}

// TestLongPrefixReuse is issue 5's second check: a request sharing a 200-token prefix with
// the previous one evaluates only its new tokens (timings cache_n), in a multi-slot engine.
func TestLongPrefixReuse(t *testing.T) {
	e := enginetest.LoadSlots(t, 2, "models", "stories260K.gguf")
	prefix := []int32{1}
	for len(prefix) < 200 {
		prefix = append(prefix, int32(300+len(prefix)%150))
	}
	first := append(append([]int32(nil), prefix...), 401, 402)
	second := append(append([]int32(nil), prefix...), 410, 411, 412)
	for i, prompt := range [][]int32{first, second} {
		ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(4)})
		if err != nil {
			t.Fatal(err)
		}
		wantCache, wantN := 0, len(prompt)
		if i == 1 {
			wantCache, wantN = 200, 3
		}
		// Partial results carry the timings so far (timings_per_token, and the cached prompt
		// tokens that usage reports from the first result).
		var final engine.Result
		for r := range ch {
			final = r
			if tm := r.Timings; !r.Stop && (tm.CacheN != wantCache || tm.PromptN != wantN || tm.PredictedN != r.TokensPredicted || tm.Prompt <= 0) {
				t.Errorf("request %d: partial result after %d tokens has timings %+v", i, r.TokensPredicted, tm)
			}
		}
		if final.Timings.CacheN != wantCache || final.Timings.PromptN != wantN {
			t.Errorf("request %d: cache_n %d prompt_n %d, want %d and %d", i, final.Timings.CacheN, final.Timings.PromptN, wantCache, wantN)
		}
	}
}
