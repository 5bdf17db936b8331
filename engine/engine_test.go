package engine_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// collect drains a result channel, concatenating the text, and returns the final result.
func collect(t *testing.T, ch <-chan engine.Result) (string, engine.Result, int) {
	t.Helper()
	var sb strings.Builder
	var last engine.Result
	n := 0
	for r := range ch {
		sb.WriteString(r.Text)
		last = r
		n++
	}
	if !last.Stop {
		t.Fatal("channel closed without a final result")
	}
	return sb.String(), last, n
}

func greedy(nPredict int) engine.Params {
	p := engine.DefaultParams()
	p.Temperature = 0
	p.NPredict = nPredict
	return p
}

func TestGreedyMatchesLlamaCpp(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	prompt := e.Tokenizer().Encode("Once upon a time", true, true)
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(32)})
	if err != nil {
		t.Fatal(err)
	}
	text, final, n := collect(t, ch)
	const want = ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw"
	if text != want {
		t.Errorf("text %q, want %q", text, want)
	}
	if final.StopType != engine.StopLimit || final.TokensPredicted != 32 || final.TokensEvaluated != 5 {
		t.Errorf("final: stop %s predicted %d evaluated %d", final.StopType, final.TokensPredicted, final.TokensEvaluated)
	}
	if final.TokensCached != 5+31 { // the last sampled token is never evaluated
		t.Errorf("tokens cached %d, want 36", final.TokensCached)
	}
	if n < 20 {
		t.Errorf("only %d results: text was not streamed", n)
	}
	if final.Timings.PromptN != 5 || final.Timings.PredictedN != 32 {
		t.Errorf("timings %+v", final.Timings)
	}

	// Same prompt again: the cached prefix is reused, one token is re-evaluated.
	ch, err = e.Submit(context.Background(), engine.Task{Prompt: prompt, Params: greedy(4)})
	if err != nil {
		t.Fatal(err)
	}
	text, final, _ = collect(t, ch)
	if text != ", there was a" || final.Timings.CacheN != 4 || final.Timings.PromptN != 1 {
		t.Errorf("cached run: text %q cache_n %d prompt_n %d", text, final.Timings.CacheN, final.Timings.PromptN)
	}
}

func TestStopString(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	p := greedy(32)
	p.Stop = []string{"Lily"}
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: e.Tokenizer().Encode("Once upon a time", true, true), Params: p})
	if err != nil {
		t.Fatal(err)
	}
	text, final, _ := collect(t, ch)
	if text != ", there was a little girl named " || final.StopType != engine.StopWord || final.StoppingWord != "Lily" {
		t.Errorf("text %q stop %s word %q", text, final.StopType, final.StoppingWord)
	}
}

func TestSamplingSeedReproducible(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	run := func() string {
		p := engine.DefaultParams()
		p.NPredict, p.Seed, p.Temperature = 24, 1234, 1.0
		ch, err := e.Submit(context.Background(), engine.Task{Prompt: e.Tokenizer().Encode("Once upon a time", true, true), Params: p})
		if err != nil {
			t.Fatal(err)
		}
		text, _, _ := collect(t, ch)
		return text
	}
	if a, b := run(), run(); a != b || a == "" {
		t.Errorf("seeded runs differ or are empty: %q vs %q", a, b)
	}
}

func TestSubmitErrorsAndCancel(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	if _, err := e.Submit(context.Background(), engine.Task{}); !errors.Is(err, engine.ErrEmptyPrompt) {
		t.Errorf("empty prompt: %v", err)
	}
	long := make([]int32, 600) // context is 512
	if _, err := e.Submit(context.Background(), engine.Task{Prompt: long, Params: greedy(1)}); !errors.Is(err, engine.ErrPromptTooBig) {
		t.Errorf("long prompt: %v", err)
	}
	if _, err := e.Submit(context.Background(), engine.Task{Prompt: []int32{1, 99999}, Params: greedy(1)}); err == nil {
		t.Error("out-of-range token accepted")
	}

	// A cancelled request stops generating and frees the slot for the next one.
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := e.Submit(ctx, engine.Task{Prompt: []int32{1, 403}, Params: greedy(-1)})
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	cancel()
	deadline := time.After(30 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-ch:
		case <-deadline:
			t.Fatal("generation did not stop after cancel")
		}
	}
	ch, err = e.Submit(context.Background(), engine.Task{Prompt: []int32{1, 403}, Params: greedy(2)})
	if err != nil {
		t.Fatal(err)
	}
	if _, final, _ := collect(t, ch); final.TokensPredicted != 2 {
		t.Errorf("after cancel: predicted %d", final.TokensPredicted)
	}
}

func TestNPredictZeroAndContextFull(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: []int32{1, 403}, Params: greedy(0)})
	if err != nil {
		t.Fatal(err)
	}
	if text, final, _ := collect(t, ch); text != "" || final.TokensPredicted != 0 || final.StopType != engine.StopLimit {
		t.Errorf("n_predict 0: %q %+v", text, final)
	}
	// Unlimited generation with EOS ignored ends when the 512-token context is full.
	p := greedy(-1)
	p.IgnoreEOS = true
	ch, err = e.Submit(context.Background(), engine.Task{Prompt: []int32{1, 403}, Params: p})
	if err != nil {
		t.Fatal(err)
	}
	_, final, _ := collect(t, ch)
	if !final.Truncated || final.StopType != engine.StopLimit || final.TokensCached != 511 {
		t.Errorf("context full: truncated %v stop %s cached %d", final.Truncated, final.StopType, final.TokensCached)
	}
}

// TestProbabilities checks n_probs against llama.cpp's recorded top-10 of stories260K's first
// greedy steps.
func TestProbabilities(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	p := greedy(4)
	p.NProbs = 3
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: e.Tokenizer().Encode("Once upon a time", true, true), Params: p})
	if err != nil {
		t.Fatal(err)
	}
	var steps []engine.StepProbs
	var ids []int32
	for r := range ch {
		if len(r.Probs) != len(r.Tokens) {
			t.Fatalf("%d probability entries for %d tokens", len(r.Probs), len(r.Tokens))
		}
		steps = append(steps, r.Probs...)
		ids = append(ids, r.Tokens...)
	}
	// llama.cpp: step 0 top-3 432 (ln p -0.0318), 383 (-3.547), 322 (-8.119).
	if len(steps) != 4 || steps[0].ID != 432 || len(steps[0].Top) != 3 || steps[0].Top[1].ID != 383 || steps[0].Top[2].ID != 322 {
		t.Fatalf("steps %+v (tokens %v)", steps, ids)
	}
	if lp := math.Log(float64(steps[0].Prob)); math.Abs(lp+0.0318) > 0.01 {
		t.Errorf("step 0 log-prob %.4f, llama.cpp -0.0318", lp)
	}
}

// TestNProbsBeyondVocabulary: an n_probs larger than the vocabulary (even one no slice can
// hold) lists the whole vocabulary, as llama-server does, instead of failing the engine.
func TestNProbsBeyondVocabulary(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	nVocab := e.Info().NVocab
	for _, post := range []bool{false, true} {
		p := greedy(2)
		p.NProbs, p.PostSamplingProbs = math.MaxInt/2, post
		ch, err := e.Submit(context.Background(), engine.Task{Prompt: []int32{1, 403}, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		var steps []engine.StepProbs
		for r := range ch {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			steps = append(steps, r.Probs...)
		}
		want := nVocab
		if post { // greedy keeps one candidate after sampling
			want = 1
		}
		if len(steps) != 2 || len(steps[0].Top) != want {
			t.Fatalf("post_sampling %v: %d steps, first with %d candidates, want 2 and %d", post, len(steps), len(steps[0].Top), want)
		}
		sum := 0.0
		for _, c := range steps[0].Top {
			sum += float64(c.Prob)
		}
		if math.Abs(sum-1) > 1e-3 {
			t.Errorf("post_sampling %v: probabilities sum to %v", post, sum)
		}
	}
}

// TestReasoningBudget: once the budget is spent the closing tokens are forced, whatever the
// model would have said, and generation goes on freely after them.
func TestReasoningBudget(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	tok := e.Tokenizer()
	end := tok.Encode("END", false, true)
	p := greedy(12)
	p.ReasoningBudget = &engine.ReasoningBudget{Tokens: 3, Start: tok.Encode("BEGIN", false, true), End: end, Forced: end, Open: true}
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: tok.Encode("Once upon a time", true, true), Params: p})
	if err != nil {
		t.Fatal(err)
	}
	text, final, _ := collect(t, ch)
	// Greedy alone says ", there was a little girl named Lily...": three tokens, then END
	// (which the tokenizer wrote with its leading space).
	const want = ", there was END"
	if !strings.HasPrefix(text, want) || final.TokensPredicted != 12 {
		t.Errorf("text %q (%d tokens), want it to start %q", text, final.TokensPredicted, want)
	}
}
