package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// slotState reads slot id's state. Slots is answered between turns, so two calls in a row
// always straddle at least one turn of the engine loop while any slot is busy.
func slotState(t *testing.T, e *engine.Engine, id int) engine.SlotInfo {
	t.Helper()
	slots, err := e.Slots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slots[id]
}

// TestSlotStates: a slot goes idle → processing prompt (a 400-token prompt in 8-token chunks
// takes 50 turns) → generating → idle, and /slots-style counters follow the prompt.
func TestSlotStates(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", stories), CtxSize: 512, BatchSize: 8})
	if s := slotState(t, e, 0); s.State != engine.SlotIdle || s.Processing || s.State.String() != "idle" {
		t.Fatalf("before any request: %+v", s)
	}
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: cat([]int32{1}, seqTokens(300, 399)), Params: greedy(3)})
	if err != nil {
		t.Fatal(err)
	}
	s := slotState(t, e, 0)
	for s.State == engine.SlotIdle { // admitted at the loop's next iteration
		s = slotState(t, e, 0)
	}
	if s.State != engine.SlotProcessingPrompt || !s.Processing || s.Task == nil || s.Task.NPromptProcessed >= 400 {
		t.Fatalf("after admission: state %s, %+v", s.State, s.Task)
	}
	before := s.Task.NPromptProcessed
	if s = slotState(t, e, 0); s.State != engine.SlotProcessingPrompt || s.Task.NPromptProcessed <= before {
		t.Errorf("a turn later: state %s, processed %d (was %d)", s.State, s.Task.NPromptProcessed, before)
	}
	<-ch // the first token: the prompt is done
	if s = slotState(t, e, 0); s.State != engine.SlotGenerating && s.State != engine.SlotIdle {
		t.Errorf("after the first token: state %s", s.State)
	}
	for range ch {
	}
	if s = slotState(t, e, 0); s.State != engine.SlotIdle || s.Processing || s.Task.NPromptTokens != 402 {
		t.Errorf("after the request: state %s processing %v, %+v", s.State, s.Processing, s.Task)
	}
}

// TestCancelFreesSlotWithinOneTurn: a client that leaves frees its slot by the engine's next
// turn, while another slot keeps generating.
func TestCancelFreesSlotWithinOneTurn(t *testing.T) {
	e := enginetest.LoadSlots(t, 2, "models", stories)
	p := greedy(-1)
	p.IgnoreEOS = true
	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	other, err := e.Submit(bg, engine.Task{Prompt: []int32{1, 300}, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	<-other
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := e.Submit(ctx, engine.Task{Prompt: []int32{1, 403}, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	id := (<-ch).Slot
	if s := slotState(t, e, id); s.State != engine.SlotGenerating {
		t.Fatalf("slot %d is %s while generating", id, s.State)
	}
	cancel()
	slotState(t, e, id) // answered at most one turn before the cancellation is seen
	if s := slotState(t, e, id); s.State != engine.SlotIdle {
		t.Fatalf("slot %d still %s a turn after its client left", id, s.State)
	}
	if st := e.Stats(); st.Processing != 1 {
		t.Errorf("processing %d slots, want 1 (the other request)", st.Processing)
	}
	for range ch {
	}
	stopBG()
	for range other {
	}
}

// TestPinnedSlot: a request naming a busy slot (id_slot) waits for it while a later request
// without one runs in the free slot; an unknown slot is refused.
func TestPinnedSlot(t *testing.T) {
	e := enginetest.LoadSlots(t, 2, "models", stories)
	at := func(i int) *int { return &i }
	bad := 2
	if _, err := e.Submit(context.Background(), engine.Task{Prompt: []int32{1, 403}, Params: greedy(1), Slot: &bad}); !errors.Is(err, engine.ErrInvalidSlot) {
		t.Fatalf("slot 2 of 2: %v", err)
	}
	p := greedy(-1)
	p.IgnoreEOS = true
	ctx, cancel := context.WithCancel(context.Background())
	long, err := e.Submit(ctx, engine.Task{Prompt: []int32{1, 300}, Params: p, Slot: at(1)})
	if err != nil {
		t.Fatal(err)
	}
	if r := <-long; r.Slot != 1 {
		t.Fatalf("pinned request ran in slot %d", r.Slot)
	}
	pinned, err := e.Submit(context.Background(), engine.Task{Prompt: []int32{1, 301}, Params: greedy(4), Slot: at(1)})
	if err != nil {
		t.Fatal(err)
	}
	free, err := e.Submit(context.Background(), engine.Task{Prompt: []int32{1, 302}, Params: greedy(4)})
	if err != nil {
		t.Fatal(err)
	}
	if _, final, _ := collect(t, free); final.Slot != 0 || final.TokensPredicted != 4 {
		t.Errorf("unpinned request: slot %d, %d tokens", final.Slot, final.TokensPredicted)
	}
	if st := e.Stats(); st.Deferred != 1 {
		t.Errorf("deferred %d, want 1 (the request waiting for slot 1)", st.Deferred)
	}
	cancel()
	for range long {
	}
	if _, final, _ := collect(t, pinned); final.Slot != 1 || final.TokensPredicted != 4 || final.Err != nil {
		t.Errorf("request waiting for slot 1: slot %d, %d tokens, err %v", final.Slot, final.TokensPredicted, final.Err)
	}
	if st := e.Stats(); st.Deferred != 0 {
		t.Errorf("deferred %d after the wait, want 0", st.Deferred)
	}
}

// TestPromptProgress: with return_progress a request reports its prompt's evaluation, once
// when it starts (only the cached part done) and after each prompt chunk, before its first
// token; a request sharing a prefix reports the reused tokens as cache.
func TestPromptProgress(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", stories), CtxSize: 512, BatchSize: 64})
	prompt := cat([]int32{1}, seqTokens(300, 149))
	for _, c := range []struct {
		prompt []int32
		cache  int
		want   []int // Processed of each progress result
	}{
		{prompt, 0, []int{0, 64, 128, 150}},
		{cat(prompt[:140], seqTokens(200, 30)), 140, []int{140, 170}},
	} {
		p := greedy(2)
		p.ReturnProgress = true
		ch, err := e.Submit(context.Background(), engine.Task{Prompt: c.prompt, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		tokens := 0
		for r := range ch {
			if r.Progress == nil {
				tokens += len(r.Tokens)
				continue
			}
			if tokens > 0 || r.Text != "" || len(r.Tokens) > 0 || r.Stop {
				t.Errorf("progress after a token or with text: %+v", r)
			}
			if r.Progress.Total != len(c.prompt) || r.Progress.Cache != c.cache || r.TokensEvaluated != len(c.prompt) {
				t.Errorf("progress %+v, want total %d cache %d", *r.Progress, len(c.prompt), c.cache)
			}
			got = append(got, r.Progress.Processed)
		}
		if !slices.Equal(got, c.want) || tokens != 2 {
			t.Errorf("processed %v, want %v (%d tokens)", got, c.want, tokens)
		}
	}
	// Without the flag nothing but text comes.
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(2)})
	if err != nil {
		t.Fatal(err)
	}
	for r := range ch {
		if r.Progress != nil {
			t.Fatalf("progress without return_progress: %+v", r)
		}
	}
}
