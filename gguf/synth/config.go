// Package synth writes synthetic models (llama, and the qwen2, qwen3, phi3, gemma2 and gemma3
// variations of it, the qwen2moe, qwen3moe and gpt-oss Mixtures of Experts, the qwen35 hybrid
// of recurrent and attention layers, and the bert encoder):
// valid GGUF files of any size and tensor type with seeded random weights and a working
// SentencePiece vocabulary, so loaders, kernels and benchmarks can run at real model shapes (up
// to 8B) without downloading a model. The weights are noise, so the text they generate is too.
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
	// Arch is general.architecture, one of Archs(); "" means llama. It decides the tensors
	// (qwen2: q/k/v biases; qwen3: per-head q/k norms; phi3: fused qkv and gate-up matrices;
	// gemma2: post-norms and tied embeddings; gemma3: those and per-head q/k norms; bert: an
	// encoder with learned positions, LayerNorms and biases, and no output matrix), the
	// metadata key prefix and the defaults of HeadDim, RopeDim and the Gemma fields below.
	Arch string
	// Mix picks the tensor types, with llama-quantize's per-tensor rules.
	Mix quantize.Mix
	// Dim is the embedding length, Layers the block count, FF the feed-forward length.
	Dim, Layers, FF int
	// Heads and KVHeads are the query and key/value head counts.
	Heads, KVHeads int
	// HeadDim is the per-head size (attention.key_length); 0 means the architecture's default:
	// 2*Dim/Heads for qwen3 (as Qwen3-0.6B: 1024 wide, 16 heads of 128), Dim/Heads otherwise.
	HeadDim int
	// RopeDim is rope.dimension_count, the rotated dimensions of each head; 0 means the
	// architecture's default: HeadDim/2 for phi3 (partial rotary), HeadDim otherwise.
	RopeDim int
	// Vocab is the number of tokens, Ctx the training context length.
	Vocab, Ctx int
	// RopeBase is rope.freq_base; NormEps the RMS norm epsilon (bert: the LayerNorm epsilon,
	// attention.layer_norm_epsilon; bert has no RoPE).
	RopeBase, NormEps float32
	// RopeScale is rope.scaling.factor, written with rope.scaling.type "linear" (positions
	// divided by it); 0 means the architecture's default: 2 for gemma3 (whose global layers
	// scale, as Gemma 3 4B and larger do by 8), no scaling otherwise.
	RopeScale float32
	// SlidingWindow is gemma2's and gemma3's attention.sliding_window, the positions a sliding
	// layer's token sees (itself included); 0 means 4, so that a test of a few tokens already
	// slides. Other architectures have no window.
	SlidingWindow int
	// AttnSoftCap and FinalSoftCap are gemma2's attn_logit_softcapping and
	// final_logit_softcapping; 0 means Gemma 2's 50 and 30. Other architectures have neither.
	AttnSoftCap, FinalSoftCap float32
	// Pooling is bert's pooling_type, in llama.cpp's numbering: 1 mean, 2 cls (the first
	// token), 3 last; 0 means mean. Other architectures have none.
	Pooling int
	// Rank makes a bert a reranker (a cross-encoder): it adds the classification head
	// llama.cpp's rank pooling runs (cls.weight, cls.bias, cls.output.weight with one output,
	// cls.output.bias), writes pooling_type 4 (rank), and gives the vocabulary XLM-RoBERTa's
	// separators (add_eos_token and add_sep_token, EOS as the separator), so llama-server's
	// rerank prompt is BOS query EOS SEP document EOS. Pooling must be 0 with it.
	Rank bool
	// Experts, ExpertsUsed and ExpertFF shape the Mixture of Experts of qwen2moe, qwen3moe and gpt-oss
	// (moe.go): expert_count, expert_used_count and expert_feed_forward_length; 0 means 8,
	// 2 and FF. Other architectures have none.
	Experts, ExpertsUsed, ExpertFF int
	// SSMHeads, SSMGroups and SSMState shape qwen35's recurrent layers: value heads
	// (ssm.time_step_rank), key heads (ssm.group_count) and the state and head size
	// (ssm.state_size); 0 means Heads, KVHeads and the head size. Other architectures have none.
	SSMHeads, SSMGroups, SSMState int
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
	// moe-tiny: a qwen3moe at the tiny preset's width, 8 experts of which 2 run.
	"moe-tiny": {Arch: "qwen3moe", Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16, FF: 172, Experts: 8, ExpertsUsed: 2, ExpertFF: 96,
		Vocab: 512, Ctx: 512, RopeBase: 1000000},
	// moe-128: a qwen3moe with Qwen3-30B-A3B's routing (128 experts, 8 used) at a width a CPU
	// adapter runs, for comparing its decode with the dense shape of the same active size
	// (moe-128-dense: 8 x 256 = 2048 active feed-forward rows).
	"moe-128": {Arch: "qwen3moe", Dim: 512, Layers: 8, Heads: 8, KVHeads: 4, HeadDim: 64, FF: 2048, Experts: 128, ExpertsUsed: 8, ExpertFF: 256,
		Vocab: 32000, Ctx: 4096, RopeBase: 1000000},
	"moe-128-dense": {Arch: "qwen3", Dim: 512, Layers: 8, Heads: 8, KVHeads: 4, HeadDim: 64, FF: 2048, Vocab: 32000, Ctx: 4096, RopeBase: 1000000},
	// qwen3-30b-a3b: Qwen3-30B-A3B (and Qwen3-Coder-30B-A3B).
	"qwen3-30b-a3b": {Arch: "qwen3moe", Dim: 2048, Layers: 48, Heads: 32, KVHeads: 4, HeadDim: 128, FF: 6144, Experts: 128, ExpertsUsed: 8, ExpertFF: 768,
		Vocab: 151936, Ctx: 40960, RopeBase: 1000000},
	// gpt-oss-20b: gpt-oss-20b (its window of 128 on every other layer, YaRN 32 over 4096).
	"gpt-oss-20b": {Arch: "gpt-oss", Dim: 2880, Layers: 24, Heads: 64, KVHeads: 8, HeadDim: 64, FF: 2880, Experts: 32, ExpertsUsed: 4, ExpertFF: 2880,
		Vocab: 201088, Ctx: 131072, RopeBase: 150000, SlidingWindow: 128},
	// qwen35-small: a qwen35 hybrid a CPU adapter decodes at long contexts, for the recurrent
	// layers' constant cost per token (6 Gated DeltaNet layers of 8 heads of 64, 2 attention).
	"qwen35-small": {Arch: "qwen35", Dim: 512, Layers: 8, Heads: 8, KVHeads: 2, HeadDim: 64, FF: 1536, SSMHeads: 8, SSMGroups: 4, SSMState: 64,
		Vocab: 32000, Ctx: 32768, RopeBase: 10000000},
	// qwen35moe-tiny: a qwen35moe at the tiny preset's width, 8 experts of which 2 run beside
	// the shared expert.
	"qwen35moe-tiny": {Arch: "qwen35moe", Dim: 64, Layers: 8, Heads: 4, KVHeads: 2, HeadDim: 32, FF: 192, Experts: 8, ExpertsUsed: 2, ExpertFF: 96,
		SSMHeads: 4, SSMGroups: 2, SSMState: 32, Vocab: 512, Ctx: 512, RopeBase: 10000000},
	// qwen35-35b-a3b: Qwen3.5-35B-A3B (30 Gated DeltaNet layers of 32 heads of 128 over 16 key
	// heads, 10 attention of 16 heads of 256; 256 experts of 512, 8 used, a shared one of 512).
	"qwen35-35b-a3b": {Arch: "qwen35moe", Dim: 2048, Layers: 40, Heads: 16, KVHeads: 2, HeadDim: 256, FF: 512, Experts: 256, ExpertsUsed: 8, ExpertFF: 512,
		SSMHeads: 32, SSMGroups: 16, SSMState: 128, Vocab: 248320, Ctx: 262144, RopeBase: 10000000},
	// qwen35-0.8b: Qwen3.5-0.8B (18 Gated DeltaNet layers of 16 heads of 128, 6 attention of
	// 8 heads of 256).
	"qwen35-0.8b": {Arch: "qwen35", Dim: 1024, Layers: 24, Heads: 8, KVHeads: 2, HeadDim: 256, FF: 3584, SSMHeads: 16, SSMGroups: 16, SSMState: 128,
		Vocab: 248320, Ctx: 262144, RopeBase: 10000000},
}

// Archs lists the architectures Write can generate.
func Archs() []string {
	return []string{"llama", "qwen2", "qwen2vl", "qwen3", "qwen2moe", "qwen3moe", "gpt-oss", "qwen35", "qwen35moe", "phi3", "gemma2", "gemma3", "gemma4", "bert"}
}

// Presets lists the preset names, the dense ones smallest first, then the Mixtures of Experts,
// then the hybrids.
func Presets() []string {
	return []string{"tiny", "134m", "1b", "8b", "moe-tiny", "moe-128", "moe-128-dense", "qwen3-30b-a3b", "gpt-oss-20b", "qwen35-small", "qwen35-0.8b", "qwen35moe-tiny", "qwen35-35b-a3b"}
}

// Preset returns a preset's configuration (its architecture, llama for the dense shapes; F32,
// seed 1), named "synth-NAME"; set Arch for another architecture.
func Preset(name string) (Config, error) {
	c, ok := presets[strings.ToLower(name)]
	if !ok {
		return Config{}, fmt.Errorf("unknown preset %q (want one of %s)", name, strings.Join(Presets(), ", "))
	}
	c.Name = "synth-" + strings.ToLower(name)
	if c.Arch == "" {
		c.Arch = "llama"
	}
	c.Mix = quantize.MixF32
	c.NormEps = 1e-5
	c.Seed = 1
	return c, nil
}

// Validate checks the shape: a known architecture, positive sizes, heads dividing the width,
// even head sizes and rotary dimensions (rope rotates pairs), KV heads dividing the heads, and
// room for the vocabulary's fixed part. qwen2, qwen3 and Gemma rotate whole heads and phi3's
// output matrix is square, as llama.cpp requires of those architectures; so is bert's, whose
// pooling must be one llama.cpp pools by.
func (c Config) Validate() error {
	if !slices.Contains(Archs(), c.arch()) {
		return fmt.Errorf("synth: architecture %q not supported (supported: %s)", c.Arch, strings.Join(Archs(), ", "))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"dim", c.Dim}, {"layers", c.Layers}, {"heads", c.Heads}, {"kv-heads", c.KVHeads}, {"ff", c.FF}, {"ctx", c.Ctx}} {
		if f.v <= 0 {
			return fmt.Errorf("synth: %s must be positive, got %d", f.name, f.v)
		}
	}
	if c.HeadDim < 0 || c.RopeDim < 0 {
		return fmt.Errorf("synth: head size %d and rope dimensions %d must not be negative", c.HeadDim, c.RopeDim)
	}
	if c.RopeScale < 0 || c.SlidingWindow < 0 || c.AttnSoftCap < 0 || c.FinalSoftCap < 0 {
		return fmt.Errorf("synth: rope scale, sliding window and soft-caps must not be negative")
	}
	hd, rot := c.headDim(), c.ropeDim()
	switch {
	case c.Dim%c.Heads != 0:
		return fmt.Errorf("synth: dim %d is not a multiple of heads %d", c.Dim, c.Heads)
	case hd%2 != 0:
		return fmt.Errorf("synth: head size %d must be even", hd)
	case rot%2 != 0 || rot <= 0 || rot > hd:
		return fmt.Errorf("synth: rope dimensions %d must be even, positive and at most the head size %d", rot, hd)
	case (c.qwen2() || c.arch() == "qwen2moe" || c.arch() == "qwen3" || c.arch() == "qwen3moe" || c.gemma()) && rot != hd:
		return fmt.Errorf("synth: %s rotates whole heads: rope dimensions %d must equal the head size %d", c.arch(), rot, hd)
	case (c.arch() == "phi3" || c.bert()) && hd*c.Heads != c.Dim:
		return fmt.Errorf("synth: %s needs heads x head size = dim, got %d x %d != %d", c.arch(), c.Heads, hd, c.Dim)
	case c.Pooling < 0 || c.Pooling > 3 || (c.Pooling != 0 && !c.bert()):
		return fmt.Errorf("synth: pooling %d: bert's alone, one of 1 (mean), 2 (cls), 3 (last), or 0 for mean", c.Pooling)
	case c.Rank && (!c.bert() || c.Pooling != 0):
		return fmt.Errorf("synth: a rank head is bert's alone, whose pooling is then rank (leave Pooling 0)")
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("synth: heads %d is not a multiple of kv-heads %d", c.Heads, c.KVHeads)
	case c.Vocab < MinVocab:
		return fmt.Errorf("synth: vocab %d is below the minimum %d (3 special, 256 byte and the \"▁\" tokens)", c.Vocab, MinVocab)
	case !c.moe() && (c.Experts != 0 || c.ExpertsUsed != 0 || c.ExpertFF != 0):
		return fmt.Errorf("synth: experts are qwen2moe's, qwen3moe's, gpt-oss's and qwen35moe's alone")
	case c.moe() && (c.Experts < 0 || c.ExpertsUsed < 0 || c.ExpertFF < 0 || c.expertsUsed() > c.experts()):
		return fmt.Errorf("synth: %d experts of which %d used, of %d rows, do not make a Mixture of Experts", c.experts(), c.expertsUsed(), c.expertFF())
	case !c.qwen35() && (c.SSMHeads != 0 || c.SSMGroups != 0 || c.SSMState != 0):
		return fmt.Errorf("synth: recurrent layers' sizes are qwen35's alone")
	case c.qwen35() && (c.SSMHeads < 0 || c.SSMGroups < 0 || c.SSMState < 0 || c.ssmHeads()%c.ssmGroups() != 0):
		return fmt.Errorf("synth: %d key heads do not divide %d value heads", c.ssmGroups(), c.ssmHeads())
	case c.gemma4() && (c.Layers < gemma4Period || c.headDim()%8 != 0):
		return fmt.Errorf("synth: gemma4 needs at least %d layers (every %dth is global) and heads of a multiple of 8 (its sliding layers' are half as wide), got %d and %d", gemma4Period, gemma4Period, c.Layers, c.headDim())
	case c.qwen35() && c.Layers < hybridInterval:
		return fmt.Errorf("synth: %s needs at least %d layers (every %dth is attention; llama.cpp cannot run one without)", c.arch(), hybridInterval, hybridInterval)
	case c.arch() == "gpt-oss" && rot != hd:
		return fmt.Errorf("synth: gpt-oss rotates whole heads: rope dimensions %d must equal the head size %d", rot, hd)
	case !slices.Contains(quantize.Mixes(), c.Mix):
		return fmt.Errorf("synth: unsupported type %v", c.Mix)
	case c.RopeBase <= 0 || c.NormEps <= 0:
		return fmt.Errorf("synth: rope base and norm epsilon must be positive")
	}
	return nil
}

// arch is the architecture, llama when unset.
func (c Config) arch() string {
	if c.Arch == "" {
		return "llama"
	}
	return c.Arch
}

// headDim is the per-head size, HeadDim or the architecture's default.
func (c Config) headDim() int {
	switch {
	case c.HeadDim > 0:
		return c.HeadDim
	case c.arch() == "qwen3" || c.arch() == "qwen3moe":
		return 2 * c.Dim / c.Heads
	}
	return c.Dim / c.Heads
}

// ropeDim is rope.dimension_count, RopeDim or the architecture's default.
func (c Config) ropeDim() int {
	switch {
	case c.RopeDim > 0:
		return c.RopeDim
	case c.arch() == "phi3":
		return c.headDim() / 2
	case c.qwen35():
		return c.headDim() / 4 // Qwen3.5 rotates a quarter of each head
	}
	return c.headDim()
}

// qwen2 reports whether the architecture is Qwen2's: qwen2, and qwen2vl (Qwen2-VL's text
// model, the same tensors turned by M-RoPE).
func (c Config) qwen2() bool { return c.arch() == "qwen2" || c.arch() == "qwen2vl" }

// mropeSections are qwen2vl's rope.dimension_sections: the head's rotated pairs split as
// Qwen2-VL's [16, 24, 24, 0] of 64 are, t a quarter, h and w the rest.
func (c Config) mropeSections() [4]int {
	pairs := c.headDim() / 2
	t := pairs / 4
	h := (pairs - t) / 2
	return [4]int{t, h, pairs - t - h, 0}
}

// gemma says whether the architecture is Gemma 2 or 3.
func (c Config) gemma() bool { return c.arch() == "gemma2" || c.arch() == "gemma3" }

// bert says whether the architecture is the BERT encoder.
func (c Config) bert() bool { return c.arch() == "bert" }

// pooling is bert's pooling_type: 4 (rank) with a rank head, else Pooling or 1 (mean).
func (c Config) pooling() int {
	switch {
	case c.Rank:
		return 4
	case c.Pooling == 0:
		return 1
	}
	return c.Pooling
}

// ropeScale is rope.scaling.factor, RopeScale or the architecture's default (0: none).
func (c Config) ropeScale() float32 {
	if c.RopeScale == 0 && c.arch() == "gemma3" {
		return 2
	}
	return c.RopeScale
}

// slidingWindow is Gemma's and gpt-oss's attention.sliding_window, SlidingWindow or 4.
func (c Config) slidingWindow() int {
	if c.SlidingWindow == 0 {
		return 4
	}
	return c.SlidingWindow
}

// softCaps are gemma2's attention and final logit soft-caps, the fields or 50 and 30.
func (c Config) softCaps() (attn, final float32) {
	attn, final = c.AttnSoftCap, c.FinalSoftCap
	if attn == 0 {
		attn = 50
	}
	if final == 0 {
		final = 30
	}
	return attn, final
}
