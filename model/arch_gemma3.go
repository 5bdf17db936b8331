package model

import "math"

// gemma3: Gemma 3's language model, Gemma 2's block with QK-norm instead of soft-capped
// scores, five sliding-window layers (RoPE base 10000, unscaled) to every global one, as
// llama.cpp's src/models/gemma3.cpp.
func init() {
	register(&arch{name: "gemma3", hparams: gemma3Hparams, layer: gemmaLayer, block: preNormBlock, stripsLast: true})
}

// gemma3Hparams reads Gemma 3's settings with llama.cpp's defaults: a file without a window
// has only global layers.
func gemma3Hparams(k keys, c *Config) error {
	gemmaCommon(c)
	k.uint("attention.sliding_window", &c.SlidingWindow)
	if c.NLayer == 62 { // the 27B model scales queries by n_embd/n_head instead of the head size
		c.AttnScale = float32(1 / math.Sqrt(float64(c.NEmbd/c.NHead)))
	}
	c.SWAPattern = 6
	c.RopeBaseSWA = 10000
	k.float("final_logit_softcapping", &c.FinalSoftCap)
	return nil
}
