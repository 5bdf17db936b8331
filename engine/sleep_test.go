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

// sleepyEngine loads stories260K with a short idle timeout, recording OnSleep's calls.
func sleepyEngine(t *testing.T, slots int) (*engine.Engine, func() []bool) {
	t.Helper()
	var mu sync.Mutex
	var states []bool
	e := enginetest.LoadConfig(t, engine.Config{
		ModelPath: shareddata.Path(t, "models", "stories260K.gguf"),
		CtxSize:   512 * slots, Slots: slots,
		SleepIdle: 300 * time.Millisecond,
		OnSleep: func(asleep bool) {
			mu.Lock()
			states = append(states, asleep)
			mu.Unlock()
		},
	})
	return e, func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(states)
	}
}

// waitAsleep polls until the engine sleeps, failing after 10 seconds.
func waitAsleep(t *testing.T, e *engine.Engine) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !e.Sleeping(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the engine did not fall asleep")
		}
	}
}

func TestSleepFreesTheDeviceAndAGenerationWakesIt(t *testing.T) {
	e, states := sleepyEngine(t, 1)
	before, _ := generate(t, e, "Once upon a time", greedy(24))
	waitAsleep(t, e)
	if !e.DeviceFreed() {
		t.Fatal("asleep, the engine still holds its device, model, KV cache or pages")
	}
	st := e.Stats() // read without waking
	if st.PredictedTokens != 24 || st.KVTokens == 0 {
		t.Errorf("stats asleep: predicted %d, KV tokens %d; want the counts from before sleeping (24, > 0)", st.PredictedTokens, st.KVTokens)
	}
	if !e.Sleeping() {
		t.Fatal("reading the stats woke the engine")
	}
	if got := states(); !slices.Equal(got, []bool{true}) {
		t.Errorf("OnSleep calls %v, want [true]", got)
	}

	after, _ := generate(t, e, "Once upon a time", greedy(24))
	if after != before {
		t.Errorf("after waking: %q, before sleeping: %q", after, before)
	}
	if e.Sleeping() {
		t.Error("the engine still sleeps after a generation")
	}
	if got := states(); !slices.Equal(got, []bool{true, false}) {
		t.Errorf("OnSleep calls %v, want [true false]", got)
	}
	if st := e.Stats(); st.PredictedTokens != 48 {
		t.Errorf("predicted tokens %d, want 48: the counters go on across sleep", st.PredictedTokens)
	}
	// It falls asleep again once idle.
	waitAsleep(t, e)
}

func TestWakeAndControlsWakeTheEngine(t *testing.T) {
	e, _ := sleepyEngine(t, 1)
	waitAsleep(t, e)
	if err := e.Wake(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.Sleeping() {
		t.Fatal("Wake returned with the engine asleep")
	}
	waitAsleep(t, e)
	slots, err := e.Slots(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 1 || e.Sleeping() {
		t.Errorf("/slots asleep: %d slots, sleeping %v; want 1 slot and the engine awake", len(slots), e.Sleeping())
	}
}

func TestRequestsQueuedWhileWakingAllRun(t *testing.T) {
	e, _ := sleepyEngine(t, 2)
	want, _ := generate(t, e, "The cat", greedy(12))
	waitAsleep(t, e)
	var wg sync.WaitGroup
	got := make([]string, 5)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := e.Submit(context.Background(), engine.Task{Prompt: e.Tokenizer().Encode("The cat", true, true), Params: greedy(12)})
			if err != nil {
				t.Error(err)
				return
			}
			text, final, _ := collect(t, ch)
			if final.Err != nil {
				t.Error(final.Err)
			}
			got[i] = text
		}()
	}
	wg.Wait()
	for i, g := range got {
		if g != want {
			t.Errorf("request %d: %q, want %q", i, g, want)
		}
	}
}
