package model

import "fmt"

// qwen2vl: Qwen2-VL's language model, qwen2's block with M-RoPE: each rotated pair turns by
// one of a token's four positions (t, h, w, e; Batch.MPos), as llama.cpp's
// src/models/qwen2vl.cpp.
func init() {
	register(&arch{name: "qwen2vl", hparams: qwen2vlHparams, layer: decoderLayer, block: preNormBlock, stripsLast: true})
}

// qwen2vlHparams reads the M-RoPE sections (llama.cpp pads them to four; a pair's section is
// its index modulo their total). The model must rotate whole heads, as llama.cpp asserts
// (n_rot == head_dim).
func qwen2vlHparams(k keys, c *Config) error {
	c.RopeNeoX = true
	if err := readMRope(k, c); err != nil {
		return err
	}
	if c.NRot != c.HeadDim {
		return fmt.Errorf("model: %s.rope.dimension_sections %v do not fit %d rotated dimensions of %d-wide heads", k.arch, c.MRope, c.NRot, c.HeadDim)
	}
	return nil
}
