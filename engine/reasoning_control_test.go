package engine_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// TestEndReasoning: a control request ends the running generation's thinking block at once
// (the forced closing tokens follow the text so far), as llama-server's reasoning_end does; an
// unknown id and a generation that did not ask for control are refused with llama-server's
// messages.
func TestEndReasoning(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	tok := e.Tokenizer()
	end := tok.Encode("END", false, true)
	prompt := tok.Encode("Once upon a time", true, true)

	if err := e.EndReasoning(context.Background(), "chatcmpl-none"); !errors.Is(err, engine.ErrNoActiveCompletion) || err.Error() != "no active completion for this id" {
		t.Fatalf("unknown id: err %v", err)
	}

	run := func(control bool) (<-chan engine.Result, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		p := greedy(4096)
		p.IgnoreEOS = true
		p.ControlID = "chatcmpl-test"
		p.ReasoningControl = control
		p.ReasoningBudget = &engine.ReasoningBudget{Tokens: math.MaxInt32, Start: tok.Encode("BEGIN", false, true), End: end, Forced: end, Open: true}
		ch, err := e.Submit(ctx, engine.Task{Prompt: prompt, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		return ch, cancel
	}
	drain := func(ch <-chan engine.Result, cancel context.CancelFunc) {
		cancel()
		for range ch {
		}
	}

	// Not armed: the running generation is found but refused.
	ch, cancel := run(false)
	<-ch // running
	if err := e.EndReasoning(context.Background(), "chatcmpl-test"); !errors.Is(err, engine.ErrReasoningControlOff) || err.Error() != "reasoning control not enabled for this completion" {
		t.Fatalf("unarmed: err %v", err)
	}
	drain(ch, cancel)

	ch, cancel = run(true)
	defer cancel()
	var text strings.Builder
	text.WriteString((<-ch).Text)
	if err := e.EndReasoning(context.Background(), "chatcmpl-test"); err != nil {
		t.Fatalf("armed: %v", err)
	}
	for r := range ch {
		text.WriteString(r.Text)
		if strings.Contains(text.String(), "END") {
			break
		}
	}
	drain(ch, cancel)
	// Greedy alone says ", there was a little girl named Lily. She loved to play outside...":
	// some of it, then the forced END (written with its leading space).
	const greedyText = ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw"
	got := text.String()
	before, _, found := strings.Cut(got, " END")
	if !found || !strings.HasPrefix(greedyText, before) || before == "" {
		t.Errorf("text %q: want a prefix of %q, then \" END\"", got, greedyText)
	}
}
