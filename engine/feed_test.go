package engine_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// feedRun is one request's outcome: every token it produced and its final result.
type feedRun struct {
	tokens []int32
	final  engine.Result
}

// feedRunIn runs a greedy request of n tokens (end of generation ignored) in slot id.
func feedRunIn(t *testing.T, e *engine.Engine, id int, prompt string, n int) feedRun {
	t.Helper()
	p := greedy(n)
	p.IgnoreEOS = true
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: e.Tokenizer().Encode(prompt, true, true), Params: p, Slot: &id})
	if err != nil {
		t.Error(err)
		return feedRun{}
	}
	var run feedRun
	for r := range ch {
		run.tokens = append(run.tokens, r.Tokens...)
		run.final = r
	}
	if run.final.Err != nil || !run.final.Stop {
		t.Errorf("slot %d: final %+v", id, run.final)
	}
	return run
}

// settled waits for a snapshot that ok accepts.
func settled(t *testing.T, f *engine.Feed, ok func(engine.Snapshot) bool) engine.Snapshot {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if s, got := f.Latest(); got && ok(s) {
			return s
		}
		select {
		case <-f.Changed():
		case <-time.After(50 * time.Millisecond): // Changed is the wake-up; polling covers a lost race
		case <-deadline:
			s, _ := f.Latest()
			t.Fatalf("no settled snapshot; the last: %+v", s)
		}
	}
}

// idleAt reports whether every slot of s is idle and s shows pass n.
func idleAt(n uint64) func(engine.Snapshot) bool {
	return func(s engine.Snapshot) bool {
		for _, v := range s.Slots {
			if v.State != engine.SlotIdle || v.Embedding {
				return false
			}
		}
		return s.Pass == n
	}
}

// TestFeedTwoSlots runs two requests at once in two slots with the feed on and checks the pass
// records, the final snapshot and the selected slot's candidates against what ran, reading
// back whole rows and the GPU's candidates.
func TestFeedTwoSlots(t *testing.T) {
	for _, rb := range []struct {
		name string
		mode engine.Readback
	}{{"rows", engine.ReadbackFullRows}, {"candidates", engine.ReadbackCandidates}} {
		t.Run(rb.name, func(t *testing.T) {
			e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 1024, Slots: 2, Readback: rb.mode})
			f := e.Feed()
			f.Select(1)
			prompts := []string{"Once upon a time", "Lily and Tom went to the park to play with a big red ball"}
			runs := make([]feedRun, 2)
			var wg sync.WaitGroup
			for i, p := range prompts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					runs[i] = feedRunIn(t, e, i, p, 12+8*i)
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			recs := f.Passes(0)
			if len(recs) == 0 || len(recs) >= engine.PassHistory {
				t.Fatalf("%d pass records", len(recs))
			}
			perSlot := map[int]int{}
			for i, r := range recs {
				if r.Pass != uint64(i+1) {
					t.Fatalf("record %d is pass %d", i, r.Pass)
				}
				if r.Duration <= 0 || r.End.IsZero() {
					t.Errorf("pass %d: duration %v end %v", r.Pass, r.Duration, r.End)
				}
				for _, s := range r.Shares {
					perSlot[s.Slot] += s.Tokens
				}
			}
			for i, run := range runs {
				// The prompt evaluated, then every generated token but the last (never fed back).
				ran := run.final.Timings.PromptN + run.final.TokensPredicted - 1
				if perSlot[i] != ran || run.final.TokensCached-run.final.Timings.CacheN != ran {
					t.Errorf("slot %d: shares hold %d tokens; prompt %d + steps %d (cached %d)", i, perSlot[i], run.final.Timings.PromptN, run.final.TokensPredicted-1, run.final.TokensCached)
				}
			}
			if got := len(f.Passes(recs[len(recs)/2].Pass)); got != len(recs)-len(recs)/2-1 {
				t.Errorf("Passes after the middle: %d records", got)
			}

			snap := settled(t, f, idleAt(recs[len(recs)-1].Pass))
			for i, v := range snap.Slots {
				if v.Tokens != runs[i].final.TokensCached || v.Task != -1 || v.Decoded != runs[i].final.TokensPredicted || v.Context != 512 {
					t.Errorf("slot %d: %+v; final cached %d predicted %d", i, v, runs[i].final.TokensCached, runs[i].final.TokensPredicted)
				}
				if v.Tail == "" {
					t.Errorf("slot %d: no tail", i)
				}
			}
			if st := e.Stats(); snap.KV.Used != st.KVTokens || snap.KV.Capacity != st.KVCapacity || snap.KV.PageRows == 0 {
				t.Errorf("KV used %d of %d (rows %d); stats %d of %d", snap.KV.Used, snap.KV.Capacity, snap.KV.PageRows, st.KVTokens, st.KVCapacity)
			}
			owned := map[int32]int{}
			for pg, o := range snap.KV.Owner {
				owned[o]++
				if snap.KV.Shared[pg] {
					t.Errorf("page %d shared", pg)
				}
			}
			for i, v := range snap.Slots {
				if want := (v.Tokens + snap.KV.PageRows - 1) / snap.KV.PageRows; owned[int32(i)] != want {
					t.Errorf("slot %d owns %d pages for %d tokens, want %d", i, owned[int32(i)], v.Tokens, want)
				}
			}
			m := snap.Memory
			if len(m.Weights) == 0 || m.KV == 0 || m.Scratch == 0 || m.DeviceName == "" || m.MaxBuffer == 0 || m.MaxBinding == 0 {
				t.Errorf("memory %+v", m)
			}
			if snap.Model.Layers == 0 || snap.Model.Heads == 0 || snap.Model.Name == "" {
				t.Errorf("model %+v", snap.Model)
			}

			top, last := snap.Slots[1].Top, runs[1].tokens[len(runs[1].tokens)-1]
			if len(top) == 0 || len(snap.Slots[0].Top) != 0 {
				t.Fatalf("top: slot 1 %v, slot 0 %v", top, snap.Slots[0].Top)
			}
			sum := float32(0)
			for i, c := range top {
				sum += c.P
				if c.P <= 0 || i > 0 && c.P > top[i-1].P {
					t.Errorf("top %v: not descending", top)
				}
			}
			want := string(e.Tokenizer().Piece(last, true))
			if sum > 1+1e-5 || top[0].Token != want || snap.Slots[1].TopToken != want {
				t.Errorf("top %v (sum %v), token %q; the last token %q", top, sum, snap.Slots[1].TopToken, want)
			}

			// A control message is published too.
			if _, err := e.EraseSlot(context.Background(), 0); err != nil {
				t.Fatal(err)
			}
			settled(t, f, func(s engine.Snapshot) bool {
				return s.Slots[0].Tokens == 0 && s.Slots[1].Tokens == runs[1].final.TokensCached
			})
		})
	}
}

// TestFeedProfile profiles passes through the feed.
func TestFeedProfile(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	f := e.Feed()
	f.ProfileEvery(time.Nanosecond)
	feedRunIn(t, e, 0, "Once upon a time", 4)
	recs := f.Passes(0)
	snap := settled(t, f, idleAt(recs[len(recs)-1].Pass))
	if snap.KernelsAt != snap.Pass {
		t.Errorf("kernels at pass %d of %d", snap.KernelsAt, snap.Pass)
	}
	found := false
	for i, k := range snap.Kernels {
		if k.Family == "matvec" && k.Calls > 0 {
			found = true
		}
		if i > 0 && k.Time > snap.Kernels[i-1].Time {
			t.Errorf("kernels not by time: %v", snap.Kernels)
		}
	}
	if !found {
		t.Errorf("no matvec in %+v", snap.Kernels)
	}
	// Profiling off, the device runs unprofiled passes again.
	f.ProfileEvery(0)
	at := snap.KernelsAt
	feedRunIn(t, e, 0, "The cat", 4)
	recs = f.Passes(0)
	if snap = settled(t, f, idleAt(recs[len(recs)-1].Pass)); snap.KernelsAt != at {
		t.Errorf("pass %d profiled after profiling stopped at %d", snap.KernelsAt, at)
	}
}

// TestFeedSlowObserver checks that an observer that never reads Changed, and one reading as
// fast as it can, do not hold the engine up.
func TestFeedSlowObserver(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	f := e.Feed()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			f.Latest()
			f.Passes(0)
		}
	}()
	done := make(chan feedRun)
	go func() { done <- feedRunIn(t, e, 0, "Once upon a time", 64) }()
	select {
	case run := <-done:
		if run.final.TokensPredicted != 64 {
			t.Errorf("%d tokens", run.final.TokensPredicted)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("generation stalled")
	}
	close(stop)
	wg.Wait()
}

// TestFeedLatestCopy checks that an idle engine publishes as soon as it is watched, and that
// a snapshot's reader owns it.
func TestFeedLatestCopy(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	f := e.Feed()
	if e.Feed() != f {
		t.Error("a second feed")
	}
	a := settled(t, f, idleAt(0))
	a.Slots[0].Tokens = 99
	a.Slots = append(a.Slots, engine.SlotView{})
	a.KV.Owner[0], a.KV.Shared[0] = 7, true
	a.Memory.Weights["mutated"] = 1
	b, _ := f.Latest()
	if len(b.Slots) != 1 || b.Slots[0].Tokens != 0 || b.KV.Owner[0] != -1 || b.KV.Shared[0] || b.Memory.Weights["mutated"] != 0 {
		t.Errorf("the published snapshot changed with a copy: %+v", b)
	}
}

// TestFeedEmbedding records an embedding job's passes as prompt tokens of its slot.
func TestFeedEmbedding(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 512, Embeddings: true, Pooling: "mean"})
	f := e.Feed()
	tokens := e.Tokenizer().Encode("Lily and Tom went to the park", true, true)
	res := result(t, e, engine.Task{Kind: engine.TaskEmbed, Prompt: tokens})
	recs := f.Passes(0)
	if len(recs) != 1 || len(recs[0].Shares) != 1 || recs[0].Shares[0] != (engine.PassShare{Slot: 0, Tokens: len(tokens), Prompt: true}) {
		t.Fatalf("records %+v", recs)
	}
	snap := settled(t, f, idleAt(1))
	if snap.Slots[0].Tokens != res.TokensCached {
		t.Errorf("slot %+v, cached %d", snap.Slots[0], res.TokensCached)
	}
}

// TestFeedSleep follows the engine to sleep, where nothing is on the device, and back.
func TestFeedSleep(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 512, SleepIdle: 100 * time.Millisecond})
	f := e.Feed()
	f.ProfileEvery(time.Nanosecond)
	feedRunIn(t, e, 0, "Once upon a time", 4)
	asleep := settled(t, f, func(s engine.Snapshot) bool { return s.Memory.DeviceName == "" })
	if !e.Sleeping() || asleep.Slots[0].Tokens != 0 || slices.Contains(asleep.KV.Owner, 0) || asleep.Memory.Weights != nil || asleep.Model.Layers == 0 {
		t.Errorf("asleep: %v, snapshot %+v", e.Sleeping(), asleep)
	}
	feedRunIn(t, e, 0, "The cat", 4)
	settled(t, f, func(s engine.Snapshot) bool {
		return s.Memory.DeviceName != "" && s.KernelsAt > asleep.Pass && s.Slots[0].Tokens > 0
	})
}
