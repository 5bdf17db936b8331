package engine_test

import (
	"context"
	"math"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// candidateCases are sampling settings that can sample from the GPU's candidates, and one that
// cannot (a repeat penalty reads the whole row).
var candidateCases = []struct {
	name       string
	set        func(p *engine.Params)
	candidates bool
}{
	{"greedy", func(p *engine.Params) { p.Temperature = 0 }, true},
	{"greedy n_probs", func(p *engine.Params) { p.Temperature, p.NProbs = 0, 5 }, true},
	{"defaults n_probs", func(p *engine.Params) { p.NProbs = 5 }, true},
	{"top_k only", func(p *engine.Params) { p.TopP, p.MinP, p.Temperature = 1, 0, 1 }, true},
	{"top_p", func(p *engine.Params) { p.TopP = 0.5 }, true},
	{"min_p", func(p *engine.Params) { p.MinP = 0.2 }, true},
	{"typical", func(p *engine.Params) { p.TypicalP = 0.7 }, true},
	{"xtc", func(p *engine.Params) { p.XTCProbability, p.XTCThreshold = 0.5, 0.05 }, true},
	{"hot", func(p *engine.Params) { p.Temperature, p.TopP, p.MinP = 1.5, 1, 0 }, true},
	{"dynatemp", func(p *engine.Params) { p.DynatempRange = 0.5 }, true},
	{"post-sampling n_probs", func(p *engine.Params) { p.NProbs, p.PostSamplingProbs = 5, true }, true},
	{"repeat penalty", func(p *engine.Params) { p.RepeatPenalty, p.NProbs = 1.1, 3 }, false},
}

// TestCandidateReadbackMatchesFullRows generates with the same seeded requests on an engine
// that reads back whole logits rows and on one that reads back the GPU's candidates where it
// can, and checks the tokens are identical and n_probs agree within 1e-5, on stories260K
// (vocabulary 512) and on a random model with Llama 2's 32000 tokens; with n-gram drafts too,
// where a slot verifies several rows per pass.
func TestCandidateReadbackMatchesFullRows(t *testing.T) {
	for _, name := range []string{"stories260K.gguf", "llama-2-tiny-random.gguf"} {
		t.Run(name, func(t *testing.T) {
			path := shareddata.Path(t, "models", name)
			full := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 512, Readback: engine.ReadbackFullRows})
			fast := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 512, Readback: engine.ReadbackCandidates})
			compareEngines(t, full, fast, "Once upon a time", 40)
		})
	}
	t.Run("ngram-drafts", func(t *testing.T) {
		path := shareddata.Path(t, "models", "stories260K.gguf")
		spec := engine.DefaultSpecConfig()
		spec.Type, spec.NgramN, spec.NMax = engine.SpecNgram, 2, 6
		full := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 512, Speculative: spec, Readback: engine.ReadbackFullRows})
		fast := enginetest.LoadConfig(t, engine.Config{ModelPath: path, CtxSize: 512, Speculative: spec, Readback: engine.ReadbackCandidates})
		compareEngines(t, full, fast, "Tom had a red ball. Tom had a red ball. Tom had", 48)
		if fast.SpecStats().Accepted == 0 {
			t.Error("no drafted token was accepted: the test did not verify several rows per pass")
		}
	})
}

func compareEngines(t *testing.T, full, fast *engine.Engine, prompt string, n int) {
	t.Helper()
	for _, tc := range candidateCases {
		p := engine.DefaultParams()
		p.NPredict, p.IgnoreEOS, p.Seed = n, true, 42
		tc.set(&p)
		before := fast.CandidatePasses()
		want := stream(t, full, prompt, p)
		got := stream(t, fast, prompt, p)
		if passes := fast.CandidatePasses() - before; (passes > 0) != tc.candidates {
			t.Errorf("%s: %d passes read back candidates; want some: %v", tc.name, passes, tc.candidates)
		}
		if len(got.tokens) != n || len(want.tokens) != n {
			t.Fatalf("%s: %d and %d tokens, want %d", tc.name, len(got.tokens), len(want.tokens), n)
		}
		for i := range want.tokens {
			if got.tokens[i] != want.tokens[i] {
				t.Fatalf("%s: token %d is %d from candidates, %d from full rows", tc.name, i, got.tokens[i], want.tokens[i])
			}
		}
		if len(got.probs) != len(want.probs) || (p.NProbs > 0) != (len(want.probs) == n) {
			t.Fatalf("%s: %d and %d n_probs steps", tc.name, len(got.probs), len(want.probs))
		}
		for i, w := range want.probs {
			g := got.probs[i]
			if g.ID != w.ID || math.Abs(float64(g.Prob-w.Prob)) > 1e-5 || len(g.Top) != len(w.Top) {
				t.Fatalf("%s: step %d: %d at %g with %d top, want %d at %g with %d", tc.name, i, g.ID, g.Prob, len(g.Top), w.ID, w.Prob, len(w.Top))
			}
			for j := range w.Top {
				if g.Top[j].ID != w.Top[j].ID || math.Abs(float64(g.Top[j].Prob-w.Top[j].Prob)) > 1e-5 {
					t.Fatalf("%s: step %d: top %d is %+v, want %+v", tc.name, i, j, g.Top[j], w.Top[j])
				}
			}
		}
	}
	if full.CandidatePasses() != 0 {
		t.Errorf("the full-rows engine read back candidates in %d passes", full.CandidatePasses())
	}
}

// streamed is every token and n_probs entry of a generation, across its partial results.
type streamed struct {
	tokens []int32
	probs  []engine.StepProbs
}

func stream(t *testing.T, e *engine.Engine, prompt string, p engine.Params) streamed {
	t.Helper()
	ch, err := e.Submit(context.Background(), engine.Task{Prompt: e.Tokenizer().Encode(prompt, true, true), Params: p})
	if err != nil {
		t.Fatal(err)
	}
	var out streamed
	for r := range ch {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		out.tokens = append(out.tokens, r.Tokens...)
		out.probs = append(out.probs, r.Probs...)
	}
	return out
}
