// Package model turns a GGUF file into a runnable model: hyperparameters from metadata,
// weights uploaded to the GPU, the tokenizer, and a forward pass recorded as GPU kernels.
package model

import (
	"fmt"
	"math"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// Config holds a model's hyperparameters, read from "<arch>.*" keys: the ones every
// architecture has (readCommon), and each architecture's own (its arch_*.go file's hparams), as
// llama.cpp's one llama_hparams holds every family's.
type Config struct {
	Arch      string   // general.architecture, one of Architectures(); the prefix of the other keys
	Name      string   // general.name, "" when the file has none
	NEmbd     int      // embedding length
	NLayer    int      // block_count: transformer blocks
	NHead     int      // attention.head_count: query heads
	NKVHead   int      // attention.head_count_kv (default NHead); divides NHead for GQA
	HeadDim   int      // attention.key_length (default NEmbd/NHead); even, at most 256
	NFF       int      // feed_forward_length: FFN hidden size
	NVocab    int      // tokenizer.ggml.tokens count, else vocab_size
	NRot      int      // rotary dimensions per head
	RopeBase  float32  // rope.freq_base (default 10000)
	RopeNeoX  bool     // GPT-NeoX rotary pairing (i, i + NRot/2) rather than adjacent pairs
	RopeScale float32  // linear RoPE scaling of positions (1: none); Gemma 3: global layers only
	YaRN      gpu.YaRN // YaRN scaling, when the file asks for it

	// Gemma's differences from llama.
	EmbedScale    float32 // multiplies token embeddings (0: none)
	AttnScale     float32 // multiplies q.k (default 1/sqrt(HeadDim))
	AttnSoftCap   float32 // > 0: attention scores soft-capped (Gemma 2)
	FinalSoftCap  float32 // > 0: logits soft-capped (Gemma 2)
	SlidingWindow int     // > 0: window of the sliding-window layers
	SWAPattern    int     // layer il slides when il % SWAPattern < SWAPattern-1 (0: none)
	RopeBaseSWA   float32 // RoPE base of sliding-window layers (0: RopeBase)
	GELU          bool    // GELU-gated FFN instead of SiLU
	// Gemma 4's differences from Gemma 3 (arch_gemma4.go).
	SWALayers  []bool // per layer: a sliding-window layer (nil: SWAPattern says)
	HeadDimSWA int    // sliding layers' head size (0: HeadDim)
	NRotSWA    int    // sliding layers' rotated dimensions (0: NRot)
	KVLayers   int    // layers from this one on read an earlier layer's cache (0: none do)
	VNorm      bool   // values RMS-normalised per head (no weight) before the cache
	DenseMoE   bool   // a dense feed-forward of NFF beside the experts (Gemma 4 26B-A4B)

	// Mixture of experts (NExpert 0: a dense feed-forward in every layer); see block_moe.go.
	NExpert      int     // expert_count
	NExpertUsed  int     // expert_used_count: experts each token goes through
	NFFExpert    int     // expert_feed_forward_length: an expert's hidden size (default NFF)
	NFFShared    int     // expert_shared_feed_forward_length: the shared expert's (default NFFExpert)
	ExpertGating Gating  // how router logits become the experts' weights
	ExpertNorm   bool    // the chosen experts' weights are normalised to sum 1
	ExpertScale  float32 // expert_weights_scale: multiplies the weights (1: none)
	// SwiGLUOAI is gpt-oss's clamped SwiGLU (swiglu_oai, alpha 1.702, limit 7) in the experts.
	SwiGLUOAI bool

	// Hybrid recurrent models (qwen35): Gated DeltaNet layers beside attention; see
	// block_recurrent.go. Recurrent is nil for other models.
	Recurrent   []bool // per layer: a Gated DeltaNet layer (else attention)
	SSMConv     int    // ssm.conv_kernel: the short convolution's taps
	SSMHeadDim  int    // ssm.state_size: a key and value head's size (S_k = S_v)
	SSMKeyHeads int    // ssm.group_count: q and k heads
	SSMValHeads int    // ssm.time_step_rank: v heads, each with a state matrix
	GatedAttn   bool   // attn_q holds each head's q rows then its output gate's (qwen35)
	IMRoPE      bool   // interleaved M-RoPE sections (gpu.Rope.Interleaved)
	NextNLayers int    // nextn_predict_layers: trailing multi-token-prediction blocks, not run

	// MRope are Qwen2-VL's M-RoPE sections (rope.dimension_sections): the rotated pairs that
	// turn by a token's t, h, w and e positions (Batch.MPos); all 0 without M-RoPE.
	MRope [4]int

	// Encoders (BERT): no causal mask, no RoPE, LayerNorm, and a pooled embedding as output.
	Encoder bool
	Causal  bool // an encoder whose file asks for a causal mask (attention.causal true)
	// Pooling is the file's <arch>.pooling_type, PoolNone when it has none (llama.cpp's
	// default, which --pooling overrides).
	Pooling   Pooling
	NormEps   float32 // LayerNorm epsilon
	RMSEps    float32 // attention.layer_norm_rms_epsilon (default 1e-5)
	NCtxTrain int     // context_length the model was trained with (default 2048); BERT's position limit
	FileType  string  // general.file_type as llama.cpp names it ("mostly Q4_K - Medium"), else guessed
	ChatTmpl  string  // tokenizer.chat_template (Jinja), "" when the file has none
	// RerankTmpl is tokenizer.chat_template.rerank: a reranker's prompt with {query} and
	// {document} placeholders, or "" when the file has none.
	RerankTmpl string
	// TensorSize is the bytes of all tensor data in the file, for load progress.
	TensorSize uint64
	// DeviceSize is what the tensors take on the device: matrices with their blocks padded to
	// whole words and their grids (gpu.PackedBytes), vectors as f32 (EstimateFootprint's).
	DeviceSize uint64
}

// ReadConfig reads and checks the hyperparameters: the keys every architecture shares, then
// the file's architecture's own (arch_*.go); errors name the missing or bad key, or list the
// architectures this build runs.
func ReadConfig(f *gguf.File) (Config, error) {
	a, err := lookupArch(f.Architecture())
	if err != nil {
		return Config{}, err
	}
	c := Config{Arch: a.name}
	k := keys{f: f, arch: a.name}
	if err := readCommon(k, &c); err != nil {
		return Config{}, err
	}
	if a.hparams != nil {
		if err := a.hparams(k, &c); err != nil {
			return Config{}, err
		}
	}
	if err := checkShape(k, &c); err != nil {
		return Config{}, err
	}
	if err := checkExperts(k, &c); err != nil {
		return Config{}, err
	}
	return c, nil
}

// readCommon reads the keys llama.cpp's load_hparams reads for every architecture, with its
// defaults.
func readCommon(k keys, c *Config) error {
	f, arch := k.f, k.arch
	c.Name, _ = f.String("general.name")
	c.ChatTmpl, _ = f.String("tokenizer.chat_template")
	c.RerankTmpl, _ = f.String("tokenizer.chat_template.rerank")
	for _, r := range []struct {
		key string
		dst *int
	}{
		{"embedding_length", &c.NEmbd},
		{"block_count", &c.NLayer},
		{"attention.head_count", &c.NHead},
	} {
		if err := k.required(r.key, r.dst); err != nil {
			return err
		}
	}
	k.uint("feed_forward_length", &c.NFF)
	c.NKVHead = c.NHead
	k.uint("attention.head_count_kv", &c.NKVHead)
	if c.NKVHead == 0 || c.NHead%c.NKVHead != 0 {
		return fmt.Errorf("model: %s.attention.head_count_kv = %d does not divide head_count %d", arch, c.NKVHead, c.NHead)
	}
	c.HeadDim = c.NEmbd / c.NHead
	k.uint("attention.key_length", &c.HeadDim)
	if c.HeadDim == 0 || c.HeadDim%2 != 0 || c.HeadDim > 256 {
		return fmt.Errorf("model: head dimension %d unsupported (must be even and at most 256)", c.HeadDim)
	}
	c.NRot = c.HeadDim
	k.uint("rope.dimension_count", &c.NRot)
	c.RopeBase = 10000
	k.float("rope.freq_base", &c.RopeBase)
	if v, ok := f.Uint(arch + ".pooling_type"); ok {
		if v > uint64(PoolRank) {
			return fmt.Errorf("model: %s.pooling_type %d not supported (supported: 0 none, 1 mean, 2 cls, 3 last, 4 rank)", arch, v)
		}
		c.Pooling = Pooling(v)
	}
	c.RMSEps = 1e-5
	k.float("attention.layer_norm_rms_epsilon", &c.RMSEps)
	// As llama.cpp: the scaling type defaults to linear, the factor may come from the older
	// rope.scale_linear key, and only "none" turns a factor off.
	c.RopeScale = 1
	factor, ok := f.Float(arch + ".rope.scaling.factor")
	if !ok {
		factor, ok = f.Float(arch + ".rope.scale_linear")
	}
	t, _ := f.String(arch + ".rope.scaling.type")
	switch t {
	case "none":
	case "", "linear", "yarn":
		if ok && factor > 0 {
			c.RopeScale = float32(1 / factor)
		}
		if t == "yarn" {
			c.YaRN = readYaRN(f, arch, c.NRot, c.RopeBase)
		}
	default:
		return fmt.Errorf("model: %s.rope.scaling.type %q not supported yet (supported: none, linear, yarn; Llama 3 scaling through rope_freqs)", arch, t)
	}
	for _, name := range []string{"rope_factors_long.weight", "rope_factors_short.weight"} {
		if _, ok := f.Tensor(name); ok {
			return fmt.Errorf("model: %s: LongRoPE scaling not supported yet", name)
		}
	}
	c.AttnScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	c.NCtxTrain = 2048
	k.uint("context_length", &c.NCtxTrain)
	if c.NCtxTrain <= 0 {
		c.NCtxTrain = 2048
	}
	if toks, ok := f.Strings("tokenizer.ggml.tokens"); ok {
		c.NVocab = len(toks)
	}
	if v, ok := f.Uint(arch + ".vocab_size"); ok && c.NVocab == 0 {
		c.NVocab = int(v)
	}
	c.FileType = fileTypeName(f)
	for i := range f.Tensors {
		c.TensorSize += f.Tensors[i].Size
		c.DeviceSize += deviceSize(&f.Tensors[i])
	}
	readExperts(k, c)
	return nil
}

// checkShape checks the rotary dimensions (an encoder has none) and that a block has a
// feed-forward, dense or experts, once the architecture has had its say.
func checkShape(k keys, c *Config) error {
	if c.NRot > c.HeadDim || c.NRot%2 != 0 {
		return fmt.Errorf("model: %s.rope.dimension_count = %d invalid for head dimension %d", k.arch, c.NRot, c.HeadDim)
	}
	if c.NFF == 0 && c.NExpert == 0 {
		return fmt.Errorf("model: metadata %s.feed_forward_length missing or invalid", k.arch)
	}
	return nil
}

// deviceSize is what tensor t takes on the device once loaded: a vector as f32, a matrix in its
// type packed for the kernels (its file size when no kernel reads the type: the load fails).
func deviceSize(t *gguf.TensorInfo) uint64 {
	if len(t.Shape) <= 1 {
		return 4 * t.NumElements()
	}
	if typ, ok := gpu.WeightTypeByName(t.Type.String()); ok {
		return gpu.PackedBytes(typ, t.Size)
	}
	return t.Size
}

// Pooling is how a model's per-token outputs become one embedding (llama.cpp's enum
// llama_pooling_type, with its numbering).
type Pooling int

// Pooling types.
const (
	// PoolUnspecified defers to the model file's pooling_type (llama.cpp's -1).
	PoolUnspecified Pooling = -1
	// PoolNone keeps one embedding per token.
	PoolNone Pooling = 0
	// PoolMean averages the tokens' outputs.
	PoolMean Pooling = 1
	// PoolCLS takes the first token's output (BERT's [CLS]).
	PoolCLS Pooling = 2
	// PoolLast takes the last token's output.
	PoolLast Pooling = 3
	// PoolRank runs a reranker's classification head on the first token's output.
	PoolRank Pooling = 4
)

var poolingNames = []string{"none", "mean", "cls", "last", "rank"}

// String is the name llama.cpp's --pooling takes ("unspecified" for PoolUnspecified).
func (p Pooling) String() string {
	if p >= 0 && int(p) < len(poolingNames) {
		return poolingNames[p]
	}
	if p == PoolUnspecified {
		return "unspecified"
	}
	return fmt.Sprintf("pooling(%d)", int(p))
}

// ParsePooling reads a --pooling value: none, mean, cls, last or rank.
func ParsePooling(name string) (Pooling, error) {
	for i, n := range poolingNames {
		if n == name {
			return Pooling(i), nil
		}
	}
	return PoolUnspecified, fmt.Errorf("pooling %q not supported (supported: %s)", name, strings.Join(poolingNames, ", "))
}

// readYaRN reads YaRN's settings with llama.cpp's defaults (ext_factor 1, attn_factor 1,
// beta_fast 32, beta_slow 1) and the original training context.
func readYaRN(f *gguf.File, arch string, nRot int, base float32) gpu.YaRN {
	get := func(key string, def float64) float64 {
		if v, ok := f.Float(arch + ".rope.scaling." + key); ok {
			return v
		}
		return def
	}
	orig := int(get("original_context_length", 4096))
	lo, hi := gpu.YaRNCorrDims(nRot, orig, float64(base), get("yarn_beta_fast", 32), get("yarn_beta_slow", 1))
	return gpu.YaRN{ExtFactor: float32(get("yarn_ext_factor", 1)), AttnFactor: float32(get("yarn_attn_factor", 1)), CorrLo: lo, CorrHi: hi}
}

// SlidingLayer says whether layer il attends within the sliding window.
func (c *Config) SlidingLayer(il int) bool {
	if c.SWALayers != nil {
		return c.SlidingWindow > 0 && il < len(c.SWALayers) && c.SWALayers[il]
	}
	return c.SWAPattern > 0 && c.SlidingWindow > 0 && il%c.SWAPattern < c.SWAPattern-1
}

// attnShape is one attention layer's geometry: its heads' size and rotated dimensions (Gemma
// 4's sliding layers have their own), and the KV heads its projection writes (0 for a layer
// that reads an earlier layer's cache: kvSource).
type attnShape struct{ heads, kvHeads, headDim, nRot int }

// qDim is the width of the layer's queries (and of its attention output).
func (s attnShape) qDim() int { return s.heads * s.headDim }

// qkvWidth is the width of the layer's fused [q | k | v] rows.
func (s attnShape) qkvWidth() int { return (s.heads + 2*s.kvHeads) * s.headDim }

// attnShape is layer il's attention geometry.
func (c Config) attnShape(il int) attnShape {
	s := attnShape{heads: c.NHead, kvHeads: c.NKVHead, headDim: c.HeadDim, nRot: c.NRot}
	if c.HeadDimSWA > 0 && c.SlidingLayer(il) {
		s.headDim, s.nRot = c.HeadDimSWA, c.NRotSWA
	}
	if c.kvSource(il) != il {
		s.kvHeads = 0
	}
	return s
}

// kvSource is the layer whose cache layer il attends over: itself, or for Gemma 4's layers
// from KVLayers on the last earlier layer of its kind with a cache of its own (llama.cpp's
// rule: KVLayers-2 for a sliding layer, KVLayers-1 for a global one).
func (c Config) kvSource(il int) int {
	if c.KVLayers <= 0 || il < c.KVLayers {
		return il
	}
	if c.SlidingLayer(il) {
		return c.KVLayers - 2
	}
	return c.KVLayers - 1
}

// maxHeadDim is the widest head of any layer.
func (c Config) maxHeadDim() int { return max(c.HeadDim, c.HeadDimSWA) }

// maxQKV is the widest fused [q | k | v] row and the widest query of any attention layer.
func (c Config) maxQKV() (qkv, q int) {
	for il := range c.NLayer {
		s := c.attnShape(il)
		qkv, q = max(qkv, s.qkvWidth()), max(q, s.qDim())
	}
	return qkv, q
}

// fileTypeName describes general.file_type as llama.cpp does ("all F32", "mostly F16", ...),
// guessing from the matrices' types, as llama.cpp does, when the key is absent.
func fileTypeName(f *gguf.File) string {
	v, ok := f.Uint("general.file_type")
	if !ok {
		return guessFileType(f)
	}
	names := map[uint64]string{
		0: "all F32", 1: "mostly F16", 2: "mostly Q4_0", 3: "mostly Q4_1", 7: "mostly Q8_0",
		8: "mostly Q5_0", 9: "mostly Q5_1", 10: "mostly Q2_K", 11: "mostly Q3_K - Small",
		12: "mostly Q3_K - Medium", 13: "mostly Q3_K - Large", 14: "mostly Q4_K - Small",
		15: "mostly Q4_K - Medium", 16: "mostly Q5_K - Small", 17: "mostly Q5_K - Medium",
		18: "mostly Q6_K", 32: "mostly BF16",
	}
	if n, ok := names[v]; ok {
		return n
	}
	return fmt.Sprintf("file type %d", v)
}

func guessFileType(f *gguf.File) string {
	counts := map[gguf.GGMLType]int{}
	for i := range f.Tensors {
		if len(f.Tensors[i].Shape) >= 2 {
			counts[f.Tensors[i].Type]++
		}
	}
	best, n := gguf.TypeF32, -1
	for t, c := range counts {
		if c > n || (c == n && t < best) {
			best, n = t, c
		}
	}
	if best == gguf.TypeF32 && len(counts) <= 1 {
		return "(guessed) all F32"
	}
	return "(guessed) mostly " + best.String()
}

// MRoped reports whether the model turns by M-RoPE positions (Batch.MPos).
func (c Config) MRoped() bool { return c.MRope != [4]int{} }
