package synth

import "github.com/wgpu-llama/wgpu-llama/gguf"

// gemma4 (Gemma 4; with Experts, the 26B-A4B's experts beside the dense FFN): every fourth block global attention (heads of HeadDim, keys for
// values: no attn_v, proportional RoPE through rope_freqs turning half the pairs), the others
// sliding (heads of half that, their own attn_v and RoPE base 10000); the blocks from
// gemma4KVFrom on read the cache of the last earlier block of their kind (no attn_k, attn_v,
// attn_k_norm); QK-norms, sandwich norms, a layer_output_scale each, GELU FFN, a separate
// output matrix and a final soft-cap of 30, with the tensors and keys llama.cpp's converter
// writes (as ../shared/models/gemma4/make_gemma4.py does).

// gemma4Period is the global layers' spacing: block il is global when (il+1) % 4 == 0.
const gemma4Period = 4

// gemma4 says whether the architecture is Gemma 4.
func (c Config) gemma4() bool { return c.arch() == "gemma4" }

// gemma4Global says whether block il is a global (full attention) block.
func gemma4Global(il int) bool { return (il+1)%gemma4Period == 0 }

// gemma4KVFrom is the first block that reads an earlier block's cache: half the blocks,
// rounded down to a whole period (so that the block before it is global and the one before
// that sliding, as llama.cpp's reuse rule wants), at least one period.
func (c Config) gemma4KVFrom() int {
	return max(gemma4Period, c.Layers/2/gemma4Period*gemma4Period)
}

// gemma4Tensors are block il's tensors, block prefix left out.
func (c Config) gemma4Tensors(il int) []blockTensor {
	d, ff, h, kv := uint64(c.Dim), uint64(c.FF), uint64(c.Heads), uint64(c.KVHeads)
	hd := uint64(c.headDim())
	if !gemma4Global(il) {
		hd /= 2
	}
	ts := []blockTensor{{"attn_norm.weight", []uint64{d}}, {"attn_q.weight", []uint64{d, h * hd}}}
	if il < c.gemma4KVFrom() {
		ts = append(ts, blockTensor{"attn_k.weight", []uint64{d, kv * hd}})
		if !gemma4Global(il) {
			ts = append(ts, blockTensor{"attn_v.weight", []uint64{d, kv * hd}})
		}
		ts = append(ts, blockTensor{"attn_k_norm.weight", []uint64{hd}})
	}
	ts = append(ts, blockTensor{"attn_output.weight", []uint64{h * hd, d}}, blockTensor{"attn_q_norm.weight", []uint64{hd}},
		blockTensor{"post_attention_norm.weight", []uint64{d}}, blockTensor{"layer_output_scale.weight", []uint64{1}},
		blockTensor{"ffn_norm.weight", []uint64{d}}, blockTensor{"ffn_gate.weight", []uint64{d, ff}},
		blockTensor{"ffn_up.weight", []uint64{d, ff}}, blockTensor{"ffn_down.weight", []uint64{ff, d}},
		blockTensor{"post_ffw_norm.weight", []uint64{d}})
	if c.Experts > 0 { // the 26B-A4B's experts beside the dense FFN, with their norms and router scale
		e, fe := uint64(c.experts()), uint64(c.expertFF())
		ts = append(ts, blockTensor{"ffn_gate_inp.weight", []uint64{d, e}}, blockTensor{"ffn_gate_inp.scale", []uint64{d}},
			blockTensor{"pre_ffw_norm_2.weight", []uint64{d}}, blockTensor{"post_ffw_norm_1.weight", []uint64{d}},
			blockTensor{"post_ffw_norm_2.weight", []uint64{d}},
			blockTensor{"ffn_gate_exps.weight", []uint64{d, fe, e}}, blockTensor{"ffn_up_exps.weight", []uint64{d, fe, e}},
			blockTensor{"ffn_down_exps.weight", []uint64{fe, d, e}})
	}
	return ts
}

// gemma4KVs are Gemma 4's own keys.
func (c Config) gemma4KVs() []gguf.KV {
	u32 := func(k string, v int) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeUint32, Value: uint32(v)} }
	f32 := func(k string, v float32) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeFloat32, Value: v} }
	a, hd := c.arch(), c.headDim()
	swa := make([]bool, c.Layers)
	for il := range swa {
		swa[il] = !gemma4Global(il)
	}
	return []gguf.KV{
		u32(a+".attention.key_length_swa", hd/2), u32(a+".attention.value_length_swa", hd/2),
		u32(a+".rope.dimension_count_swa", hd/2), f32(a+".rope.freq_base_swa", 10000),
		{Key: a + ".attention.sliding_window_pattern", Type: gguf.TypeArray, Value: gguf.Array{Elem: gguf.TypeBool, Values: swa}},
		u32(a+".attention.shared_kv_layers", c.Layers-c.gemma4KVFrom()),
		u32(a+".embedding_length_per_layer_input", 0),
		f32(a+".final_logit_softcapping", 30),
	}
}

// gemma4RopeFreqs is rope_freqs.weight: Gemma 4's proportional RoPE turns the first half of a
// global head's rotated pairs (factor 1) and leaves the rest still (a factor of 1e30).
func (c Config) gemma4RopeFreqs() []float32 {
	fr := make([]float32, c.headDim()/2)
	for i := range fr {
		fr[i] = 1
		if i >= len(fr)/2 {
			fr[i] = 1e30
		}
	}
	return fr
}
