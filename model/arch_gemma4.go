package model

import (
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// gemma4: Gemma 4 (31B, 26B-A4B; E2B and E4B without their per-layer embeddings), as llama.cpp's
// src/models/gemma4.cpp: Gemma 3's sandwich-normed block (QK-norm, post-attention and post-FFN
// norms, GELU, embeddings scaled by sqrt(n_embd), a final soft-cap) with its own sliding and
// global layer pattern, sliding layers with their own head size, rotation and RoPE base,
// global layers with proportional RoPE (rope_freqs) and keys for values when attn_v is
// absent, values RMS-normalised, scores unscaled, the last layers reading an earlier layer's
// cache instead of their own, and each block's output scaled by layer_output_scale. The
// 26B-A4B runs experts beside the dense FFN, each with its own norms (gemma4FFN).
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
	if c.NExpert > 0 { // 26B-A4B: experts beside the dense FFN in every block
		c.DenseMoE = true
		k.uint("expert_feed_forward_length", &c.NFFExpert)
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
	if c.DenseMoE {
		if err := loadGemma4Experts(l, c, ly, il); err != nil {
			return err
		}
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

// loadGemma4Experts loads what the 26B-A4B adds to a block whose experts loadFFN loaded: the
// dense FFN beside them, the norms of both outputs and of the experts' input, and the router's
// input scale.
func loadGemma4Experts(l *loader, c *Config, ly *layer, il int) error {
	p := blk(il)
	if l.hasTensor(p + "ffn_down_exps.scale") {
		return fmt.Errorf("model: tensor %q: per-expert output scales are not supported yet", p+"ffn_down_exps.scale")
	}
	if err := loadDense(l, c, ly, il); err != nil {
		return err
	}
	e := ly.moe
	var err error
	for _, v := range []struct {
		dst  **gpu.Buffer
		name string
	}{{&e.inNorm, "pre_ffw_norm_2.weight"}, {&e.outNorm, "post_ffw_norm_2.weight"}, {&e.denseNorm, "post_ffw_norm_1.weight"},
		{&e.routerNorm, "ffn_gate_inp.scale"}} {
		if *v.dst, err = l.vector(p+v.name, c.NEmbd); err != nil {
			return err
		}
	}
	if l.ones == nil {
		ones := make([]float32, c.NEmbd)
		for i := range ones {
			ones[i] = 1
		}
		if l.ones, err = l.dev.Upload("ones", gpu.Bytes(ones)); err != nil {
			return fmt.Errorf("model: %w", err)
		}
		l.bufs = append(l.bufs, l.ones)
	}
	e.ones = l.ones
	return nil
}

// gemma4Block records a block: attention and feed-forward (with the 26B-A4B's experts beside
// it), each post-normed into the residual stream, then the stream scaled by the block's
// output scale.
func gemma4Block(m *Model, p *pass, il int) {
	m.attentionBlock(p, il)
	if m.Config.DenseMoE {
		m.gemma4FFN(p, il)
	} else {
		m.ffnBlock(p, il)
	}
	if s := m.layers[il].outScale; s != 0 {
		m.flushLora(p.r, p.n) // the adapters' terms belong to the block's output, before the scale
		p.r.Scale(m.scratch.x, p.n*m.Config.NEmbd, s)
	}
}

// gemma4FFN records the 26B-A4B's feed-forward: the experts on their own normed input, routed
// from the stream's weightless RMS norm scaled by 1/sqrt(n_embd) and ffn_gate_inp.scale, their
// sum normed; the dense FFN normed; the two added, post-normed and added to the stream, in
// llama.cpp's order.
func (m *Model) gemma4FFN(p *pass, il int) {
	c, s, r, n := m.Config, &m.scratch, p.r, p.n
	ly := &m.layers[il]
	e := ly.moe
	d, k, ff := c.NEmbd, c.NExpertUsed, c.NFFExpert
	m.flushLora(r, n) // the stream is read below by plain norms
	r.RMSNorm(s.x, e.ones, s.tmp, d, n, c.RMSEps)
	r.ScaleRows(s.tmp, e.routerNorm, n, d, 1/float32(math.Sqrt(float64(d))))
	m.project(r, e.router, s.tmp, 0, n, d, s.moeLogits, c.NExpert, false)
	r.MoERoute(s.moeLogits, n, c.NExpert, k, gpu.MoERouting{Gating: c.ExpertGating, Norm: c.ExpertNorm, Scale: c.ExpertScale}, s.moeIDs, s.moeWeights)
	b := gpu.MoEBatch{IDs: s.moeIDs, Plan: s.moePlan, Tokens: n, K: k, Experts: c.NExpert}
	r.MoEGroup(b)
	r.RMSNorm(s.x, e.inNorm, s.xn, d, n, c.RMSEps)
	m.projectExperts(r, e.gateUp, s.xn, b, false, s.moeGU, 2*ff)
	r.GLU(s.moeGU, s.moeAct, ff, n*k, true)
	m.projectExperts(r, []proj{{w: e.down}}, s.moeAct, b, true, s.moeOut, d)
	r.MoECombine(s.moeOut, s.moeWeights, n, k, d, s.tmp, false)
	r.RMSNorm(s.tmp, e.outNorm, s.experts, d, n, c.RMSEps)
	m.normProject(r, ly.ffnNorm, ly.gateUp, m.layerLora[il].gateUp, n, s.gu, 2*c.NFF)
	r.GLU(s.gu, s.ffn, c.NFF, n, true)
	m.project(r, ly.ffnDown, s.ffn, 0, n, c.NFF, s.tmp, d, false)
	m.addLora(r, m.layerLora[il].down, s.ffn, 0, n, c.NFF, s.tmp, d)
	r.RMSNorm(s.tmp, e.denseNorm, s.xn, d, n, c.RMSEps)
	r.Add(s.xn, s.experts, n*d)
	r.RMSNormAdd(s.xn, ly.postFFN, s.x, d, n, c.RMSEps)
}
