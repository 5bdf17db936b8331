package synth

import (
	"cmp"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// qwen35 (Qwen3.5): three of every four blocks Gated DeltaNet linear attention (a conv1d over
// the last tokens and a recurrent delta-rule state), every fourth gated full attention (q
// projected with a gate half, QK-norm, partial interleaved multi-section RoPE), each with a
// dense FFN behind post_attention_norm, with the tensors and keys llama.cpp's converter
// writes (as ../shared/models/hybrid/make_qwen35.py does). The recurrent layers' shape follows
// SSMGroups, SSMHeads and SSMState, by default the attention's: key heads KVHeads, value
// heads Heads, state and head size HeadDim.

// hybridInterval is full_attention_interval: block il is full attention when (il+1) % 4 == 0.
const hybridInterval = 4

// hybridConv is ssm.conv_kernel, the conv1d's taps.
const hybridConv = 4

// qwen35 says whether the architecture is a Qwen3.5 hybrid: qwen35, or qwen35moe (its Mixture
// of Experts: the dense FFN replaced by routed experts and a sigmoid-gated shared expert of FF
// rows, as qwen2moe's).
func (c Config) qwen35() bool { return hybrid(c.arch()) }

// hybrid says whether arch is a Qwen3.5 hybrid.
func hybrid(arch string) bool { return arch == "qwen35" || arch == "qwen35moe" }

// hybridDims are the recurrent layers' sizes: the state (and head) size S, key heads G, value
// heads VH, and the conv1d's channels (q and k for the key heads, v for the value heads).
func (c Config) hybridDims() (s, g, vh, convDim uint64) {
	s, g, vh = uint64(cmp.Or(c.SSMState, c.headDim())), uint64(c.ssmGroups()), uint64(c.ssmHeads())
	return s, g, vh, 2*s*g + s*vh
}

// ssmHeads and ssmGroups are the recurrent layers' value and key heads.
func (c Config) ssmHeads() int  { return cmp.Or(c.SSMHeads, c.Heads) }
func (c Config) ssmGroups() int { return cmp.Or(c.SSMGroups, c.KVHeads) }

// qwen35Tensors are block il's tensors, block prefix left out.
func (c Config) qwen35Tensors(il int) []blockTensor {
	d, hd, ff := uint64(c.Dim), uint64(c.headDim()), uint64(c.FF)
	h, kv := uint64(c.Heads), uint64(c.KVHeads)
	ts := []blockTensor{{"attn_norm.weight", []uint64{d}}, {"post_attention_norm.weight", []uint64{d}}}
	if (il+1)%hybridInterval == 0 {
		ts = append(ts,
			blockTensor{"attn_q.weight", []uint64{d, 2 * h * hd}}, // each head's q rows, then its gate's
			blockTensor{"attn_k.weight", []uint64{d, kv * hd}}, blockTensor{"attn_v.weight", []uint64{d, kv * hd}},
			blockTensor{"attn_output.weight", []uint64{h * hd, d}},
			blockTensor{"attn_q_norm.weight", []uint64{hd}}, blockTensor{"attn_k_norm.weight", []uint64{hd}})
	} else {
		s, _, vh, conv := c.hybridDims()
		ts = append(ts,
			blockTensor{"attn_qkv.weight", []uint64{d, conv}}, blockTensor{"attn_gate.weight", []uint64{d, s * vh}},
			blockTensor{"ssm_conv1d.weight", []uint64{hybridConv, conv}},
			blockTensor{"ssm_dt.bias", []uint64{vh}}, blockTensor{"ssm_a", []uint64{vh}},
			blockTensor{"ssm_beta.weight", []uint64{d, vh}}, blockTensor{"ssm_alpha.weight", []uint64{d, vh}},
			blockTensor{"ssm_norm.weight", []uint64{s}}, blockTensor{"ssm_out.weight", []uint64{s * vh, d}})
	}
	if c.moe() { // the experts behind post_attention_norm
		return append(ts, c.moeTensors()[1:]...)
	}
	return append(ts, blockTensor{"ffn_gate.weight", []uint64{d, ff}}, blockTensor{"ffn_up.weight", []uint64{d, ff}},
		blockTensor{"ffn_down.weight", []uint64{ff, d}})
}

// qwen35KVs are the hybrid's own keys: the recurrent layers' sizes, the attention interval, and
// the interleaved RoPE's sections (of the rotated pairs: t takes what h and w, a quarter
// each, leave).
func (c Config) qwen35KVs() []gguf.KV {
	u32 := func(k string, v uint64) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeUint32, Value: uint32(v)} }
	a := c.arch()
	s, g, vh, _ := c.hybridDims()
	pairs := int32(c.ropeDim() / 2)
	sect := []int32{pairs - 2*(pairs/4), pairs / 4, pairs / 4, 0}
	return []gguf.KV{
		{Key: a + ".rope.dimension_sections", Type: gguf.TypeArray, Value: gguf.Array{Elem: gguf.TypeInt32, Values: sect}},
		u32(a+".ssm.conv_kernel", hybridConv), u32(a+".ssm.inner_size", s*vh), u32(a+".ssm.state_size", s),
		u32(a+".ssm.time_step_rank", vh), u32(a+".ssm.group_count", g), u32(a+".full_attention_interval", hybridInterval),
	}
}

// generatorScales are qwen35's and gemma4's standard deviations by name suffix (scaleBySuffix),
// at the scales of the shared references' generators (make_qwen35.py, make_gemma4.py), so a
// file's greedy steps are decided by margins; ssm_a's is its log's (negExp makes it -exp of the
// draw).
var generatorScales = []suffixScale{
	{"token_embd.weight", 0.5}, {"output.weight", 0.7},
	{"attn_q.weight", 0.15}, {"attn_k.weight", 0.15}, {"attn_v.weight", 0.15}, {"attn_output.weight", 0.1},
	{"attn_qkv.weight", 0.15}, {"attn_gate.weight", 0.15}, {"ssm_conv1d.weight", 0.3}, {"ssm_dt.bias", 0.5},
	{"ssm_beta.weight", 0.15}, {"ssm_alpha.weight", 0.15}, {"ssm_out.weight", 0.1},
	{"ffn_gate.weight", 0.1}, {"ffn_up.weight", 0.1}, {"ffn_down.weight", 0.1}, {"ssm_a", 0.5},
}
