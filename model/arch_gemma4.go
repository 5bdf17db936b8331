package model

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// gemma4: Gemma 4 dense (31B; E2B and E4B without their per-layer embeddings), as llama.cpp's
// src/models/gemma4.cpp: Gemma 3's sandwich-normed block (QK-norm, post-attention and post-FFN
// norms, GELU, embeddings scaled by sqrt(n_embd), a final soft-cap) with its own sliding and
// global layer pattern, sliding layers with their own head size, rotation and RoPE base,
// global layers with proportional RoPE (rope_freqs) and keys for values when attn_v is
// absent, values RMS-normalised, scores unscaled, the last layers reading an earlier layer's
// cache instead of their own, and each block's output scaled by layer_output_scale.
func init() {
	register(&arch{name: "gemma4", hparams: gemma4Hparams, layer: gemma4Layer, block: gemma4Block})
}

// gemma4Hparams reads Gemma 4's keys as llama_model_gemma4::load_arch_hparams does.
func gemma4Hparams(k keys, c *Config) error {
	gemmaCommon(c)
	c.AttnScale, c.VNorm = 1, true // no pre-attention scaling (self.scaling = 1.0)
	a := k.arch
	if err := k.required("attention.sliding_window", &c.SlidingWindow); err != nil {
		return err
	}
	flags, err := layerFlags(k, "attention.sliding_window_pattern", c.NLayer)
	if err != nil {
		return err
	}
	c.SWALayers = flags
	c.HeadDimSWA, c.NRotSWA, c.RopeBaseSWA = c.HeadDim, c.NRot, c.RopeBase
	k.uint("attention.key_length_swa", &c.HeadDimSWA)
	vSWA, v := c.HeadDimSWA, c.HeadDim
	k.uint("attention.value_length_swa", &vSWA)
	k.uint("attention.value_length", &v)
	k.uint("rope.dimension_count_swa", &c.NRotSWA)
	k.float("rope.freq_base_swa", &c.RopeBaseSWA)
	switch {
	case v != c.HeadDim || vSWA != c.HeadDimSWA:
		return fmt.Errorf("model: %s: value heads (%d, sliding %d) differ from key heads (%d, %d)", a, v, vSWA, c.HeadDim, c.HeadDimSWA)
	case c.HeadDimSWA == 0 || c.HeadDimSWA%2 != 0 || c.HeadDimSWA > 256:
		return fmt.Errorf("model: %s.attention.key_length_swa %d unsupported (must be even and at most 256)", a, c.HeadDimSWA)
	case c.NRotSWA > c.HeadDimSWA || c.NRotSWA%4 != 0:
		return fmt.Errorf("model: %s.rope.dimension_count_swa %d invalid for heads of %d", a, c.NRotSWA, c.HeadDimSWA)
	}
	shared := 0
	k.uint("attention.shared_kv_layers", &shared)
	if shared > 0 {
		if c.KVLayers = c.NLayer - shared; c.KVLayers < 2 {
			return fmt.Errorf("model: %s.attention.shared_kv_layers %d leaves %d of %d layers a cache (at least 2)", a, shared, c.KVLayers, c.NLayer)
		}
	}
	perLayer := 0
	k.uint("embedding_length_per_layer_input", &perLayer)
	if perLayer > 0 {
		return fmt.Errorf("model: %s.embedding_length_per_layer_input %d: per-layer embeddings (Gemma 4 E2B, E4B) are not supported yet", a, perLayer)
	}
	if c.NExpert > 0 {
		return fmt.Errorf("model: %s with %d experts (Gemma 4 26B-A4B) is not supported yet", a, c.NExpert)
	}
	k.float("final_logit_softcapping", &c.FinalSoftCap)
	return nil
}

// layerFlags reads a per-layer boolean key: an array of n flags (booleans or integers), or one
// boolean for every layer.
func layerFlags(k keys, key string, n int) ([]bool, error) {
	full := k.arch + "." + key
	kv, ok := k.f.Lookup(full)
	if !ok {
		return nil, fmt.Errorf("model: metadata %s missing", full)
	}
	flags := make([]bool, n)
	switch v := kv.Value.(type) {
	case bool:
		for i := range flags {
			flags[i] = v
		}
		return flags, nil
	case gguf.Array:
		if b, ok := v.Values.([]bool); ok && len(b) == n {
			return b, nil
		}
		if ints, ok := k.f.Int32s(full); ok && len(ints) == n {
			for i, x := range ints {
				flags[i] = x != 0
			}
			return flags, nil
		}
	}
	return nil, fmt.Errorf("model: %s: want %d flags, one per block", full, n)
}

// gemma4Layer loads a block: attention (a layer reading an earlier layer's cache has no keys
// or values of its own), the sandwich norms, the GELU feed-forward and the output scale.
func gemma4Layer(l *loader, c *Config, ly *layer, il int) error {
	if err := gemmaLayer(l, c, ly, il); err != nil {
		return err
	}
	name := blk(il) + "layer_output_scale.weight"
	if !l.hasTensor(name) {
		return nil
	}
	t, v, err := l.floats(name, 1)
	if err != nil {
		return err
	}
	l.progressed(t)
	ly.outScale = v[0]
	return nil
}

// gemma4Block records a block: attention and feed-forward, each post-normed into the residual
// stream, then the stream scaled by the block's output scale.
func gemma4Block(m *Model, p *pass, il int) {
	m.attentionBlock(p, il)
	m.ffnBlock(p, il)
	if s := m.layers[il].outScale; s != 0 {
		m.flushLora(p.r, p.n) // the adapters' terms belong to the block's output, before the scale
		p.r.Scale(m.scratch.x, p.n*m.Config.NEmbd, s)
	}
}
