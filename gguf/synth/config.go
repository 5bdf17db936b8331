// Package synth writes synthetic llama models: valid GGUF files of any size and tensor type
// with seeded random weights and a working SentencePiece vocabulary, so loaders, kernels and
// benchmarks can run at real model shapes (up to 8B) without downloading a model. The weights
// are noise, so the text they generate is too.
package synth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
)

// Config describes the model to generate.
type Config struct {
	// Name is general.name.
	Name string
	// Mix picks the tensor types, with llama-quantize's per-tensor rules.
	Mix quantize.Mix
	// Dim is the embedding length, Layers the block count, FF the feed-forward length.
	Dim, Layers, FF int
	// Heads and KVHeads are the query and key/value head counts; Dim/Heads is the head size.
	Heads, KVHeads int
	// Vocab is the number of tokens, Ctx the training context length.
	Vocab, Ctx int
	// RopeBase is rope.freq_base; NormEps the RMS norm epsilon.
	RopeBase, NormEps float32
	// Seed selects the weights: the same seed gives the same file, byte for byte.
	Seed uint64
}

// presets are shapes of real models (and one tiny one for fast tests).
var presets = map[string]Config{
	// tiny: stories260K's width, including its ffn length of 172 that no block size divides.
	"tiny": {Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, FF: 172, Vocab: 512, Ctx: 512, RopeBase: 10000},
	// 134m: a small GPT-2-sized llama with full multi-head attention.
	"134m": {Dim: 768, Layers: 12, Heads: 12, KVHeads: 12, FF: 2048, Vocab: 32000, Ctx: 2048, RopeBase: 10000},
	// 1b: TinyLlama-1.1B.
	"1b": {Dim: 2048, Layers: 22, Heads: 32, KVHeads: 4, FF: 5632, Vocab: 32000, Ctx: 2048, RopeBase: 10000},
	// 8b: Llama-3-8B.
	"8b": {Dim: 4096, Layers: 32, Heads: 32, KVHeads: 8, FF: 14336, Vocab: 128256, Ctx: 8192, RopeBase: 500000},
}

// Presets lists the preset names, smallest first.
func Presets() []string { return []string{"tiny", "134m", "1b", "8b"} }

// Preset returns a preset's configuration (F32, seed 1), named "synth-NAME".
func Preset(name string) (Config, error) {
	c, ok := presets[strings.ToLower(name)]
	if !ok {
		return Config{}, fmt.Errorf("unknown preset %q (want one of %s)", name, strings.Join(Presets(), ", "))
	}
	c.Name = "synth-" + strings.ToLower(name)
	c.Mix = quantize.MixF32
	c.NormEps = 1e-5
	c.Seed = 1
	return c, nil
}

// Validate checks the shape: positive sizes, heads dividing the width into even head sizes
// (rope rotates pairs), KV heads dividing the heads, and room for the vocabulary's fixed part.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"dim", c.Dim}, {"layers", c.Layers}, {"heads", c.Heads}, {"kv-heads", c.KVHeads}, {"ff", c.FF}, {"ctx", c.Ctx}} {
		if f.v <= 0 {
			return fmt.Errorf("synth: %s must be positive, got %d", f.name, f.v)
		}
	}
	switch {
	case c.Dim%c.Heads != 0:
		return fmt.Errorf("synth: dim %d is not a multiple of heads %d", c.Dim, c.Heads)
	case (c.Dim/c.Heads)%2 != 0:
		return fmt.Errorf("synth: head size %d (dim/heads) must be even", c.Dim/c.Heads)
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("synth: heads %d is not a multiple of kv-heads %d", c.Heads, c.KVHeads)
	case c.Vocab < MinVocab:
		return fmt.Errorf("synth: vocab %d is below the minimum %d (3 special, 256 byte and the \"▁\" tokens)", c.Vocab, MinVocab)
	case !slices.Contains(quantize.Mixes(), c.Mix):
		return fmt.Errorf("synth: unsupported type %v", c.Mix)
	case c.RopeBase <= 0 || c.NormEps <= 0:
		return fmt.Errorf("synth: rope base and norm epsilon must be positive")
	}
	return nil
}

// headDim is the per-head size, also rope.dimension_count.
func (c Config) headDim() int { return c.Dim / c.Heads }
