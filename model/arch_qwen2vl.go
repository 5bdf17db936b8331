package model

import "fmt"

// qwen2vl: Qwen2-VL's language model, qwen2's block with M-RoPE: each rotated pair turns by
// one of a token's four positions (t, h, w, e; Batch.MPos), as llama.cpp's
// src/models/qwen2vl.cpp.
func init() {
	register(&arch{name: "qwen2vl", hparams: qwen2vlHparams, layer: decoderLayer, block: preNormBlock})
}

// qwen2vlHparams reads the M-RoPE sections (llama.cpp pads them to four; a pair's section is
// its index modulo their total). The model must rotate whole heads, as llama.cpp asserts
// (n_rot == head_dim).
func qwen2vlHparams(k keys, c *Config) error {
	c.RopeNeoX = true
	key := c.Arch + ".rope.dimension_sections"
	v, ok := k.f.Int32s(key)
	if !ok || len(v) == 0 || len(v) > 4 {
		return fmt.Errorf("model: %s missing or not 1 to 4 integers", key)
	}
	total := 0
	for i, n := range v {
		if n < 0 || n > 1<<16 {
			return fmt.Errorf("model: %s has a section of %d", key, n)
		}
		c.MRope[i] = int(n)
		total += int(n)
	}
	if total == 0 || c.NRot != c.HeadDim {
		return fmt.Errorf("model: %s %v do not fit %d rotated dimensions of %d-wide heads", key, v, c.NRot, c.HeadDim)
	}
	return nil
}
