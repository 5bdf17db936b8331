package engine_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// runIn runs prompt greedily for n tokens pinned to slot id and returns its final result.
func runIn(t *testing.T, e *engine.Engine, id int, prompt []int32, n int) engine.Result {
	t.Helper()
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(n), Slot: &id})
	if err != nil {
		t.Fatal(err)
	}
	_, final, _ := collect(t, ch)
	if final.Err != nil {
		t.Fatal(final.Err)
	}
	return final
}

// TestPromptCacheSlotRules follows llama.cpp's test_slot_save_restore: a finished request's
// prompt in an idle slot is shared with other slots only once it is in the prompt cache, which
// happens when a later request starts (llama-server's --cache-idle-slots), after that request
// has taken its own prefix.
func TestPromptCacheSlotRules(t *testing.T) {
	e := enginetest.LoadSlots(t, 2, "models", stories)
	ctx := context.Background()
	head := cat([]int32{1}, seqTokens(300, 14))
	france, germany := cat(head, seqTokens(320, 6)), cat(head, seqTokens(340, 6))
	if got := runIn(t, e, 1, france, 16); got.Timings.PromptN != len(france) {
		t.Fatalf("first prompt_n %d, want %d", got.Timings.PromptN, len(france))
	}
	path := filepath.Join(t.TempDir(), "slot1.bin")
	if _, err := e.SaveSlot(ctx, 1, path); err != nil {
		t.Fatal(err)
	}
	if got := runIn(t, e, 1, germany, 16); got.Timings.PromptN != 6 {
		t.Errorf("slot 1, second prompt: prompt_n %d, want 6", got.Timings.PromptN)
	}
	if _, err := e.RestoreSlot(ctx, 0, path); err != nil {
		t.Fatal(err)
	}
	// Slot 1 holds the second prompt, idle: not shared yet.
	if got := runIn(t, e, 0, germany, 16); got.Timings.PromptN != 6 {
		t.Errorf("slot 0 after the restore: prompt_n %d, want 6", got.Timings.PromptN)
	}
	if got := runIn(t, e, 1, germany, 16); got.Timings.PromptN != 1 {
		t.Errorf("slot 1 again: prompt_n %d, want 1", got.Timings.PromptN)
	}
	// Slot 0's prompt went to the cache when that request started: with slot 0 erased, it
	// comes back from there.
	if _, err := e.EraseSlot(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := runIn(t, e, 0, germany, 16); got.Timings.CacheN != len(germany)-1 {
		t.Errorf("erased slot 0: cache_n %d, want %d from the prompt cache", got.Timings.CacheN, len(germany)-1)
	}
}

// TestPromptCacheIdleSlotsUnified follows llama.cpp's test_kv_keep_only_active: with a unified
// KV cache, a request starting in one slot saves the other idle slots' prompts to the prompt
// cache and clears them; a request for a saved prompt then reuses it from the cache. With
// NoCacheIdleSlots, or the prompt cache off, idle slots keep their prompts.
func TestPromptCacheIdleSlotsUnified(t *testing.T) {
	long := cat([]int32{1}, seqTokens(300, 60))
	short := cat([]int32{1}, seqTokens(400, 5))
	for _, c := range []struct {
		name    string
		cfg     engine.Config
		cleared bool
	}{
		{"cache-idle-slots", engine.Config{}, true},
		{"no-cache-idle-slots", engine.Config{NoCacheIdleSlots: true}, false},
		{"cache-ram 0", engine.Config{NoPromptCache: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.ModelPath, cfg.CtxSize, cfg.Slots, cfg.KVUnified = shareddata.Path(t, "models", stories), 256, 2, true
			e := enginetest.LoadConfig(t, cfg)
			first := runIn(t, e, 0, long, 4)
			runIn(t, e, 1, short, 4)
			held, err := e.SlotTokens(context.Background(), 0)
			if err != nil {
				t.Fatal(err)
			}
			if cleared := len(held) == 0; cleared != c.cleared {
				t.Fatalf("slot 0 holds %d tokens after slot 1 started; cleared %v, want %v", len(held), cleared, c.cleared)
			}
			ch, err := e.Submit(context.Background(), engine.Task{Prompt: long, Params: greedy(4)})
			if err != nil {
				t.Fatal(err)
			}
			_, again, _ := collect(t, ch)
			if again.Err != nil || again.Timings.CacheN != len(long)-1 || again.Timings.PromptN >= first.Timings.PromptN {
				t.Errorf("the long prompt again: cache_n %d prompt_n %d (first %d), %v", again.Timings.CacheN, again.Timings.PromptN, first.Timings.PromptN, again.Err)
			}
		})
	}
}
