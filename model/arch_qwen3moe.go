package model

// qwen3moe: Qwen3-MoE (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B, Qwen3-235B-A22B), qwen3's attention
// with QK-norm and a Mixture of Experts in every block: softmax gating, the chosen weights
// normalised, no shared expert, as llama.cpp's src/models/qwen3moe.cpp.
func init() {
	register(&arch{name: "qwen3moe", hparams: qwen3moeHparams, layer: decoderLayer, block: preNormBlock, stripsLast: true})
}

// qwen3moeHparams reads the expert size, which llama.cpp takes as n_ff / n_expert_used when
// the file does not give it.
func qwen3moeHparams(k keys, c *Config) error {
	c.RopeNeoX = true
	k.uint("expert_feed_forward_length", &c.NFFExpert)
	if c.NFFExpert == 0 && c.NExpertUsed > 0 {
		c.NFFExpert = c.NFF / c.NExpertUsed
	}
	return nil
}
