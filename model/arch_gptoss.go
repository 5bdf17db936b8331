package model

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// gpt-oss: OpenAI's gpt-oss (20b, 120b), as llama.cpp's src/models/openai-moe.cpp: biases on
// the q, k, v and output projections, attention sinks (a learned logit per head in the
// softmax's denominator), layers alternating a sliding window with full attention, YaRN RoPE
// with NeoX pairs, and in every block a Mixture of Experts with biases on the router and the
// experts, the experts chosen on the raw router logits and weighted by a softmax over the
// chosen ones, and a clamped SwiGLU (swiglu_oai). The FFN's norm is named post_attention_norm.
func init() {
	register(&arch{name: "gpt-oss", hparams: gptossHparams, layer: gptossLayer, block: preNormBlock})
}

// gptossHparams reads gpt-oss's keys: the expert size and the sliding window are required,
// the window pattern defaults to every other layer (the even ones slide).
func gptossHparams(k keys, c *Config) error {
	c.RopeNeoX = true
	if err := k.required("expert_feed_forward_length", &c.NFFExpert); err != nil {
		return err
	}
	if err := k.required("attention.sliding_window", &c.SlidingWindow); err != nil {
		return err
	}
	c.SWAPattern = 2
	k.uint("attention.sliding_window_pattern", &c.SWAPattern)
	if c.SWAPattern < 1 {
		return fmt.Errorf("model: %s.attention.sliding_window_pattern = %d invalid", k.arch, c.SWAPattern)
	}
	c.ExpertGating, c.ExpertNorm, c.SwiGLUOAI = gpu.GateSoftmaxWeight, false, true
	return nil
}

// gptossLayer loads a gpt-oss block: attention with its biases and sinks, and the experts
// behind post_attention_norm.
func gptossLayer(l *loader, c *Config, ly *layer, il int) error {
	if err := loadAttention(l, c, ly, il); err != nil {
		return err
	}
	var err error
	if ly.sinks, err = l.vector(blk(il)+"attn_sinks.weight", c.NHead); err != nil {
		return err
	}
	if err := loadFFN(l, c, ly, il, "post_attention_norm"); err != nil {
		return err
	}
	if ly.moe == nil {
		return fmt.Errorf("model: tensor %q missing (gpt-oss blocks are experts)", blk(il)+"ffn_gate_inp.weight")
	}
	return nil
}
