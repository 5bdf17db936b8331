package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestMaxQueue: with one slot and MaxQueue 1, a request waits while another runs and a third
// is refused at once with ErrQueueFull, counted in Stats; once the queue drains, requests are
// taken again.
func TestMaxQueue(t *testing.T) {
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: shareddata.Path(t, "models", "stories260K.gguf"), CtxSize: 256, Slots: 1, MaxQueue: 1})
	prompt := e.Tokenizer().Encode("Once upon a time", true, true)
	long := greedy(120)
	long.IgnoreEOS = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := e.Submit(ctx, engine.Task{Prompt: prompt, Params: long})
	if err != nil {
		t.Fatal(err)
	}
	<-first // the slot is busy: the first token came
	second, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(4)})
	if err != nil {
		t.Fatalf("the queued request: %v", err)
	}
	if _, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(4)}); !errors.Is(err, engine.ErrQueueFull) {
		t.Fatalf("a request beyond the queue: %v, want ErrQueueFull", err)
	}
	if st := e.Stats(); st.Shed != 1 || st.MaxQueue != 1 || st.Deferred != 1 {
		t.Errorf("stats: shed %d, max queue %d, deferred %d", st.Shed, st.MaxQueue, st.Deferred)
	}
	cancel()
	for range first {
	}
	var last engine.Result
	for r := range second {
		last = r
	}
	if last.Err != nil || last.TokensPredicted != 4 {
		t.Fatalf("the queued request: %+v", last)
	}
	third, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(2)})
	if err != nil {
		t.Fatalf("after the queue drained: %v", err)
	}
	for range third {
	}
}
