package synth

import (
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// The Mixtures of Experts: qwen3moe (Qwen3-MoE: qwen3's attention, a router and experts in
// place of the dense FFN), qwen2moe (qwen2's attention, experts and a sigmoid-gated shared
// expert of FF rows) and gpt-oss (biases on the attention projections and on the router
// and experts, attention sinks, a sliding window on every other layer, YaRN RoPE), with the
// tensors and keys llama.cpp's converter writes for them.

// MoE says whether arch's blocks are experts (a Mixture of Experts: qwen2moe, qwen3moe,
// gpt-oss, qwen35moe), whose shape the Experts fields set.
func MoE(arch string) bool {
	return arch == "qwen3moe" || arch == "qwen2moe" || arch == "gpt-oss" || arch == "qwen35moe"
}

// moe says whether the architecture's blocks are experts: a Mixture of Experts, or a gemma4
// with Experts set (the 26B-A4B's experts beside the dense FFN).
func (c Config) moe() bool { return MoE(c.arch()) || c.gemma4() && c.Experts > 0 }

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
		ts := []tensor{
			{"ffn_norm.weight", []uint64{d}},
			{"ffn_gate_inp.weight", []uint64{d, e}},
			{"ffn_gate_exps.weight", []uint64{d, ff, e}},
			{"ffn_up_exps.weight", []uint64{d, ff, e}},
			{"ffn_down_exps.weight", []uint64{ff, d, e}},
		}
		if c.arch() == "qwen2moe" || c.arch() == "qwen35moe" { // the shared expert, FF wide, and its gate
			fs := uint64(c.FF)
			ts = append(ts, tensor{"ffn_gate_inp_shexp.weight", []uint64{d}}, tensor{"ffn_gate_shexp.weight", []uint64{d, fs}},
				tensor{"ffn_up_shexp.weight", []uint64{d, fs}}, tensor{"ffn_down_shexp.weight", []uint64{fs, d}})
		}
		return ts
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
	if a == "qwen2moe" || a == "qwen35moe" {
		kvs = append(kvs, u32(a+".expert_shared_feed_forward_length", c.FF))
	}
	if a == "gpt-oss" {
		kvs = append(kvs,
			gguf.KV{Key: a + ".rope.scaling.type", Type: gguf.TypeString, Value: "yarn"},
			gguf.KV{Key: a + ".rope.scaling.factor", Type: gguf.TypeFloat32, Value: float32(32)},
			u32(a+".rope.scaling.original_context_length", 4096))
	}
	return kvs
}

// The Mixtures of Experts draw their weights at the scales of the shared references' generator
// (models/moe/make_moe.py) rather than synth's 0.02: embeddings, output rows and routers wide
// enough that a greedy step is decided by a margin, not by rounding, so a file can be checked
// against llama.cpp token for token. The byte tokens' output rows (ids byteTokens ..
// byteTokens+255) are damped by byteRowDamping, so that greedy text stays whole UTF-8
// (llama-server answers /completion with a 500 when its output ends inside a character).
const (
	byteTokens     = 3
	byteRowDamping = 0.05
)

// moeScales are the Mixtures of Experts' standard deviations by name suffix (scaleBySuffix).
var moeScales = []suffixScale{
	{"token_embd.weight", 0.5}, {"output.weight", 0.7},
	{"attn_q.weight", 0.15}, {"attn_k.weight", 0.15}, {"attn_v.weight", 0.15}, {"attn_output.weight", 0.1},
	{"attn_q.bias", 0.1}, {"attn_k.bias", 0.1}, {"attn_v.bias", 0.1}, {"attn_output.bias", 0.05}, {"attn_sinks.weight", 1},
	{"ffn_gate_inp.weight", 0.5}, {"ffn_gate_inp.bias", 0.2},
	{"ffn_gate_exps.weight", 0.15}, {"ffn_up_exps.weight", 0.15}, {"ffn_down_exps.weight", 0.15},
	{"ffn_gate_exps.bias", 0.1}, {"ffn_up_exps.bias", 0.1}, {"ffn_down_exps.bias", 0.05},
	{"ffn_gate_inp_shexp.weight", 0.5}, {"ffn_gate_shexp.weight", 0.15}, {"ffn_up_shexp.weight", 0.15}, {"ffn_down_shexp.weight", 0.15},
}

// suffixScale is a standard deviation for the tensors whose names end in suffix.
type suffixScale struct {
	suffix string
	scale  float64
}

// scaleBySuffix is the scale of the first entry whose suffix ends name; false for none (the
// norms, which keep synth's).
func scaleBySuffix(scales []suffixScale, name string) (float64, bool) {
	for _, s := range scales {
		if strings.HasSuffix(name, s.suffix) {
			return s.scale, true
		}
	}
	return 0, false
}
