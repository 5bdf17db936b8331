package model

import "github.com/wgpu-llama/wgpu-llama/gpu"

// The feed-forward building block of the decoders: a gated FFN (SiLU or GELU) with gate and
// up fused into one product, or a Mixture of Experts (block_moe.go), behind its norm.

// loadFFN loads block il's feed-forward: its norm (ffn_norm, or normName when the
// architecture names it otherwise) and the dense matrices (gate and up, or Phi-3's one
// ffn_up holding both) or, when the block has a router (ffn_gate_inp), the experts.
func loadFFN(l *loader, c *Config, ly *layer, il int, normName string) error {
	p := blk(il)
	var err error
	if ly.ffnNorm, err = l.vector(p+normName+".weight", c.NEmbd); err != nil {
		return err
	}
	if c.NExpert > 0 || l.hasTensor(p+"ffn_gate_inp.weight") {
		ly.moe, err = loadMoE(l, c, il)
		return err
	}
	return loadDense(l, c, ly, il)
}

// loadDense loads block il's dense feed-forward matrices: gate and up (or Phi-3's one ffn_up
// holding both) and down.
func loadDense(l *loader, c *Config, ly *layer, il int) error {
	p := blk(il)
	var err error
	if l.hasTensor(p + "ffn_gate.weight") {
		ly.gateUp, err = l.fused([]string{p + "ffn_gate.weight", p + "ffn_up.weight"}, []int{c.NFF, c.NFF}, c.NEmbd)
	} else { // Phi-3: one matrix for gate and up
		var w gpu.Weight
		w, err = l.matrix(p+"ffn_up.weight", 2*c.NFF, c.NEmbd)
		ly.gateUp = []proj{{w: w}}
	}
	if err != nil {
		return err
	}
	down, err := l.matrix(p+"ffn_down.weight", c.NEmbd, c.NFF)
	if err != nil {
		return err
	}
	ly.ffnDown = []proj{{w: down}}
	return nil
}

// ffnBlock records block il's feed-forward over the residual stream: the norm, the dense FFN
// or the experts, and the result added to the stream (through Gemma's post-norm when the
// block has one).
func (m *Model) ffnBlock(p *pass, il int) {
	ly := &m.layers[il]
	if ly.moe != nil {
		m.moeBlock(p, il)
		return
	}
	c, s, r, n := m.Config, &m.scratch, p.r, p.n
	if !m.normProjectFused(r, ly.ffnNorm, ly.gateUp, m.layerLora[il].gateUp, n, s.gu, 2*c.NFF) {
		m.normProject(r, ly.ffnNorm, ly.gateUp, m.layerLora[il].gateUp, n, s.gu, 2*c.NFF)
	}
	if ly.postFFN == nil && m.gluDownFused(r, ly.ffnDown, m.layerLora[il].down, n) {
		return
	}
	r.GLU(s.gu, s.ffn, c.NFF, n, c.GELU)
	m.residual(r, ly.ffnDown, m.layerLora[il].down, s.ffn, c.NFF, nil, ly.postFFN, n)
}

// preNormBlock is the block graph of the llama family: attention then feed-forward, each
// behind its RMS norm and added to the residual stream.
func preNormBlock(m *Model, p *pass, il int) {
	m.attentionBlock(p, il)
	if il == len(m.layers)-1 && m.archFor().stripsLast && p.outputs > 0 && p.outputs < p.n {
		p.r.SetOrderTokens(p.outputs)
		defer p.r.SetOrderTokens(0)
	}
	m.ffnBlock(p, il)
}

// decoderLayer loads a llama-family block: attention and feed-forward (ffn_norm before it).
func decoderLayer(l *loader, c *Config, ly *layer, il int) error {
	if err := loadAttention(l, c, ly, il); err != nil {
		return err
	}
	return loadFFN(l, c, ly, il, "ffn_norm")
}
