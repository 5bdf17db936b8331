package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

const stories = "stories260K.gguf"

func run(t *testing.T, e *engine.Engine, prompt []int32, p engine.Params) (string, engine.Result) {
	t.Helper()
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	text, final, _ := collect(t, ch)
	if final.Err != nil {
		t.Fatal(final.Err)
	}
	return text, final
}

// seqTokens is n ordinary tokens of the stories vocabulary, starting at first.
func seqTokens(first, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(first + i%150)
	}
	return out
}

func cat(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestPrefixSharedAcrossSlots: while one slot is still generating, a request with the same
// 200-token prefix in another slot evaluates only its new tokens, reading the first slot's
// pages, and its greedy text is what it is alone in a fresh engine.
func TestPrefixSharedAcrossSlots(t *testing.T) {
	prefix := cat([]int32{1}, seqTokens(300, 199))
	first := cat(prefix, []int32{401, 402})
	second := cat(prefix, []int32{410, 411, 412})
	alone, _ := run(t, enginetest.Load(t, "models", stories), second, greedy(12))

	e := enginetest.LoadSlots(t, 2, "models", stories)
	p := greedy(400)
	p.IgnoreEOS = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long, err := e.Submit(ctx, engine.Task{Prompt: first, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	<-long // the first request's prompt is in the cache
	text, final := run(t, e, second, greedy(12))
	if final.Slot == 0 || final.Timings.CacheN != 200 || final.Timings.PromptN != 3 {
		t.Errorf("second request: slot %d cache_n %d prompt_n %d, want slot 1, 200 and 3", final.Slot, final.Timings.CacheN, final.Timings.PromptN)
	}
	if text != alone {
		t.Errorf("sharing pages: %q, alone: %q", text, alone)
	}
	cancel()
	for range long {
	}
	// Shared, copied-on-write and released pages: each counted once per holder.
	if st := e.Stats(); st.KVPagesAdrift != 0 {
		t.Errorf("%d KV pages adrift from their holders", st.KVPagesAdrift)
	}
}

// TestContextShift: with the context shift on, generation goes past the slot's 64-token
// context (dropping older tokens) and reports truncation; without it, it stops at the end.
func TestContextShift(t *testing.T) {
	prompt := cat([]int32{1}, seqTokens(300, 9))
	p := greedy(150)
	p.IgnoreEOS = true
	shifting := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", stories), CtxSize: 64, ContextShift: true})
	_, final := run(t, shifting, prompt, p)
	if final.TokensPredicted != 150 || final.StopType != engine.StopLimit || !final.Truncated || final.TokensCached >= 64 {
		t.Errorf("with context shift: predicted %d stop %s truncated %v cached %d", final.TokensPredicted, final.StopType, final.Truncated, final.TokensCached)
	}
	p.NKeep = -1 // keep the whole prompt through the shifts
	_, kept := run(t, shifting, prompt, p)
	if kept.TokensPredicted != 150 || !kept.Truncated {
		t.Errorf("n_keep -1: predicted %d truncated %v", kept.TokensPredicted, kept.Truncated)
	}
	fixed := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", stories), CtxSize: 64})
	_, final = run(t, fixed, prompt, p)
	if final.TokensPredicted >= 64 || final.StopType != engine.StopLimit || !final.Truncated {
		t.Errorf("without context shift: predicted %d stop %s truncated %v", final.TokensPredicted, final.StopType, final.Truncated)
	}
}

// TestCacheReuse: after X+Z+Y, the prompt X+Y reuses the cached Y chunk (moved into place)
// with n_cache_reuse, and only the common prefix X without it.
func TestCacheReuse(t *testing.T) {
	x, z, y := cat([]int32{1}, seqTokens(300, 49)), seqTokens(200, 20), seqTokens(380, 60)
	for _, reuse := range []int{0, 8} {
		e := enginetest.Load(t, "models", stories)
		run(t, e, cat(x, z, y), greedy(1))
		p := greedy(8)
		p.NCacheReuse = reuse
		text, final := run(t, e, cat(x, y), p)
		wantCache := 50
		if reuse > 0 {
			wantCache = 109 // all but the last token, which is evaluated for its logits
		}
		if final.Timings.CacheN != wantCache || text == "" {
			t.Errorf("n_cache_reuse %d: cache_n %d (want %d), text %q", reuse, final.Timings.CacheN, wantCache, text)
		}
	}
}

// TestPromptCacheOff: cache_prompt false evaluates the whole prompt again.
func TestPromptCacheOff(t *testing.T) {
	e := enginetest.Load(t, "models", stories)
	prompt := cat([]int32{1}, seqTokens(300, 30))
	run(t, e, prompt, greedy(2))
	p := greedy(2)
	p.SkipPromptCache = true
	if _, final := run(t, e, prompt, p); final.Timings.CacheN != 0 || final.Timings.PromptN != len(prompt) {
		t.Errorf("cache_prompt false: cache_n %d prompt_n %d", final.Timings.CacheN, final.Timings.PromptN)
	}
}

// TestUnifiedKV: with --kv-unified each of 2 slots may hold the whole 128-token context; split,
// each holds 64.
func TestUnifiedKV(t *testing.T) {
	prompt := cat([]int32{1}, seqTokens(300, 99))
	unified := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", stories), CtxSize: 128, Slots: 2, KVUnified: true})
	if unified.Info().NCtx != 128 {
		t.Errorf("unified n_ctx %d", unified.Info().NCtx)
	}
	if _, final := run(t, unified, prompt, greedy(10)); final.TokensPredicted != 10 {
		t.Errorf("unified: predicted %d", final.TokensPredicted)
	}
	split := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", stories), CtxSize: 128, Slots: 2})
	if _, err := split.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(10)}); !errors.Is(err, engine.ErrPromptTooBig) {
		t.Errorf("split context: %v, want ErrPromptTooBig", err)
	}
}

// TestTMaxPredict: past t_max_predict_ms, generation stops once a newline has been generated
// (a grammar makes the second token a newline and forbids ending).
func TestTMaxPredict(t *testing.T) {
	e := enginetest.Load(t, "models", stories)
	g, err := grammar.Parse(`root ::= "a\n" [a-z]{60}`)
	if err != nil {
		t.Fatal(err)
	}
	p := greedy(50)
	p.Grammar, p.TMaxPredictMs = g, 1
	text, final := run(t, e, []int32{1, 403}, p)
	if final.TokensPredicted >= 50 || final.StopType != engine.StopLimit || len(text) < 2 || text[:2] != "a\n" {
		t.Errorf("predicted %d stop %s text %q", final.TokensPredicted, final.StopType, text)
	}
}

// TestContextShiftKeepDiscard: through every shift the cache holds BOS and the first n_keep
// prompt tokens, then the most recent tokens; each shift drops exactly n_discard tokens.
func TestContextShiftKeepDiscard(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", stories), CtxSize: 64, ContextShift: true})
	prompt := cat([]int32{1}, seqTokens(300, 9))
	for _, nDiscard := range []int{7, 10} {
		p := greedy(150)
		p.IgnoreEOS, p.NKeep, p.NDiscard = true, 4, nDiscard
		ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		var generated []int32
		for r := range ch {
			generated = append(generated, r.Tokens...)
		}
		cached, err := e.SlotTokens(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		// Every token but the last sampled one went through the cache.
		seen := cat(prompt, generated[:len(generated)-1])
		const keep = 4 + 1 // n_keep and BOS
		dropped := len(seen) - len(cached)
		if len(generated) != 150 || len(cached) >= 64 || dropped <= 0 || dropped%nDiscard != 0 {
			t.Fatalf("n_discard %d: %d generated, %d cached of %d seen", nDiscard, len(generated), len(cached), len(seen))
		}
		want := cat(prompt[:keep], seen[len(seen)-(len(cached)-keep):])
		if !slices.Equal(cached, want) {
			t.Errorf("n_discard %d: cache %v, want %v", nDiscard, cached, want)
		}
	}
}
