package cli

import (
	"flag"
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/engine"
)

// specFlags are llama.cpp's speculative decoding flags, for serve and complete. The draft
// flags take both spellings llama.cpp has used: --draft-max/--draft-min/--draft-p-min and
// the newer --spec-draft-n-max/--spec-draft-n-min/--spec-draft-p-min.
type specFlags struct {
	draftModel, specType string
	nMax, nMin           int
	pMin                 float64
	ngramN, ngramM       int
}

func (f *specFlags) register(fs *flag.FlagSet) {
	def := engine.DefaultSpecConfig()
	stringVar(fs, &f.draftModel, "", "draft model GGUF file for speculative decoding (its vocabulary must be the model's)", "md", "model-draft")
	stringVar(fs, &f.specType, "", fmt.Sprintf("speculative decoding type: %s, %s (with -md; the default when -md is given) or %s (prompt lookup, no draft model)",
		engine.SpecNone, engine.SpecDraft, engine.SpecNgram), "spec-type")
	intVar(fs, &f.nMax, def.NMax, "most tokens to draft per step", "draft-max", "draft", "draft-n", "spec-draft-n-max")
	intVar(fs, &f.nMin, def.NMin, "fewest drafted tokens worth verifying", "draft-min", "draft-n-min", "spec-draft-n-min")
	floatVar(fs, &f.pMin, float64(def.PMin), "stop a draft model's draft at a token it gives less probability (greedy)", "draft-p-min", "spec-draft-p-min")
	intVar(fs, &f.ngramN, def.NgramN, "n-gram length looked up by "+string(engine.SpecNgram), "spec-ngram-size-n")
	intVar(fs, &f.ngramM, def.NgramM, "most tokens "+string(engine.SpecNgram)+" proposes after a match", "spec-ngram-size-m")
}

// config is the engine's speculative decoding configuration, checked.
func (f *specFlags) config() (engine.SpecConfig, error) {
	c := engine.SpecConfig{Type: engine.SpecType(f.specType), DraftModel: f.draftModel, NMax: f.nMax, NMin: f.nMin,
		PMin: float32(f.pMin), NgramN: f.ngramN, NgramM: f.ngramM}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}
