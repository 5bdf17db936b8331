package model

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// The Mixture-of-Experts feed-forward building block, as llama.cpp's build_moe_ffn computes
// it: a router's logits (plus its bias) become per-expert probabilities; each token takes the
// NExpertUsed experts of highest probability (plus a selection bias, used only for choosing);
// their weights are the chosen probabilities (normalised, scaled); each chosen expert's gated
// FFN runs on the token; and the weighted outputs are summed into the residual stream. Only the
// chosen experts' weights are read.

// Gating is how router logits become the experts' weights (llama.cpp's
// llama_expert_gating_func_type).
type Gating = gpu.MoEGating

// moeLayer is one block's experts on the device.
type moeLayer struct {
	router     []proj      // ffn_gate_inp: NExpert rows of NEmbd
	routerBias *gpu.Buffer // ffn_gate_inp.bias (gpt-oss), or nil
	selBias    *gpu.Buffer // exp_probs_b: added to the probabilities for choosing only, or nil
	// gateUp are the experts' gate and up matrices, fused per expert into rows of
	// [gate | up] when they share a type (one product), else one each into its columns.
	gateUp []proj
	down   gpu.Weight
	// Per-expert biases (gpt-oss): gate and up concatenated per expert ([gate | up], 2 NFFExpert
	// values an expert) and down (NEmbd an expert); nil without.
	gateUpBias, downBias *gpu.Buffer
	// shared is the shared expert every token runs (qwen2moe), or nil.
	shared *sharedExpert
	// Gemma 4's experts beside a dense FFN: their input and output norms (pre_ffw_norm_2,
	// post_ffw_norm_2), the dense FFN's output norm (post_ffw_norm_1), and the router's input
	// norm weight (ffn_gate_inp.scale / sqrt(n_embd): llama.cpp scales twice); nil otherwise.
	inNorm, outNorm, denseNorm, routerNorm *gpu.Buffer
	ones                                   *gpu.Buffer // an RMS norm's weight of ones (the router's input)
}

// sharedExpert is a dense gated FFN (NFFShared wide) beside the routed experts, its output
// scaled by sigmoid(gate · x) (ffn_gate_inp_shexp) before it joins theirs.
type sharedExpert struct {
	gate         []proj // one row of NEmbd
	gateUp, down []proj
}

// readExperts reads the expert counts every architecture shares (llama.cpp's load_hparams):
// expert_count and expert_used_count; an architecture's hparams reads the rest.
func readExperts(k keys, c *Config) {
	k.uint("expert_count", &c.NExpert)
	k.uint("expert_used_count", &c.NExpertUsed)
	c.ExpertGating, c.ExpertNorm, c.ExpertScale = gpu.GateSoftmax, true, 1
}

// checkExperts checks the expert counts and fills the defaults once the architecture has read
// its keys.
func checkExperts(k keys, c *Config) error {
	if c.NExpert == 0 {
		if c.NExpertUsed != 0 {
			return fmt.Errorf("model: %s.expert_used_count = %d without %s.expert_count", k.arch, c.NExpertUsed, k.arch)
		}
		return nil
	}
	switch {
	case c.NExpert > gpu.MoEMaxExperts:
		return fmt.Errorf("model: %s.expert_count = %d: at most %d experts are supported", k.arch, c.NExpert, gpu.MoEMaxExperts)
	case c.NExpertUsed <= 0 || c.NExpertUsed > c.NExpert || c.NExpertUsed > gpu.MoEMaxUsed:
		return fmt.Errorf("model: %s.expert_used_count = %d invalid for %d experts (at most %d)", k.arch, c.NExpertUsed, c.NExpert, min(c.NExpert, gpu.MoEMaxUsed))
	}
	if c.NFFExpert == 0 {
		c.NFFExpert = c.NFF
	}
	if c.NFFExpert == 0 {
		return fmt.Errorf("model: %s.expert_feed_forward_length missing or invalid", k.arch)
	}
	return nil
}

// loadMoE loads block il's router and experts, checking every shape against the expert
// counts: a router without experts, or experts of another count, is an error naming the
// tensor.
func loadMoE(l *loader, c *Config, il int) (*moeLayer, error) {
	p := blk(il)
	if c.NExpert == 0 {
		return nil, fmt.Errorf("model: tensor %q: a router, but %s.expert_count is missing", p+"ffn_gate_inp.weight", c.Arch)
	}
	e := &moeLayer{}
	var err error
	router, err := l.matrix(p+"ffn_gate_inp.weight", c.NExpert, c.NEmbd)
	if err != nil {
		return nil, err
	}
	e.router = []proj{{w: router}}
	if l.hasTensor(p + "ffn_gate_inp.bias") {
		if e.routerBias, err = l.vector(p+"ffn_gate_inp.bias", c.NExpert); err != nil {
			return nil, err
		}
	}
	if l.hasTensor(p + "exp_probs_b.bias") {
		if e.selBias, err = l.vector(p+"exp_probs_b.bias", c.NExpert); err != nil {
			return nil, err
		}
	}
	ff := c.NFFExpert
	if l.hasTensor(p + "ffn_gate_up_exps.weight") {
		w, err := l.experts(p+"ffn_gate_up_exps.weight", c.NExpert, 2*ff, c.NEmbd)
		if err != nil {
			return nil, err
		}
		e.gateUp = []proj{{w: w}}
	} else if e.gateUp, err = l.fusedExperts([]string{p + "ffn_gate_exps.weight", p + "ffn_up_exps.weight"}, c.NExpert, ff, c.NEmbd); err != nil {
		return nil, err
	}
	if e.down, err = l.experts(p+"ffn_down_exps.weight", c.NExpert, c.NEmbd, ff); err != nil {
		return nil, err
	}
	if l.hasTensor(p + "ffn_gate_inp_shexp.weight") {
		if e.shared, err = loadShared(l, c, p); err != nil {
			return nil, err
		}
	}
	if l.hasTensor(p + "ffn_gate_exps.bias") {
		if e.gateUpBias, err = l.expertBiases(p+"ffn_gate_exps.bias", p+"ffn_up_exps.bias", c.NExpert, ff); err != nil {
			return nil, err
		}
		if e.downBias, err = l.expertBiases(p+"ffn_down_exps.bias", "", c.NExpert, c.NEmbd); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// loadShared loads a block's shared expert: its sigmoid gate and its dense gated FFN.
func loadShared(l *loader, c *Config, p string) (*sharedExpert, error) {
	if c.NFFShared == 0 {
		return nil, fmt.Errorf("model: tensor %q: a shared expert, but no %s.expert_shared_feed_forward_length", p+"ffn_gate_inp_shexp.weight", c.Arch)
	}
	sh := &sharedExpert{}
	gate, err := l.matrix(p+"ffn_gate_inp_shexp.weight", 1, c.NEmbd)
	if err != nil {
		return nil, err
	}
	sh.gate = []proj{{w: gate}}
	if sh.gateUp, err = l.fused([]string{p + "ffn_gate_shexp.weight", p + "ffn_up_shexp.weight"}, []int{c.NFFShared, c.NFFShared}, c.NEmbd); err != nil {
		return nil, err
	}
	down, err := l.matrix(p+"ffn_down_shexp.weight", c.NEmbd, c.NFFShared)
	if err != nil {
		return nil, err
	}
	sh.down = []proj{{w: down}}
	return sh, nil
}

// experts loads a 3-D expert tensor (ggml shape [cols, rows, experts]) in its own format.
func (l *loader) experts(name string, experts, rows, cols int) (gpu.Weight, error) {
	t, err := l.tensor(name, cols, rows, experts)
	if err != nil {
		return gpu.Weight{}, err
	}
	typ, ok := gpu.WeightTypeByName(t.Type.String())
	if !ok {
		return gpu.Weight{}, unsupportedType(t)
	}
	w, err := l.dev.UploadExperts(t.Name, typ, experts, rows, cols, l.f.TensorData(t))
	if err != nil {
		return gpu.Weight{}, fmt.Errorf("model: %w", err)
	}
	l.keep(w, t)
	return w, nil
}

// fusedExperts loads the gate and up expert tensors (rows each per expert): fused per expert
// into one weight of [gate | up] rows when they share a type, else one weight each writing
// its columns of the fused row.
func (l *loader) fusedExperts(names []string, experts, rows, cols int) ([]proj, error) {
	infos := make([]*gguf.TensorInfo, len(names))
	for i, name := range names {
		t, err := l.tensor(name, cols, rows, experts)
		if err != nil {
			return nil, err
		}
		infos[i] = t
	}
	if infos[0].Type != infos[1].Type {
		var out []proj
		for i, name := range names {
			w, err := l.experts(name, experts, rows, cols)
			if err != nil {
				return nil, err
			}
			out = append(out, proj{w: w, col: i * rows})
		}
		return out, nil
	}
	typ, ok := gpu.WeightTypeByName(infos[0].Type.String())
	if !ok {
		return nil, unsupportedType(infos[0])
	}
	w, err := l.dev.UploadExpertsFused(names[0]+"+"+names[1], typ, experts, []int{rows, rows}, cols,
		[][]byte{l.f.TensorData(infos[0]), l.f.TensorData(infos[1])})
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	l.keep(w, infos...)
	return []proj{{w: w}}, nil
}

// expertBiases loads per-expert biases (ggml shape [n, experts]) as f32, expert by expert;
// with a second tensor (up's, beside gate's) each expert's two rows side by side.
func (l *loader) expertBiases(name, second string, experts, n int) (*gpu.Buffer, error) {
	t, a, err := l.floats(name, n, experts)
	if err != nil {
		return nil, err
	}
	if second == "" {
		return l.upload(t, gpu.Bytes(a))
	}
	l.progressed(t)
	t2, b, err := l.floats(second, n, experts)
	if err != nil {
		return nil, err
	}
	all := make([]float32, 0, 2*len(a))
	for e := range experts {
		all = append(all, a[e*n:(e+1)*n]...)
		all = append(all, b[e*n:(e+1)*n]...)
	}
	return l.upload(t2, gpu.Bytes(all))
}

// moeBlock records block il's experts over the residual stream: the norm, the router and
// the choice of experts, each chosen expert's gated FFN, and the weighted sum added to the
// stream.
func (m *Model) moeBlock(p *pass, il int) {
	c, s, r, n := m.Config, &m.scratch, p.r, p.n
	ly := &m.layers[il]
	e := ly.moe
	k, ff := c.NExpertUsed, c.NFFExpert
	na := n * k // assignments: token t's slot j is t*k + j
	m.normProject(r, ly.ffnNorm, e.router, nil, n, s.moeLogits, c.NExpert)
	r.MoERoute(s.moeLogits, n, c.NExpert, k, gpu.MoERouting{Gating: c.ExpertGating, Norm: c.ExpertNorm, Scale: c.ExpertScale, Bias: e.selBias, LogitBias: e.routerBias},
		s.moeIDs, s.moeWeights)
	b := gpu.MoEBatch{IDs: s.moeIDs, Plan: s.moePlan, Tokens: n, K: k, Experts: c.NExpert}
	r.MoEGroup(b) // for a batch: the assignments grouped by expert, for the three products
	m.projectExperts(r, e.gateUp, s.xn, b, false, s.moeGU, 2*ff)
	m.addExpertLora(r, m.layerLora[il].expGateUp, s.xn, b, false, s.moeGU, 2*ff)
	if e.gateUpBias != nil {
		r.AddID(s.moeGU, e.gateUpBias, s.moeIDs, na, 2*ff, 2*ff, 0)
	}
	if c.SwiGLUOAI {
		r.GLUOAI(s.moeGU, s.moeAct, ff, na, 1.702, 7)
	} else {
		r.GLU(s.moeGU, s.moeAct, ff, na, c.GELU)
	}
	m.projectExperts(r, []proj{{w: e.down}}, s.moeAct, b, true, s.moeOut, c.NEmbd)
	m.addExpertLora(r, m.layerLora[il].expDown, s.moeAct, b, true, s.moeOut, c.NEmbd)
	if e.downBias != nil {
		r.AddID(s.moeOut, e.downBias, s.moeIDs, na, c.NEmbd, c.NEmbd, 0)
	}
	if ly.postFFN == nil && e.shared == nil {
		r.MoECombine(s.moeOut, s.moeWeights, n, k, c.NEmbd, s.x, true)
		return
	}
	r.MoECombine(s.moeOut, s.moeWeights, n, k, c.NEmbd, s.tmp, false)
	if e.shared != nil {
		m.sharedBlock(r, e.shared, &m.layerLora[il], n)
	}
	if ly.postFFN != nil {
		r.RMSNormAdd(s.tmp, ly.postFFN, s.x, c.NEmbd, n, c.RMSEps)
		return
	}
	r.Add(s.x, s.tmp, n*c.NEmbd)
}

// sharedBlock adds the shared expert's output, scaled by its sigmoid gate, to the experts' sum
// in s.tmp, in llama.cpp's order ((sum + g·shared), the residual after). The FFN norm's output
// is still in s.xn; the routed experts' buffers are free again and hold the gate and output.
func (m *Model) sharedBlock(r *gpu.Recorder, sh *sharedExpert, lt *loraTerms, n int) {
	c, s := m.Config, &m.scratch
	m.project(r, sh.gateUp, s.xn, 0, n, c.NEmbd, s.gu, 2*c.NFFShared, false)
	m.addLora(r, lt.shGateUp, s.xn, 0, n, c.NEmbd, s.gu, 2*c.NFFShared)
	r.GLU(s.gu, s.ffn, c.NFFShared, n, false)
	m.project(r, sh.down, s.ffn, 0, n, c.NFFShared, s.moeOut, c.NEmbd, false)
	m.addLora(r, lt.shDown, s.ffn, 0, n, c.NFFShared, s.moeOut, c.NEmbd)
	m.project(r, sh.gate, s.xn, 0, n, c.NEmbd, s.moeLogits, 1, false)
	// The gate's sigmoid, as a route to the one "expert" with sigmoid gating, unnormalised.
	r.MoERoute(s.moeLogits, n, 1, 1, gpu.MoERouting{Gating: gpu.GateSigmoid}, s.moeIDs, s.moeWeights)
	r.MoECombine(s.moeOut, s.moeWeights, n, 1, c.NEmbd, s.tmp, true)
}

// projectExperts runs the chosen experts' projections of x into the assignments' rows of y
// (yStride wide): x holds a row per token (the gate and up products) or, with perAssign, a
// row per assignment (down); the activations are rounded as project rounds them.
func (m *Model) projectExperts(r *gpu.Recorder, ps []proj, x *gpu.Buffer, b gpu.MoEBatch, perAssign bool, y *gpu.Buffer, yStride int) {
	m.expertProducts(r, ps, x, b, perAssign, y, yStride, 0)
}

// expertProducts is projectExperts writing the products, or with a nonzero scale adding
// scale times them (an adapter's term, addExpertLora).
func (m *Model) expertProducts(r *gpu.Recorder, ps []proj, x *gpu.Buffer, b gpu.MoEBatch, perAssign bool, y *gpu.Buffer, yStride int, scale float32) {
	rows := b.Tokens
	if perAssign {
		rows *= b.K
	}
	intDotRows := 1 // not grouped: one assignment at a time, the expert's rows packed
	if m.dev.MoEGrouped(b.Tokens, b.K, b.Experts) {
		intDotRows = gpu.GroupedIntDotRows // the plan's tiles
	}
	m.eachRounded(r, ps, x, 0, rows, ps[0].w.Cols, intDotRows, func(p proj, in gpu.Acts) {
		if scale != 0 {
			r.MatMulIDScaledAdd(p.w, in, b, perAssign, y, yStride, p.col, scale)
			return
		}
		r.MatMulID(p.w, in, b, perAssign, y, yStride, p.col, false)
	})
}
