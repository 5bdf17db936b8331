package synth

import "github.com/wgpu-llama/wgpu-llama/gguf"

// The Mixtures of Experts: qwen3moe (Qwen3-MoE: qwen3's attention, a router and experts in
// place of the dense FFN) and gpt-oss (biases on the attention projections and on the router
// and experts, attention sinks, a sliding window on every other layer, YaRN RoPE), with the
// tensors and keys llama.cpp's converter writes for them.

// moe says whether the architecture's blocks are experts.
func (c Config) moe() bool { return c.arch() == "qwen3moe" || c.arch() == "gpt-oss" }

// experts is expert_count, Experts or 8.
func (c Config) experts() int {
	if c.Experts == 0 {
		return 8
	}
	return c.Experts
}

// expertsUsed is expert_used_count, ExpertsUsed or 2.
func (c Config) expertsUsed() int {
	if c.ExpertsUsed == 0 {
		return 2
	}
	return c.ExpertsUsed
}

// expertFF is expert_feed_forward_length, ExpertFF or FF.
func (c Config) expertFF() int {
	if c.ExpertFF == 0 {
		return c.FF
	}
	return c.ExpertFF
}

// blockTensor is a tensor of a block, its name without the block's prefix.
type blockTensor struct {
	name  string
	shape []uint64
}

// moeTensors are a block's tensors after attn_output, block prefix left out: the FFN norm
// (gpt-oss's named post_attention_norm), the router and the experts' gate, up and down
// matrices ([cols, rows, experts]), and gpt-oss's output bias, sinks and biases.
func (c Config) moeTensors() []blockTensor {
	type tensor = blockTensor
	d, e, ff := uint64(c.Dim), uint64(c.experts()), uint64(c.expertFF())
	if c.arch() != "gpt-oss" {
		return []tensor{
			{"ffn_norm.weight", []uint64{d}},
			{"ffn_gate_inp.weight", []uint64{d, e}},
			{"ffn_gate_exps.weight", []uint64{d, ff, e}},
			{"ffn_up_exps.weight", []uint64{d, ff, e}},
			{"ffn_down_exps.weight", []uint64{ff, d, e}},
		}
	}
	return []tensor{
		{"attn_output.bias", []uint64{d}},
		{"attn_sinks.weight", []uint64{uint64(c.Heads)}},
		{"post_attention_norm.weight", []uint64{d}},
		{"ffn_gate_inp.weight", []uint64{d, e}},
		{"ffn_gate_inp.bias", []uint64{e}},
		{"ffn_gate_exps.weight", []uint64{d, ff, e}},
		{"ffn_gate_exps.bias", []uint64{ff, e}},
		{"ffn_up_exps.weight", []uint64{d, ff, e}},
		{"ffn_up_exps.bias", []uint64{ff, e}},
		{"ffn_down_exps.weight", []uint64{ff, d, e}},
		{"ffn_down_exps.bias", []uint64{d, e}},
	}
}

// moeKVs are the expert keys, and gpt-oss's YaRN scaling (factor 32 over 4096 positions, as
// gpt-oss-20b's file has).
func (c Config) moeKVs() []gguf.KV {
	u32 := func(k string, v int) gguf.KV { return gguf.KV{Key: k, Type: gguf.TypeUint32, Value: uint32(v)} }
	a := c.arch()
	kvs := []gguf.KV{
		u32(a+".expert_count", c.experts()),
		u32(a+".expert_used_count", c.expertsUsed()),
		u32(a+".expert_feed_forward_length", c.expertFF()),
	}
	if a == "gpt-oss" {
		kvs = append(kvs,
			gguf.KV{Key: a + ".rope.scaling.type", Type: gguf.TypeString, Value: "yarn"},
			gguf.KV{Key: a + ".rope.scaling.factor", Type: gguf.TypeFloat32, Value: float32(32)},
			u32(a+".rope.scaling.original_context_length", 4096))
	}
	return kvs
}
