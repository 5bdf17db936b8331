package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// TestDrainRejectsQueued: after Drain, a request queued behind a running one fails with
// ErrClosed while the running one still generates, a new one is refused, and the running one
// finishes normally.
func TestDrainRejectsQueued(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf") // one slot
	prompt := e.Tokenizer().Encode("Once upon a time", true, true)
	long := greedy(400)
	long.IgnoreEOS = true
	running, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: long})
	if err != nil {
		t.Fatal(err)
	}
	<-running // generating
	queued, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(4)})
	if err != nil {
		t.Fatal(err)
	}
	e.Drain()
	res := <-queued
	if !res.Stop || !errors.Is(res.Err, engine.ErrClosed) {
		t.Errorf("the queued request after Drain: %+v, want its end with ErrClosed", res)
	}
	n := 0
	var last engine.Result
	for r := range running {
		n++
		last = r
	}
	if n < 100 {
		t.Errorf("the running request sent only %d results after the queued one failed: it was not left running", n)
	}
	if last.Err != nil || last.StopType != engine.StopLimit || last.TokensPredicted != 400 {
		t.Errorf("the running request ended with %+v, want its 400 tokens", last)
	}
	if _, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(4)}); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Submit after Drain: %v, want ErrClosed", err)
	}
}
