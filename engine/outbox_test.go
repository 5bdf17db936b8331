package engine_test

import (
	"context"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// TestSlowReaderDoesNotStallOthers: a client that reads nothing while its request produces
// hundreds of results does not hold up a request in another slot, and still gets every
// result, in order, when it reads.
func TestSlowReaderDoesNotStallOthers(t *testing.T) {
	e := enginetest.LoadSlots(t, 2, "models", stories)
	p := greedy(300)
	p.IgnoreEOS = true
	slow, err := e.Submit(context.Background(), engine.Task{Prompt: []int32{1, 403}, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	if _, final := run(t, e, []int32{1, 300, 301}, greedy(200)); final.TokensPredicted == 0 {
		t.Errorf("other request: %+v", final)
	}
	text, final, n := collect(t, slow)
	if final.TokensPredicted != 300 || n < 2 || text == "" {
		t.Errorf("slow reader: predicted %d in %d results", final.TokensPredicted, n)
	}
	alone, _ := run(t, e, []int32{1, 403}, p)
	if text != alone {
		t.Errorf("slow reader's text differs from a read-as-you-go run")
	}
}
