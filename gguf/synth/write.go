package synth

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/quantize"
)

// weightScale is the standard deviation of the random matrices (synth256's, and a common
// initialisation), small enough that activations stay in range through the layers.
const weightScale = 0.02

// spreadScale is the standard deviation of the biases (qwen2's, bert's) and of the norm
// weights around 1 that are not exactly 1 (qwen3's q/k norms, all of Gemma's and bert's):
// small, but large enough that a forward pass that drops them goes visibly wrong.
const spreadScale = 0.1

// headScale is the standard deviation of a reranker's dense head matrix (cls.weight), about
// 1/sqrt(n_embd) for the tiny preset, so the tanh after it stays in its responsive range; the
// output row (cls.output.weight) is normal(0, 1), so scores spread like a trained reranker's
// logits and documents rank apart by far more than rounding.
const headScale = 0.125

// fillOf returns how the tensor name's values are drawn in a model of arch: mean +
// scale*normal(0, 1). The layer and output norms are exactly 1, as in llama's initialisation,
// except Gemma's, which spread around 1 like trained ones (the GGUF converter has already
// added Gemma's +1 to them), and bert's LayerNorm weights, which spread alike (their biases
// spread around 0 as every bias does). A reranker's head spreads as headScale says. The
// Mixtures of Experts, qwen35 and gemma4 take their own scales (moeScales, generatorScales).
func fillOf(arch, name string) (mean, scale float64) {
	if MoE(arch) || arch == "gemma4" {
		if s, ok := scaleBySuffix(moeScales, name); ok {
			return 0, s
		}
	}
	if hybrid(arch) || arch == "gemma4" {
		if s, ok := scaleBySuffix(generatorScales, name); ok {
			return 0, s
		}
	}
	if arch == "gemma4" && strings.HasSuffix(name, "layer_output_scale.weight") {
		return 0.75, 0.1 // a block's output kept at about its size
	}
	if arch == "gemma4" && strings.HasSuffix(name, "ffn_gate_inp.scale") {
		return 1, spreadScale // the router input's per-column scale, around 1
	}
	switch {
	case name == "cls.weight":
		return 0, headScale
	case name == "cls.output.weight":
		return 0, 1
	case strings.HasSuffix(name, "attn_q_norm.weight") || strings.HasSuffix(name, "attn_k_norm.weight"):
		return 1, spreadScale
	case strings.HasSuffix(name, "_norm.weight"):
		if arch == "gemma2" || arch == "gemma3" || arch == "gemma4" || arch == "bert" {
			return 1, spreadScale
		}
		return 1, 0
	case strings.HasSuffix(name, ".bias"):
		return 0, spreadScale
	}
	return 0, weightScale
}

// Tensors lists the model's tensors in file order (convert_hf_to_gguf's: token_embd, each
// layer, output_norm, output) as float32, before the mix assigns their types. Every layer has
// llama's tensors, with the architecture's differences:
//
//   - qwen2: attn_q/attn_k/attn_v biases, after each matrix;
//   - qwen3: attn_q_norm and attn_k_norm, [HeadDim], after attn_q and attn_k;
//   - phi3: one attn_qkv matrix (q, k then v rows) for attn_q/k/v, and no ffn_gate: ffn_up
//     has 2*FF rows, the gate's then the up projection's;
//   - gemma2: post_attention_norm after attn_output and post_ffw_norm after ffn_down (the
//     names llama.cpp gives LLM_TENSOR_ATTN_POST_NORM and LLM_TENSOR_FFN_POST_NORM), and no
//     output (the embeddings are tied);
//   - gemma3: gemma2's, and qwen3's attn_q_norm and attn_k_norm.
//
// bert's are its own; see bertTensors.
func (c Config) Tensors() []quantize.Tensor {
	if c.bert() {
		return c.bertTensors()
	}
	hd := uint64(c.headDim())
	d, q, kv, ff, v := uint64(c.Dim), uint64(c.Heads)*hd, uint64(c.KVHeads)*hd, uint64(c.FF), uint64(c.Vocab)
	arch := c.arch()
	ts := []quantize.Tensor{{Name: "token_embd.weight", Shape: []uint64{d, v}}}
	if c.gemma4() {
		ts = append(ts, quantize.Tensor{Name: "rope_freqs.weight", Shape: []uint64{hd / 2}})
	}
	for i := range c.Layers {
		blk := func(name string, shape ...uint64) {
			ts = append(ts, quantize.Tensor{Name: fmt.Sprintf("blk.%d.%s", i, name), Shape: shape})
		}
		if c.qwen35() || c.gemma4() {
			bt := c.qwen35Tensors
			if c.gemma4() {
				bt = c.gemma4Tensors
			}
			for _, t := range bt(i) {
				blk(t.name, t.shape...)
			}
			continue
		}
		blk("attn_norm.weight", d)
		if arch == "phi3" {
			blk("attn_qkv.weight", d, q+2*kv)
		} else {
			blk("attn_q.weight", d, q)
			switch arch {
			case "qwen2", "qwen2vl", "qwen2moe", "gpt-oss":
				blk("attn_q.bias", q)
			case "qwen3", "qwen3moe", "gemma3":
				blk("attn_q_norm.weight", hd)
			}
			blk("attn_k.weight", d, kv)
			switch arch {
			case "qwen2", "qwen2vl", "qwen2moe", "gpt-oss":
				blk("attn_k.bias", kv)
			case "qwen3", "qwen3moe", "gemma3":
				blk("attn_k_norm.weight", hd)
			}
			blk("attn_v.weight", d, kv)
			if c.qwen2() || arch == "qwen2moe" || arch == "gpt-oss" {
				blk("attn_v.bias", kv)
			}
		}
		blk("attn_output.weight", q, d)
		if c.gemma() {
			blk("post_attention_norm.weight", d)
		}
		if c.moe() {
			for _, t := range c.moeTensors() {
				blk(t.name, t.shape...)
			}
			continue
		}
		blk("ffn_norm.weight", d)
		if arch == "phi3" {
			blk("ffn_up.weight", d, 2*ff)
		} else {
			blk("ffn_gate.weight", d, ff)
			blk("ffn_up.weight", d, ff)
		}
		blk("ffn_down.weight", ff, d)
		if c.gemma() {
			blk("post_ffw_norm.weight", d)
		}
	}
	ts = append(ts, quantize.Tensor{Name: "output_norm.weight", Shape: []uint64{d}})
	if !c.gemma() {
		ts = append(ts, quantize.Tensor{Name: "output.weight", Shape: []uint64{d, v}})
	}
	for i := range ts {
		ts[i].Type = gguf.TypeF32
	}
	return ts
}

// Plan returns the tensors with the types the mix gives them, in file order.
func (c Config) Plan() ([]quantize.TensorPlan, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	m := quantize.Model{Arch: c.arch(), Layers: c.Layers, Heads: c.Heads, KVHeads: c.KVHeads}
	return quantize.PlanTensors(m, c.Tensors(), c.Mix)
}

// headerKVs are the general.* keys and the shape keys every architecture has.
func (c Config) headerKVs() []gguf.KV {
	u32 := func(k string, v int) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeUint32, Value: uint32(v)} }
	str := func(k, v string) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeString, Value: v} }
	name := c.Name
	if name == "" {
		name = "synth"
	}
	a := c.arch()
	return []gguf.KV{
		str("general.architecture", a),
		str("general.name", name),
		u32("general.alignment", gguf.DefaultAlignment),
		u32(a+".context_length", c.Ctx),
		u32(a+".embedding_length", c.Dim),
		u32(a+".block_count", c.Layers),
		u32(a+".feed_forward_length", c.FF),
		u32(a+".attention.head_count", c.Heads),
		u32(a+".attention.head_count_kv", c.KVHeads),
	}
}

// KVs returns the metadata, with the key names and value types of llama.cpp's converters
// (as in stories260K.gguf), so llama.cpp loads the file too.
func (c Config) KVs() ([]gguf.KV, error) {
	tokens, scores, types, err := Vocab(c.Vocab)
	if err != nil {
		return nil, err
	}
	u32 := func(k string, v int) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeUint32, Value: uint32(v)} }
	f32 := func(k string, v float32) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeFloat32, Value: v} }
	str := func(k, v string) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeString, Value: v} }
	boolean := func(k string, v bool) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeBool, Value: v} }
	a := c.arch()
	if c.bert() {
		return c.bertKVs(tokens, scores, types), nil
	}
	kvs := c.headerKVs()
	if a == "qwen3" || c.moe() || c.qwen35() || c.gemma() || c.gemma4() || c.headDim() != c.Dim/c.Heads {
		// As llama.cpp's converters write head_dim: Qwen3 and Gemma always, others when it is
		// not Dim/Heads.
		kvs = append(kvs, u32(a+".attention.key_length", c.headDim()), u32(a+".attention.value_length", c.headDim()))
	}
	if c.gemma() || c.gemma4() || a == "gpt-oss" {
		kvs = append(kvs, u32(a+".attention.sliding_window", c.slidingWindow()))
	}
	if c.gemma4() {
		kvs = append(kvs, c.gemma4KVs()...)
	}
	if c.moe() {
		kvs = append(kvs, c.moeKVs()...)
	}
	if c.qwen35() {
		kvs = append(kvs, c.qwen35KVs()...)
	}
	if a == "gemma2" {
		attn, final := c.softCaps()
		kvs = append(kvs, f32(a+".attn_logit_softcapping", attn), f32(a+".final_logit_softcapping", final))
	}
	kvs = append(kvs,
		u32(a+".rope.dimension_count", c.ropeDim()),
		f32(a+".rope.freq_base", c.RopeBase))
	if a == "qwen2vl" {
		sect := c.mropeSections()
		kvs = append(kvs, gguf.KV{Key: a + ".rope.dimension_sections", Type: gguf.TypeArray, Value: gguf.Array{Elem: gguf.TypeInt32, Values: []int32{int32(sect[0]), int32(sect[1]), int32(sect[2]), int32(sect[3])}}})
	}
	if s := c.ropeScale(); s > 0 {
		kvs = append(kvs, str(a+".rope.scaling.type", "linear"), f32(a+".rope.scaling.factor", s))
	}
	return append(kvs,
		f32(a+".attention.layer_norm_rms_epsilon", c.NormEps),
		u32(a+".vocab_size", c.Vocab),
		u32("general.file_type", int(c.Mix.FileType())),
		u32("general.quantization_version", quantize.QuantizationVersion),
		str("tokenizer.ggml.model", "llama"),
		gguf.KV{Key: "tokenizer.ggml.tokens", Type: gguf.TypeArray, Value: gguf.Array{Elem: gguf.TypeString, Values: tokens}},
		gguf.KV{Key: "tokenizer.ggml.scores", Type: gguf.TypeArray, Value: gguf.Array{Elem: gguf.TypeFloat32, Values: scores}},
		gguf.KV{Key: "tokenizer.ggml.token_type", Type: gguf.TypeArray, Value: gguf.Array{Elem: gguf.TypeInt32, Values: types}},
		u32("tokenizer.ggml.unknown_token_id", 0),
		u32("tokenizer.ggml.bos_token_id", 1),
		u32("tokenizer.ggml.eos_token_id", 2),
		boolean("tokenizer.ggml.add_bos_token", true),
		boolean("tokenizer.ggml.add_eos_token", false),
		boolean("tokenizer.ggml.add_space_prefix", true),
	), nil
}

// Write generates the model and writes it to w as GGUF. Tensors are generated and converted
// one batch of rows at a time on all CPUs, so memory stays small at any model size; each row
// draws from its own PCG stream keyed by seed, tensor and row, so the bytes depend only on the
// configuration. Matrices are normal(0, 0.02) rounded to float16 (so F32 and F16 files hold the
// same values), layer norms are 1, and qwen2's and bert's biases normal(0, 0.1) and qwen3's
// q/k norms and all of Gemma's and bert's norm weights 1 + normal(0, 0.1), also rounded to
// float16 (though stored as F32).
// progress, if not nil, is called after each tensor.
func Write(w io.Writer, c Config, progress func(quantize.Progress)) (quantize.Summary, error) {
	kvs, srcs, sum, err := c.sources(progress)
	if err == nil {
		err = gguf.WriteStream(w, kvs, srcs)
	}
	return *sum, err
}

// WriteFile writes the model to path, through a temporary file renamed into place once
// complete.
func WriteFile(path string, c Config, progress func(quantize.Progress)) (quantize.Summary, error) {
	kvs, srcs, sum, err := c.sources(progress)
	if err == nil {
		err = gguf.WriteFileStream(path, kvs, srcs)
	}
	return *sum, err
}

// sources returns the metadata and the tensor generators; the Summary fills in as they run.
func (c Config) sources(progress func(quantize.Progress)) ([]gguf.KV, []gguf.TensorSource, *quantize.Summary, error) {
	sum := &quantize.Summary{}
	plans, err := c.Plan()
	if err != nil {
		return nil, nil, sum, err
	}
	kvs, err := c.KVs()
	if err != nil {
		return nil, nil, sum, err
	}
	sum.Plans = plans
	srcs := make([]gguf.TensorSource, len(plans))
	for i, p := range plans {
		if p.Fallback() {
			sum.Fallbacks++
		}
		srcs[i] = gguf.TensorSource{Name: p.Name, Shape: p.Shape, Type: p.To, Write: func(w io.Writer) error {
			rowLen := p.Shape[0]
			if err := quantize.Rows(w, p.To, rowLen, p.Elements()/rowLen, fillFunc(c.Seed, i, rowLen, c.arch(), p.Name)); err != nil {
				return fmt.Errorf("synth: tensor %s: %w", p.Name, err)
			}
			size := p.Size()
			sum.Elements += p.Elements()
			sum.OldSize += 4 * p.Elements()
			sum.NewSize += size
			if progress != nil {
				progress(quantize.Progress{Index: i + 1, Count: len(plans), Plan: p, OldSize: 4 * p.Elements(), NewSize: size})
			}
			return nil
		}}
	}
	return kvs, srcs, sum, nil
}

// fillFunc returns the row generator for tensor number index, named name, of a model of arch:
// seeded noise as fillOf says, or ones for llama's layer norms.
func fillFunc(seed uint64, index int, rowLen uint64, arch, name string) func([]float32, uint64) error {
	mean, scale := fillOf(arch, name)
	f := fill(seed, index, rowLen, mean, scale)
	if name == "rope_freqs.weight" && arch == "gemma4" {
		return func(dst []float32, _ uint64) error { // proportional RoPE: the first half of the pairs turn
			for i := range dst {
				dst[i] = 1
				if uint64(i)%rowLen >= rowLen/2 {
					dst[i] = 1e30
				}
			}
			return nil
		}
	}
	if hybrid(arch) && strings.HasSuffix(name, "ssm_a") {
		return negExp(f)
	}
	if name != "output.weight" || !(MoE(arch) || hybrid(arch) || arch == "gemma4") {
		return f
	}
	return func(dst []float32, row uint64) error { // the byte tokens' rows damped (byteRowDamping)
		if err := f(dst, row); err != nil {
			return err
		}
		for r := uint64(0); r < uint64(len(dst))/rowLen; r++ {
			if id := row + r; id >= byteTokens && id < byteTokens+256 {
				for j := range dst[r*rowLen : (r+1)*rowLen] {
					dst[r*rowLen+uint64(j)] *= byteRowDamping
				}
			}
		}
		return nil
	}
}

// negExp turns a row generator's values v into -exp(v): qwen35's ssm_a, stored as -exp(A_log),
// rounded to float16 like every drawn value.
func negExp(f func([]float32, uint64) error) func([]float32, uint64) error {
	return func(dst []float32, row uint64) error {
		if err := f(dst, row); err != nil {
			return err
		}
		for i, v := range dst {
			dst[i] = gguf.F16ToF32(gguf.F32ToF16(float32(-math.Exp(float64(v)))))
		}
		return nil
	}
}

// fill returns a row generator of mean + scale*normal(0, 1) rounded to float16 (mean itself
// when scale is 0), each row from its own PCG stream keyed by seed, tensor index and row.
func fill(seed uint64, index int, rowLen uint64, mean, scale float64) func([]float32, uint64) error {
	return func(dst []float32, row uint64) error {
		if scale == 0 {
			for i := range dst {
				dst[i] = float32(mean)
			}
			return nil
		}
		for r := uint64(0); r < uint64(len(dst))/rowLen; r++ {
			rng := rand.New(rand.NewPCG(seed, uint64(index)<<40|(row+r)))
			for j := range dst[r*rowLen : (r+1)*rowLen] {
				dst[r*rowLen+uint64(j)] = gguf.F16ToF32(gguf.F32ToF16(float32(mean + rng.NormFloat64()*scale)))
			}
		}
		return nil
	}
}
