package model

import "fmt"

// qwen35moe: Qwen3.5/3.6 Mixture of Experts (Qwen3.5-35B-A3B, Qwen3.6-35B-A3B), qwen35's hybrid
// of Gated DeltaNet and gated attention layers with, behind post_attention_norm, routed experts
// (softmax gating, the chosen weights normalised) beside a shared expert every token runs,
// gated by sigmoid(x · ffn_gate_inp_shexp), as llama.cpp's src/models/qwen35moe.cpp.
func init() {
	register(&arch{name: "qwen35moe", hparams: qwen35moeHparams, layer: qwen35Layer, block: qwen35Block})
}

// qwen35moeHparams reads qwen35's keys and the expert sizes, which llama.cpp takes as
// n_ff / n_expert_used and n_ff when the file does not give them.
func qwen35moeHparams(k keys, c *Config) error {
	if err := qwen35Hparams(k, c); err != nil {
		return err
	}
	k.uint("expert_feed_forward_length", &c.NFFExpert)
	if c.NFFExpert == 0 && c.NExpertUsed > 0 {
		c.NFFExpert = c.NFF / c.NExpertUsed
	}
	k.uint("expert_shared_feed_forward_length", &c.NFFShared)
	if c.NFFShared == 0 {
		c.NFFShared = c.NFF
	}
	if c.NExpert == 0 {
		return fmt.Errorf("model: metadata %s.expert_count missing or invalid", k.arch)
	}
	return nil
}
