package model

import "fmt"

// qwen2moe: Qwen1.5-MoE and Qwen2-MoE (Qwen2-57B-A14B), qwen2's attention (q, k, v biases,
// NeoX pairs) and in every block experts (softmax gating, the chosen weights not normalised)
// beside a shared expert that every token runs, gated by sigmoid(x · ffn_gate_inp_shexp), as
// llama.cpp's src/models/qwen2moe.cpp.
func init() {
	register(&arch{name: "qwen2moe", hparams: qwen2moeHparams, layer: decoderLayer, block: preNormBlock, stripsLast: true})
}

// qwen2moeHparams reads the expert and shared-expert sizes, which llama.cpp takes as
// n_ff / n_expert_used and n_ff when the file does not give them.
func qwen2moeHparams(k keys, c *Config) error {
	if err := qwen3moeHparams(k, c); err != nil {
		return err
	}
	c.ExpertNorm = false
	k.uint("expert_shared_feed_forward_length", &c.NFFShared)
	if c.NFFShared == 0 {
		c.NFFShared = c.NFF
	}
	if c.NFFShared == 0 {
		return fmt.Errorf("model: %s.expert_shared_feed_forward_length missing or invalid", k.arch)
	}
	return nil
}
