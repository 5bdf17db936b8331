package model

import "github.com/wgpu-llama/wgpu-llama/gpu"

// The Gated DeltaNet building block of the hybrid models (qwen35): a linear-attention mixer
// whose memory of a sequence is a recurrent state (a short convolution's last inputs and a
// matrix per value head, kept per sequence in the cache: recurrent_state.go) instead of keys
// and values, as llama.cpp's build_layer_attn_linear computes it.

// recurrentLayer holds a Gated DeltaNet block's mixer weights.
type recurrentLayer struct {
	// in projects the normed input into rows of [qkv_mixed | z | beta | alpha]: attn_qkv (the
	// conv channels: q, k and v), attn_gate (the output norm's gate), ssm_beta and ssm_alpha
	// (one value per value head each).
	in      []proj
	conv    *gpu.Buffer // ssm_conv1d: each channel's taps, f32
	dtBias  *gpu.Buffer // ssm_dt.bias, per value head
	ssmA    *gpu.Buffer // ssm_a (-exp(A_log)), per value head
	ssmNorm *gpu.Buffer // ssm_norm: the gated output norm's weight, one head wide
	out     []proj      // ssm_out: back to the residual stream
}

// convChannels is the conv's channel count: q and k (SSMKeyHeads heads each) and v.
func (c Config) convChannels() int {
	return 2*c.SSMKeyHeads*c.SSMHeadDim + c.SSMValHeads*c.SSMHeadDim
}

// deltaNetWidth is the width of the mixer's input projection's rows (recurrentLayer.in).
func (c Config) deltaNetWidth() int {
	return c.convChannels() + c.SSMValHeads*c.SSMHeadDim + 2*c.SSMValHeads
}

// loadDeltaNet loads block il's norm and Gated DeltaNet mixer.
func loadDeltaNet(l *loader, c *Config, ly *layer, il int) error {
	p := blk(il)
	var err error
	if ly.attnNorm, err = l.vector(p+"attn_norm.weight", c.NEmbd); err != nil {
		return err
	}
	C, dv, hv := c.convChannels(), c.SSMValHeads*c.SSMHeadDim, c.SSMValHeads
	rl := &recurrentLayer{}
	if rl.in, err = l.fused([]string{p + "attn_qkv.weight", p + "attn_gate.weight", p + "ssm_beta.weight", p + "ssm_alpha.weight"},
		[]int{C, dv, hv, hv}, c.NEmbd); err != nil {
		return err
	}
	for _, v := range []struct {
		dst   **gpu.Buffer
		name  string
		shape []int
	}{{&rl.conv, "ssm_conv1d.weight", []int{c.SSMConv, C}}, {&rl.dtBias, "ssm_dt.bias", []int{hv}}, {&rl.ssmA, "ssm_a", []int{hv}},
		{&rl.ssmNorm, "ssm_norm.weight", []int{c.SSMHeadDim}}} {
		if *v.dst, err = l.vector(p+v.name, v.shape...); err != nil {
			return err
		}
	}
	out, err := l.matrix(p+"ssm_out.weight", c.NEmbd, dv)
	if err != nil {
		return err
	}
	rl.out = []proj{{w: out}}
	ly.rec = rl
	return nil
}

// deltaNetBlock records block il's Gated DeltaNet mixer over the pass's sequences, each
// continuing from its state: the input projections, the gates (beta, g), the convolution with
// SiLU, the L2 norms of q and k, the delta rule, the gated output norm, and ssm_out added to
// the residual stream.
func (m *Model) deltaNetBlock(p *pass, il int) {
	c, s, r, n := m.Config, &m.scratch, p.r, p.n
	rl := m.layers[il].rec
	C, dv, hv, hd, hk := c.convChannels(), c.SSMValHeads*c.SSMHeadDim, c.SSMValHeads, c.SSMHeadDim, c.SSMKeyHeads
	w := c.deltaNetWidth()
	m.normProject(r, m.layers[il].attnNorm, rl.in, nil, n, s.qkv, w)
	r.DeltaGates(s.qkv, gpu.HeadLayout{Stride: w, Col: C + dv + hv}, s.qkv, gpu.HeadLayout{Stride: w, Col: C + dv},
		rl.dtBias, rl.ssmA, s.ssmG, s.ssmBeta, n, hv)
	r.SSMConv(s.qkv, rl.conv, p.kv.conv[il], s.ssmConv, gpu.SSMConvShape{Channels: C, DConv: c.SSMConv, XStride: w, SiLU: true}, p.rec)
	r.L2Norm(s.ssmConv, n, C, 0, 2*hk, hd, c.RMSEps)
	r.DeltaNet(s.ssmConv, s.ssmG, s.ssmBeta, p.kv.ssm[il], s.attn,
		gpu.DeltaNetShape{HeadDim: hd, KHeads: hk, VHeads: hv, Stride: C, KCol: hk * hd, VCol: 2 * hk * hd}, p.rec)
	r.GatedRMSNorm(s.attn, gpu.HeadLayout{Stride: dv}, s.qkv, gpu.HeadLayout{Stride: w, Col: C}, rl.ssmNorm, n, hv, hd, c.RMSEps)
	m.residual(r, rl.out, nil, s.attn, dv, nil, nil, n)
}
