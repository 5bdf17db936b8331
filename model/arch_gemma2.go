package model

import "math"

// gemma2: Gemma 2, llama's block with GELU-gated FFN, scaled embeddings, RMS post-norms on the
// attention and FFN outputs, soft-capped attention scores and logits, and a 4096-token sliding
// window on every other layer, as llama.cpp's src/models/gemma2-iswa.cpp.
func init() {
	register(&arch{name: "gemma2", hparams: gemma2Hparams, layer: gemmaLayer, block: preNormBlock, stripsLast: true})
}

// gemma2Hparams reads Gemma 2's settings with llama.cpp's defaults where the file is silent.
func gemma2Hparams(k keys, c *Config) error {
	gemmaCommon(c)
	c.SlidingWindow = 4096
	k.uint("attention.sliding_window", &c.SlidingWindow)
	if c.NLayer == 46 { // the 27B model scales queries by n_embd/n_head instead of the head size
		c.AttnScale = float32(1 / math.Sqrt(float64(c.NEmbd/c.NHead)))
	}
	c.SWAPattern = 2
	c.AttnSoftCap, c.FinalSoftCap = 50, 30
	k.float("attn_logit_softcapping", &c.AttnSoftCap)
	k.float("final_logit_softcapping", &c.FinalSoftCap)
	return nil
}

// gemmaCommon sets what Gemma 2 and 3 share: NeoX pairs, embeddings scaled by sqrt(n_embd),
// GELU-gated FFN.
func gemmaCommon(c *Config) {
	c.RopeNeoX = true
	c.EmbedScale = float32(math.Sqrt(float64(c.NEmbd)))
	c.GELU = true
}

// gemmaLayer loads a Gemma block: llama's tensors plus the post-norms of the attention and
// FFN outputs.
func gemmaLayer(l *loader, c *Config, ly *layer, il int) error {
	if err := decoderLayer(l, c, ly, il); err != nil {
		return err
	}
	p := blk(il)
	var err error
	if ly.postAttn, err = l.vector(p+"post_attention_norm.weight", c.NEmbd); err != nil {
		return err
	}
	ly.postFFN, err = l.vector(p+"post_ffw_norm.weight", c.NEmbd)
	return err
}
