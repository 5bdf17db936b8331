package engine_test

import (
	"testing"

	"github.com/wgpu-llama/wgpu-llama/engine"
	"github.com/wgpu-llama/wgpu-llama/engine/enginetest"
)

// seeded is llama-server's sampling as llama.cpp's server test suite runs it (--seed 42
// --temp 0.8, the other samplers at their defaults).
func seeded(nPredict int) engine.Params {
	p := engine.DefaultParams()
	p.NPredict, p.Seed, p.Temperature = nPredict, 42, 0.8
	return p
}

// seededCases are completions of llama.cpp's server test suite (unit/test_completion.py and
// unit/test_chat_completion.py) on stories260K with seed 42 at temperature 0.8. llama.cpp's own
// texts are recorded only as the suite's patterns, which a different draw at any step would
// miss; these texts match them and pin our draws, so a change to the generator, the
// distributions or the chain's arithmetic shows here before it shows in the suite.
var seededCases = []struct {
	prompt   string
	nPredict int
	suite    string // the suite's pattern for llama.cpp's text
	want     string
}{
	{"I believe the meaning of life is", 8, "(going|bed)+", " going to get an"},
	{"Write a joke about AI from a very long prompt which will not be truncated", 64, "(princesses|everyone|kids|Anna|forest)+",
		" anymore. It was a little boy who could promise. He would come back around the forest to sleep, so he hugged his mom and said, \"Y"},
	// The chat template "This is not a chat template, it is" renders to this prompt.
	{"This is not a chat template, it is", 8, "^ blue", " blue. Every"},
}

// TestSeededMatchesLlamaCpp: a seeded sampled completion is llama.cpp's own text.
func TestSeededMatchesLlamaCpp(t *testing.T) {
	e := enginetest.Load(t, "models", "stories260K.gguf")
	for _, c := range seededCases {
		if text, _ := generate(t, e, c.prompt, seeded(c.nPredict)); text != c.want {
			t.Errorf("%q: %q, want %q (llama.cpp's matches %s)", c.prompt, text, c.want, c.suite)
		}
	}
}

// TestSeededDraftMatchesPlain: drafting (with a draft model or n-grams) never changes a
// seeded sampled completion, as in llama-server, where each drafted row is sampled as plain
// decoding samples it.
func TestSeededDraftMatchesPlain(t *testing.T) {
	for _, typ := range []engine.SpecType{engine.SpecDraft, engine.SpecNgram} {
		t.Run(string(typ), func(t *testing.T) {
			spec := engine.DefaultSpecConfig()
			if typ == engine.SpecDraft {
				spec.DraftModel = "models/stories260K.gguf"
			} else {
				spec.Type, spec.NgramN = engine.SpecNgram, 2
			}
			e := enginetest.LoadSpec(t, 1, spec, "models", "stories260K.gguf")
			drafted := 0
			for _, c := range seededCases {
				text, final := generate(t, e, c.prompt, seeded(c.nPredict))
				if text != c.want {
					t.Errorf("%q: %q, want %q", c.prompt, text, c.want)
				}
				drafted += final.Timings.DraftN
			}
			if drafted == 0 {
				t.Error("nothing was drafted")
			}
		})
	}
}
