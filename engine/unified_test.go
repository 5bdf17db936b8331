package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// submitAll starts one generation of nPredict tokens (end-of-generation ignored) per entry, all
// at once, and returns their final results.
func submitAll(t *testing.T, e *engine.Engine, nPredict ...int) []engine.Result {
	t.Helper()
	var chans []<-chan engine.Result
	for _, n := range nPredict {
		p := greedy(n)
		p.IgnoreEOS = true
		ch, err := e.Submit(context.Background(), engine.Task{Prompt: []int32{1, 403}, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	finals := make([]engine.Result, len(chans))
	for i, ch := range chans {
		_, finals[i], _ = collect(t, ch)
	}
	return finals
}

// TestUnifiedCellsNotPages: a unified cache of 64 cells holds three slots of 18 tokens each
// (54 cells), as llama.cpp's does, though in 16-row pages they would take 6 pages of the 4 that
// 64 cells make; its capacity is reported in cells.
func TestUnifiedCellsNotPages(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", stories), CtxSize: 64, Slots: 3, KVUnified: true})
	for i, final := range submitAll(t, e, 17, 17, 17) {
		if final.Err != nil || final.TokensPredicted != 17 || final.Truncated {
			t.Errorf("generation %d: err %v, predicted %d, truncated %v", i, final.Err, final.TokensPredicted, final.Truncated)
		}
	}
	if st := e.Stats(); st.KVCapacity != 64 || st.KVTokens != 3*18 {
		t.Errorf("KV capacity %d, tokens %d; want 64 cells, 54 held", st.KVCapacity, st.KVTokens)
	}
	// An idle slot's cells are given up for a running one: one slot alone may fill the cache.
	if final := submitAll(t, e, 60)[0]; final.Err != nil || final.TokensPredicted != 60 {
		t.Errorf("one long generation: err %v, predicted %d", final.Err, final.TokensPredicted)
	}
}

// TestUnifiedContextExceeded: when generating slots need more cells than the unified cache has
// (2 x 42 > 64) and no idle slot can give any, every running request fails with llama-server's
// "Context size has been exceeded." rather than ending early as if complete.
func TestUnifiedContextExceeded(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", stories), CtxSize: 64, Slots: 2, KVUnified: true})
	for i, final := range submitAll(t, e, 40, 40) {
		if !errors.Is(final.Err, engine.ErrContextExceeded) || final.Err.Error() != "Context size has been exceeded." {
			t.Errorf("generation %d: err %v (predicted %d), want ErrContextExceeded", i, final.Err, final.TokensPredicted)
		}
	}
	// The cache is free again afterwards.
	if final := submitAll(t, e, 20)[0]; final.Err != nil || final.TokensPredicted != 20 {
		t.Errorf("after the failure: err %v, predicted %d", final.Err, final.TokensPredicted)
	}
}
