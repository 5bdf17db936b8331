package engine_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/charmbracelet/log"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// generate runs one request and returns its text and final result.
func generate(t *testing.T, e *engine.Engine, prompt string, p engine.Params) (string, engine.Result) {
	t.Helper()
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: e.Tokenizer().Encode(prompt, true, true), Params: p})
	if err != nil {
		t.Fatal(err)
	}
	text, final, _ := collect(t, ch)
	if final.Err != nil {
		t.Fatal(final.Err)
	}
	return text, final
}

// generateAll runs the prompts at once, one per slot.
func generateAll(t *testing.T, e *engine.Engine, prompts []string, p engine.Params) ([]string, []engine.Result) {
	t.Helper()
	texts, finals := make([]string, len(prompts)), make([]engine.Result, len(prompts))
	var wg sync.WaitGroup
	for i, prompt := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := e.Submit(context.Background(), engine.Task{Prompt: e.Tokenizer().Encode(prompt, true, true), Params: p})
			if err != nil {
				t.Error(err)
				return
			}
			var sb strings.Builder
			for r := range ch {
				sb.WriteString(r.Text)
				finals[i] = r
			}
			texts[i] = sb.String()
		}()
	}
	wg.Wait()
	return texts, finals
}

var specPrompts = []string{"Once upon a time", "Lily and Tom went to the park", "The cat", "Ben had a toy car"}

// TestSelfDraftMatchesGreedy drafts stories260K with itself: greedy output is identical to
// plain decoding, alone and with 4 slots batched, and every drafted token is accepted.
func TestSelfDraftMatchesGreedy(t *testing.T) {
	plain := enginetest.LoadSlots(t, 4, "models", "stories260K.gguf")
	want, _ := generateAll(t, plain, specPrompts, greedy(64))

	spec := engine.DefaultSpecConfig()
	spec.DraftModel = "models/stories260K.gguf"
	e := enginetest.LoadSpec(t, 4, spec, "models", "stories260K.gguf")
	if got := e.Info().SpecType; got != engine.SpecDraft {
		t.Errorf("spec type %q, want %q", got, engine.SpecDraft)
	}
	text, final := generate(t, e, specPrompts[0], greedy(64))
	if text != want[0] {
		t.Errorf("self-drafted %q, plain %q", text, want[0])
	}
	tm := final.Timings
	if tm.DraftN == 0 || tm.DraftNAccepted != tm.DraftN || final.TokensPredicted != 64 || tm.PredictedN != 64 {
		t.Errorf("alone: draft_n %d, accepted %d, predicted %d", tm.DraftN, tm.DraftNAccepted, final.TokensPredicted)
	}
	before := e.SpecStats()
	texts, finals := generateAll(t, e, specPrompts, greedy(64))
	drafted, accepted := 0, 0
	for i := range specPrompts {
		if texts[i] != want[i] {
			t.Errorf("prompt %d batched: self-drafted %q, plain %q", i, texts[i], want[i])
		}
		tm := finals[i].Timings
		if tm.DraftN == 0 || tm.DraftNAccepted != tm.DraftN {
			t.Errorf("prompt %d batched: draft_n %d, accepted %d", i, tm.DraftN, tm.DraftNAccepted)
		}
		drafted += tm.DraftN
		accepted += tm.DraftNAccepted
	}
	st := e.SpecStats()
	if st.DraftTokens-before.DraftTokens != int64(drafted) || st.Accepted-before.Accepted != int64(accepted) || st.Drafts <= before.Drafts {
		t.Errorf("engine counters moved by %d drafted, %d accepted over %d drafts; the responses say %d and %d",
			st.DraftTokens-before.DraftTokens, st.Accepted-before.Accepted, st.Drafts-before.Drafts, drafted, accepted)
	}
}

// TestSelfDraftSmallBatch drafts with a batch of 8 tokens for 4 slots whose prompts are
// longer: the draft model catches up on the prompts over several passes and the drafts share
// what the batch has left; greedy output is still the plain engine's.
func TestSelfDraftSmallBatch(t *testing.T) {
	prompts := []string{
		"Lily and Tom went to the park to play with a big red ball",
		"One day, a little bird flew into the garden and saw a shiny stone",
		"The cat", "Once upon a time",
	}
	path := shareddata.Path(t, "models", "stories260K.gguf")
	plain := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 4 * 256, Slots: 4, BatchSize: 8})
	want, _ := generateAll(t, plain, prompts, greedy(40))
	spec := engine.DefaultSpecConfig()
	spec.DraftModel = path
	e := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 4 * 256, Slots: 4, BatchSize: 8, Speculative: spec})
	texts, finals := generateAll(t, e, prompts, greedy(40))
	for i := range prompts {
		if texts[i] != want[i] {
			t.Errorf("prompt %d: self-drafted %q, plain %q", i, texts[i], want[i])
		}
		if tm := finals[i].Timings; tm.DraftN == 0 || tm.DraftNAccepted != tm.DraftN {
			t.Errorf("prompt %d: draft_n %d, accepted %d", i, tm.DraftN, tm.DraftNAccepted)
		}
	}
}

// TestQuantizedDraftMatchesGreedy drafts stories260K with its Q4_0 quantization: the target
// still decides every token (output identical to plain greedy decoding), and it rejects some
// of the draft's.
func TestQuantizedDraftMatchesGreedy(t *testing.T) {
	plain := enginetest.LoadSlots(t, 2, "models", "stories260K.gguf")
	prompts := specPrompts[:2]
	want, _ := generateAll(t, plain, prompts, greedy(64))

	spec := engine.DefaultSpecConfig()
	spec.Type, spec.DraftModel, spec.PMin = engine.SpecDraft, "models/quant/stories260K-Q4_0.gguf", 0
	e := enginetest.LoadSpec(t, 2, spec, "models", "stories260K.gguf")
	texts, finals := generateAll(t, e, prompts, greedy(64))
	drafted, accepted := 0, 0
	for i := range prompts {
		if texts[i] != want[i] {
			t.Errorf("prompt %d: drafted by Q4_0 %q, plain %q", i, texts[i], want[i])
		}
		drafted += finals[i].Timings.DraftN
		accepted += finals[i].Timings.DraftNAccepted
	}
	if !(accepted > 0 && accepted < drafted) {
		t.Errorf("%d of %d drafted tokens accepted, want some but not all", accepted, drafted)
	}
	t.Logf("Q4_0 draft: %d of %d drafted tokens accepted", accepted, drafted)
}

// TestNgramDraftMatchesGreedy drafts by prompt lookup on a repetitive prompt: greedy output is
// identical to plain decoding and some drafted tokens are accepted.
func TestNgramDraftMatchesGreedy(t *testing.T) {
	prompt := strings.Repeat("Tom had a red ball. Tom had a red ball. ", 4) + "Tom had"
	plain := enginetest.Load(t, "models", "stories260K.gguf")
	want, _ := generate(t, plain, prompt, greedy(48))

	spec := engine.DefaultSpecConfig()
	spec.Type, spec.NgramN, spec.NMax = engine.SpecNgram, 3, 8
	e := enginetest.LoadSpec(t, 1, spec, "models", "stories260K.gguf")
	text, final := generate(t, e, prompt, greedy(48))
	if text != want {
		t.Errorf("n-gram drafted %q, plain %q", text, want)
	}
	tm := final.Timings
	if tm.DraftNAccepted == 0 || tm.DraftNAccepted > tm.DraftN {
		t.Errorf("draft_n %d, accepted %d: want some accepted", tm.DraftN, tm.DraftNAccepted)
	}
	t.Logf("n-gram: %d of %d drafted tokens accepted; %q", tm.DraftNAccepted, tm.DraftN, text)
}

// TestSpeculativeRequestLimits checks the per-request overrides: speculative.n_max 0 drafts
// nothing, n_max 2 at most 2 tokens per verification; and that sampling with a temperature
// through drafts generates the requested length.
func TestSpeculativeRequestLimits(t *testing.T) {
	spec := engine.DefaultSpecConfig()
	spec.DraftModel = "models/stories260K.gguf"
	e := enginetest.LoadSpec(t, 1, spec, "models", "stories260K.gguf")

	p := greedy(24)
	p.SpecNMax = 0
	if _, final := generate(t, e, "Once upon a time", p); final.Timings.DraftN != 0 {
		t.Errorf("speculative.n_max 0: draft_n %d", final.Timings.DraftN)
	}
	before := e.SpecStats()
	p.SpecNMax = 2
	generate(t, e, "The dog ran", p)
	st := e.SpecStats()
	if d, n := st.Drafts-before.Drafts, st.DraftTokens-before.DraftTokens; d == 0 || n > 2*d {
		t.Errorf("speculative.n_max 2: %d drafted tokens over %d drafts", n, d)
	}

	s := engine.DefaultParams()
	s.NPredict, s.Seed, s.IgnoreEOS = 40, 7, true
	_, final := generate(t, e, "Once upon a time", s)
	if final.TokensPredicted != 40 || final.Timings.DraftN == 0 || final.Timings.DraftNAccepted > final.Timings.DraftN {
		t.Errorf("sampling with drafts: predicted %d, draft_n %d, accepted %d", final.TokensPredicted, final.Timings.DraftN, final.Timings.DraftNAccepted)
	}
}

// TestDraftVocabularyMismatch loads a draft model with another vocabulary: a clear error.
func TestDraftVocabularyMismatch(t *testing.T) {
	path := shareddata.Path(t, "models", "stories260K.gguf")
	spec := engine.DefaultSpecConfig()
	spec.DraftModel = shareddata.Path(t, "models", "llama-2-tiny-random.gguf")
	_, err := gpu.Adapters()
	gputest.Check(t, err)
	_, err = engine.Load(context.Background(), engine.Config{ModelPath: path, CtxSize: 256, Device: -1, Speculative: spec, Logger: log.New(io.Discard)})
	if err == nil || !strings.Contains(err.Error(), "the draft model's vocabulary has 32000 tokens (32000 logits), the target's 512 (512 logits): they must match") {
		t.Fatalf("draft with another vocabulary: error %v", err)
	}
}
