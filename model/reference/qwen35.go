package reference

import (
	"fmt"
	"math"
	"slices"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
)

// qwen35 (Qwen3.5 dense) as llama.cpp b10587 builds it (src/models/qwen35.cpp,
// src/models/delta-net-base.cpp; ssm_conv, gated_delta_net, l2_norm, rms_norm, softplus and
// rope_multi in ggml/src/ggml-cpu/): a hybrid of Gated DeltaNet linear-attention layers,
// which carry a recurrent state, and gated full-attention layers, which carry a KV cache.
//
// Layer il is recurrent unless (il+1) % full_attention_interval == 0 (interval default 4: layers
// 3, 7, 11, ... attend), or as attention.recurrent_layers says when present. Every layer:
//
//	h   = rmsnorm(x) * attn_norm
//	x   = x + (recurrent ? deltaNet(h) : gatedAttention(h))
//	h   = rmsnorm(x) * post_attention_norm
//	x   = x + (silu(h @ ffn_gate) * (h @ ffn_up)) @ ffn_down
//	logits = (rmsnorm(x) * output_norm) @ output        (token_embd when output is absent)
//
// Every RMSNorm (these, the QK-norms, the gated norm) and the L2 norms use
// attention.layer_norm_rms_epsilon (eps).
//
// deltaNet, per token (S_k = ssm.state_size = S_v = ssm.inner_size / ssm.time_step_rank;
// H_k = ssm.group_count key heads, H_v = ssm.time_step_rank value heads; C = 2*H_k*S_k +
// H_v*S_v conv channels; K = ssm.conv_kernel):
//
//	mixed = h @ attn_qkv                       [C]: q (H_k*S_k), then k (H_k*S_k), then v (H_v*S_v)
//	z     = h @ attn_gate                      [H_v*S_v]
//	beta  = sigmoid(h @ ssm_beta)              [H_v]
//	g     = softplus(h @ ssm_alpha + ssm_dt.bias) * ssm_a   [H_v]  (ssm_a = -exp(A_log), < 0;
//	                                           softplus(x) = x above 20, else ln(1 + e^x))
//	c     = silu(conv_c), conv_c = sum_{i<K} ssm_conv1d[c][i] * in_c[i], where in_c is the
//	        channel's last K-1 inputs (the conv state, oldest first; zeros at the start) then
//	        mixed[c]; the state then drops its oldest value and appends mixed[c]
//	q, k  = c's q and k parts, each head's S_k values divided by max(||.||_2, eps)
//	v     = c's v part
//	for each value head hv (key head hk = hv % H_k: heads tile, they do not group):
//	    S      = S * exp(g[hv])                              S: S_k x S_v, S[i][j]
//	    d[j]   = (v[j] - sum_i S[i][j] k[i]) * beta[hv]
//	    S[i][j] += k[i] * d[j]
//	    o[j]   = (sum_i S[i][j] q[i]) / sqrt(S_v)
//	o     = rmsnorm(o per head of S_v) * ssm_norm * silu(z)  (the gated norm)
//	out   = o @ ssm_out
//
// The state, per recurrent layer, is the conv state, (K-1) x C values (llama.cpp's r_l: channel
// c's K-1 values contiguous, oldest first), and S, H_v x S_v x S_k values (llama.cpp's s_l:
// head hv's matrix stored transposed, element [hv][j][i] = S[i][j]: j the value index).
//
// gatedAttention, per token (n_head heads and n_head_kv KV heads of key_length values):
//
//	qg    = h @ attn_q                 [2*n_head*head_dim]: head by head, its q then its gate
//	q     = rmsnorm(q per head) * attn_q_norm;  k = rmsnorm((h @ attn_k) per head) * attn_k_norm
//	v     = h @ attn_v
//	q, k  = IMRoPE (ropeIMRoPE) over the first rope.dimension_count values of each head
//	o     = causal grouped-query attention (kv head = head / (n_head/n_head_kv)), 1/sqrt(head_dim)
//	out   = (o * sigmoid(gate)) @ attn_output
//
// No biases anywhere. qwen35moe has, in place of the dense FFN, qwen2moe's routed experts
// (softmax over the router's logits, the chosen weights normalised) and its shared expert
// gated by sigmoid(h @ ffn_gate_inp_shexp) (moe.go).

// Hybrids lists the recurrent hybrid architectures Forward also runs (qwen35.go). They are
// kept out of Supported, whose architectures gen's synthetic models and the GPU forward pass
// cover.
var Hybrids = []string{"qwen35", "qwen35moe"}

// qwen35Params are qwen35's settings beyond hparams'.
type qwen35Params struct {
	convKernel int    // ssm.conv_kernel (K)
	headK      int    // ssm.state_size (S_k)
	headV      int    // ssm.inner_size / ssm.time_step_rank (S_v, equal to S_k)
	nKHeads    int    // ssm.group_count (H_k)
	nVHeads    int    // ssm.time_step_rank (H_v)
	sections   [4]int // rope.dimension_sections
	recurrent  []bool // per layer (nLayer of them)
}

// convChannels is the conv's channel count, 2*H_k*S_k + H_v*S_v.
func (c qwen35Params) convChannels() int { return 2*c.nKHeads*c.headK + c.nVHeads*c.headV }

// readQwen35 reads qwen35's keys as llama_model_qwen35::load_arch_hparams does, and trims
// hp.nLayer by nextn_predict_layers (the multi-token-prediction blocks, not run here).
func readQwen35(f *gguf.File, hp *hparams) (qwen35Params, error) {
	var c qwen35Params
	a := hp.arch
	u := func(key string, required bool) (int, error) {
		v, ok := f.Uint(a + "." + key)
		if !ok || v > 1<<24 {
			if required {
				return 0, fmt.Errorf("reference: metadata %s.%s missing or invalid", a, key)
			}
			return 0, nil
		}
		return int(v), nil
	}
	var dInner int
	var err error
	for _, k := range []struct {
		key string
		dst *int
	}{{"ssm.conv_kernel", &c.convKernel}, {"ssm.inner_size", &dInner}, {"ssm.state_size", &c.headK},
		{"ssm.time_step_rank", &c.nVHeads}, {"ssm.group_count", &c.nKHeads}} {
		if *k.dst, err = u(k.key, true); err != nil {
			return c, err
		}
		if *k.dst == 0 {
			return c, fmt.Errorf("reference: %s.%s is 0", a, k.key)
		}
	}
	c.headV = dInner / c.nVHeads
	switch {
	case c.headV*c.nVHeads != dInner:
		return c, fmt.Errorf("reference: %s.ssm.inner_size %d not a multiple of time_step_rank %d", a, dInner, c.nVHeads)
	case c.headV != c.headK:
		return c, fmt.Errorf("reference: %s value head size %d differs from ssm.state_size %d", a, c.headV, c.headK)
	case c.nVHeads%c.nKHeads != 0:
		return c, fmt.Errorf("reference: %s.ssm.group_count %d does not divide time_step_rank %d", a, c.nKHeads, c.nVHeads)
	}

	secs, ok := f.Int32s(a + ".rope.dimension_sections")
	if !ok {
		v, ok1 := f.Uint(a + ".rope.dimension_sections")
		if !ok1 || v > 1<<16 {
			return c, fmt.Errorf("reference: metadata %s.rope.dimension_sections missing", a)
		}
		secs = []int32{int32(v), int32(v), int32(v), int32(v)}
	}
	if len(secs) != 4 {
		return c, fmt.Errorf("reference: %s.rope.dimension_sections has %d values, want 4", a, len(secs))
	}
	for i, s := range secs {
		if s < 0 {
			return c, fmt.Errorf("reference: %s.rope.dimension_sections[%d] = %d", a, i, s)
		}
		c.sections[i] = int(s)
	}
	if c.sections[0]+c.sections[1]+c.sections[2]+c.sections[3] == 0 {
		return c, fmt.Errorf("reference: %s.rope.dimension_sections all 0", a)
	}

	nextn, _ := u("nextn_predict_layers", false)
	if nextn >= hp.nLayer {
		return c, fmt.Errorf("reference: %s.nextn_predict_layers %d not below block_count %d", a, nextn, hp.nLayer)
	}
	nAll := hp.nLayer
	hp.nLayer -= nextn
	c.recurrent = make([]bool, hp.nLayer)
	if kv, ok := f.Lookup(a + ".attention.recurrent_layers"); ok {
		var flags []bool
		switch v := kv.Value.(type) {
		case gguf.Array:
			if b, ok := v.Values.([]bool); ok {
				flags = b
			} else if n, ok := f.Int32s(a + ".attention.recurrent_layers"); ok {
				for _, x := range n {
					flags = append(flags, x != 0)
				}
			}
		case bool:
			flags = slices.Repeat([]bool{v}, nAll)
		}
		if len(flags) != nAll {
			return c, fmt.Errorf("reference: %s.attention.recurrent_layers: want %d flags", a, nAll)
		}
		copy(c.recurrent, flags)
	} else {
		interval, _ := u("full_attention_interval", false)
		if interval == 0 {
			interval = 4
		}
		for il := range c.recurrent {
			c.recurrent[il] = (il+1)%interval != 0
		}
	}
	return c, nil
}

// qwen35Layer is one block's weights as float32 (a matrix of R rows of C values is the GGUF
// tensor of shape [C, R]).
type qwen35Layer struct {
	attnNorm, postNorm []float32 // [nEmbd]: attn_norm, post_attention_norm (the FFN's input norm)

	// Gated DeltaNet (recurrent layers).
	qkv     []float32 // attn_qkv: C rows of nEmbd
	z       []float32 // attn_gate: H_v*S_v rows of nEmbd
	conv    []float32 // ssm_conv1d: C rows of K taps
	dtBias  []float32 // ssm_dt.bias [H_v]
	a       []float32 // ssm_a [H_v] (-exp(A_log))
	beta    []float32 // ssm_beta: H_v rows of nEmbd
	alpha   []float32 // ssm_alpha: H_v rows of nEmbd
	ssmNorm []float32 // ssm_norm [S_v]
	ssmOut  []float32 // ssm_out: nEmbd rows of H_v*S_v

	// Gated attention (the other layers).
	wq           []float32 // attn_q: 2*nHead*headDim rows of nEmbd (per head: q rows, gate rows)
	wk, wv       []float32 // attn_k, attn_v: nKVHead*headDim rows of nEmbd
	qNorm, kNorm []float32 // attn_q_norm, attn_k_norm [headDim]
	wo           []float32 // attn_output: nEmbd rows of nHead*headDim

	gate, up, down []float32 // ffn_gate, ffn_up (nFF rows of nEmbd), ffn_down (nEmbd rows of nFF)
	moe            *MoE      // qwen35moe's experts and shared expert in their place
}

// Qwen35 is a qwen35 model's weights, run token by token with a Qwen35State.
type Qwen35 struct {
	f      *gguf.File
	hp     hparams
	c      qwen35Params
	o      options
	layers []qwen35Layer
	embd   []float32 // token_embd: nVocab rows of nEmbd
	norm   []float32 // output_norm
	out    []float32 // output (or token_embd)
	outNm  string
}

// NewQwen35 reads a qwen35 model's hyperparameters and weights (as float32).
func NewQwen35(f *gguf.File) (*Qwen35, error) { return newQwen35(f, options{}) }

func newQwen35(f *gguf.File, o options) (*Qwen35, error) {
	hp, err := readHparams(f)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(Hybrids, hp.arch) {
		return nil, fmt.Errorf("reference: %s is not qwen35 or qwen35moe", hp.arch)
	}
	return loadQwen35(f, hp, o)
}

func loadQwen35(f *gguf.File, hp hparams, o options) (*Qwen35, error) {
	c, err := readQwen35(f, &hp)
	if err != nil {
		return nil, err
	}
	if hp.extFactor != 0 {
		return nil, fmt.Errorf("reference: qwen35 with YaRN not supported")
	}
	m := &Qwen35{f: f, hp: hp, c: c, o: o, layers: make([]qwen35Layer, hp.nLayer)}
	w := loader{f}
	get := w.getter(&err)
	e := hp.nEmbd
	m.embd = get("token_embd.weight", e, hp.nVocab)
	m.norm = get("output_norm.weight", e)
	if err != nil {
		return nil, err
	}
	m.outNm = "output.weight"
	if m.out, err = w.optional(m.outNm, e, hp.nVocab); err != nil {
		return nil, err
	}
	if m.out == nil {
		m.out, m.outNm = m.embd, "token_embd.weight"
	}
	C, dv := c.convChannels(), c.nVHeads*c.headV
	qDim, kvDim := hp.nHead*hp.headDim, hp.nKVHead*hp.headDim
	for il := range m.layers {
		lw := &m.layers[il]
		n := func(s string) string { return fmt.Sprintf("blk.%d.%s", il, s) }
		lw.attnNorm = get(n("attn_norm.weight"), e)
		lw.postNorm = get(n("post_attention_norm.weight"), e)
		if c.recurrent[il] {
			lw.qkv = get(n("attn_qkv.weight"), e, C)
			lw.z = get(n("attn_gate.weight"), e, dv)
			lw.conv = get(n("ssm_conv1d.weight"), c.convKernel, C)
			lw.dtBias = get(n("ssm_dt.bias"), c.nVHeads)
			lw.a = get(n("ssm_a"), c.nVHeads)
			lw.beta = get(n("ssm_beta.weight"), e, c.nVHeads)
			lw.alpha = get(n("ssm_alpha.weight"), e, c.nVHeads)
			lw.ssmNorm = get(n("ssm_norm.weight"), c.headV)
			lw.ssmOut = get(n("ssm_out.weight"), dv, e)
		} else {
			lw.wq = get(n("attn_q.weight"), e, 2*qDim)
			lw.wk = get(n("attn_k.weight"), e, kvDim)
			lw.wv = get(n("attn_v.weight"), e, kvDim)
			lw.qNorm = get(n("attn_q_norm.weight"), hp.headDim)
			lw.kNorm = get(n("attn_k_norm.weight"), hp.headDim)
			lw.wo = get(n("attn_output.weight"), qDim, e)
		}
		if err != nil {
			return nil, err
		}
		if hp.nExpert > 0 {
			if lw.moe, err = loadMoE(w, hp, n); err != nil {
				return nil, err
			}
			if o.actQuant {
				lw.moe.mm = func(tensor string, first int, wt, b []float32, rows, cols int, x []float32) []float32 {
					return linearLlamaCpp(f, n(tensor), first, wt, b, rows, cols, x, 1)
				}
			}
			continue
		}
		lw.gate = get(n("ffn_gate.weight"), e, hp.nFF)
		lw.up = get(n("ffn_up.weight"), e, hp.nFF)
		lw.down = get(n("ffn_down.weight"), hp.nFF, e)
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Recurrent says which layers are Gated DeltaNet layers (the others attend).
func (m *Qwen35) Recurrent() []bool { return slices.Clone(m.c.recurrent) }

// Qwen35State is one sequence's state: its position (the tokens seen), and per layer, the
// recurrent layers' conv state and delta-rule state, the attention layers' keys and values
// (nil where a layer has none).
type Qwen35State struct {
	Pos int
	// Conv[il]: (K-1) x C values, channel by channel, each channel's last K-1 inputs oldest
	// first (llama.cpp's r_l layout).
	Conv [][]float32
	// SSM[il]: H_v x S_v x S_k values, [hv][j][i] = head hv's S[i][j] (llama.cpp's s_l layout).
	SSM [][]float32
	// K[il], V[il]: Pos rows of nKVHead*headDim keys (after QK-norm and RoPE) and values.
	K, V [][]float32
}

// NewState returns the state before the first token: zero conv and delta-rule states, empty
// caches.
func (m *Qwen35) NewState() *Qwen35State {
	n := len(m.layers)
	s := &Qwen35State{Conv: make([][]float32, n), SSM: make([][]float32, n), K: make([][]float32, n), V: make([][]float32, n)}
	for il, r := range m.c.recurrent {
		if r {
			s.Conv[il] = make([]float32, (m.c.convKernel-1)*m.c.convChannels())
			s.SSM[il] = make([]float32, m.c.nVHeads*m.c.headV*m.c.headK)
		}
	}
	return s
}

// Clone returns a copy of s that shares nothing with it (a checkpoint).
func (s *Qwen35State) Clone() *Qwen35State {
	c := &Qwen35State{Pos: s.Pos}
	cl := func(x [][]float32) [][]float32 {
		out := make([][]float32, len(x))
		for i, v := range x {
			out[i] = slices.Clone(v)
		}
		return out
	}
	c.Conv, c.SSM, c.K, c.V = cl(s.Conv), cl(s.SSM), cl(s.K), cl(s.V)
	return c
}

// Run feeds tokens through the model one at a time from state s, which it advances, and
// returns the logits after each.
func (m *Qwen35) Run(s *Qwen35State, tokens []int32) ([][]float32, error) {
	out := make([][]float32, 0, len(tokens))
	for _, t := range tokens {
		l, err := m.Step(s, t)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// Step feeds one token at position s.Pos, advancing s, and returns the logits. Under
// options.trace it reports this token's values under llama.cpp's names (attn_norm,
// linear_attn_qkv_mixed, z, beta_sigmoid, gate, conv_output_silu, q_conv_predelta,
// k_conv_predelta, attn_output, final_output, linear_attn_out; Qcur_full, Qcur, Kcur, Vcur,
// attn_pregate, attn_gated, attn_output; attn_residual, attn_post_norm, ffn_out, l_out;
// result_norm with il -1), one row each.
func (m *Qwen35) Step(s *Qwen35State, token int32) ([]float32, error) {
	hp := m.hp
	if token < 0 || int(token) >= hp.nVocab {
		return nil, fmt.Errorf("reference: token %d outside the vocabulary of %d", token, hp.nVocab)
	}
	o := m.o
	x := slices.Clone(m.embd[int(token)*hp.nEmbd : int(token+1)*hp.nEmbd])
	for il := range m.layers {
		lw := &m.layers[il]
		mm := func(tensor string, w []float32, rows, cols int, in []float32) []float32 {
			if !o.actQuant {
				return cpuref.MatMul(w, rows, cols, in, 1)
			}
			return linearLlamaCpp(m.f, fmt.Sprintf("blk.%d.%s", il, tensor), 0, w, nil, rows, cols, in, 1)
		}
		h := cpuref.RMSNorm(x, lw.attnNorm, hp.nEmbd, hp.eps)
		o.tr("attn_norm", il, h)
		var a []float32
		if m.c.recurrent[il] {
			a = m.deltaNet(il, lw, s, h, mm)
		} else {
			a = m.gatedAttention(il, lw, s, h, mm)
		}
		x = cpuref.Add(x, a)
		o.tr("attn_residual", il, x)
		h = cpuref.RMSNorm(x, lw.postNorm, hp.nEmbd, hp.eps)
		o.tr("attn_post_norm", il, h)
		var f []float32
		if lw.moe != nil {
			f = lw.moe.Forward(h, 1)
		} else {
			g := mm("ffn_gate.weight", lw.gate, hp.nFF, hp.nEmbd, h)
			u := mm("ffn_up.weight", lw.up, hp.nFF, hp.nEmbd, h)
			f = mm("ffn_down.weight", lw.down, hp.nEmbd, hp.nFF, cpuref.SiLUMul(g, u))
		}
		o.tr("ffn_out", il, f)
		x = cpuref.Add(x, f)
		o.tr("l_out", il, x)
	}
	s.Pos++
	last := cpuref.RMSNorm(x, m.norm, hp.nEmbd, hp.eps)
	o.tr("result_norm", -1, last)
	if o.actQuant {
		return linearLlamaCpp(m.f, m.outNm, 0, m.out, nil, hp.nVocab, hp.nEmbd, last, 1), nil
	}
	return cpuref.MatMul(m.out, hp.nVocab, hp.nEmbd, last, 1), nil
}

type qwen35MM func(tensor string, w []float32, rows, cols int, in []float32) []float32

// deltaNet is a Gated DeltaNet layer's output for one token's normed input h, advancing the
// layer's conv and delta-rule states.
func (m *Qwen35) deltaNet(il int, lw *qwen35Layer, s *Qwen35State, h []float32, mm qwen35MM) []float32 {
	hp, c, o := m.hp, m.c, m.o
	C, dv := c.convChannels(), c.nVHeads*c.headV
	mixed := mm("attn_qkv.weight", lw.qkv, C, hp.nEmbd, h)
	o.tr("linear_attn_qkv_mixed", il, mixed)
	z := mm("attn_gate.weight", lw.z, dv, hp.nEmbd, h)
	o.tr("z", il, z)
	beta := mm("ssm_beta.weight", lw.beta, c.nVHeads, hp.nEmbd, h)
	for i, v := range beta {
		beta[i] = sigmoid1(v)
	}
	o.tr("beta_sigmoid", il, beta)
	g := mm("ssm_alpha.weight", lw.alpha, c.nVHeads, hp.nEmbd, h)
	for i, v := range g {
		g[i] = softplus1(v+lw.dtBias[i]) * lw.a[i]
	}
	o.tr("gate", il, g)

	conv := SSMConvStep(s.Conv[il], lw.conv, mixed, c.convKernel)
	for i, v := range conv {
		conv[i] = silu1(v)
	}
	o.tr("conv_output_silu", il, conv)
	kd := c.nKHeads * c.headK
	q := L2Norm(conv[:kd], c.headK, hp.eps)
	k := L2Norm(conv[kd:2*kd], c.headK, hp.eps)
	v := conv[2*kd:]
	o.tr("q_conv_predelta", il, q)
	o.tr("k_conv_predelta", il, k)

	out := make([]float32, dv)
	S, sv := s.SSM[il], c.headV
	for hv := range c.nVHeads {
		hk := hv % c.nKHeads
		GatedDeltaStep(S[hv*sv*sv:(hv+1)*sv*sv], q[hk*sv:(hk+1)*sv], k[hk*sv:(hk+1)*sv], v[hv*sv:(hv+1)*sv], g[hv], beta[hv], out[hv*sv:(hv+1)*sv])
	}
	o.tr("attn_output", il, out)
	out = GatedRMSNorm(out, lw.ssmNorm, z, c.headV, hp.eps)
	o.tr("final_output", il, out)
	r := mm("ssm_out.weight", lw.ssmOut, hp.nEmbd, dv, out)
	o.tr("linear_attn_out", il, r)
	return r
}

// gatedAttention is a full-attention layer's output for one token's normed input h at
// position s.Pos, appending the token's key and value to the layer's cache.
func (m *Qwen35) gatedAttention(il int, lw *qwen35Layer, s *Qwen35State, h []float32, mm qwen35MM) []float32 {
	hp, o := m.hp, m.o
	hd := hp.headDim
	qDim, kvDim := hp.nHead*hd, hp.nKVHead*hd
	qg := mm("attn_q.weight", lw.wq, 2*qDim, hp.nEmbd, h)
	o.tr("Qcur_full", il, qg)
	q, gate := make([]float32, qDim), make([]float32, qDim)
	for hh := range hp.nHead {
		copy(q[hh*hd:(hh+1)*hd], qg[2*hh*hd:(2*hh+1)*hd])
		copy(gate[hh*hd:(hh+1)*hd], qg[(2*hh+1)*hd:(2*hh+2)*hd])
	}
	q = headNorm(q, lw.qNorm, hd, hp.eps)
	k := headNorm(mm("attn_k.weight", lw.wk, kvDim, hp.nEmbd, h), lw.kNorm, hd, hp.eps)
	v := mm("attn_v.weight", lw.wv, kvDim, hp.nEmbd, h)
	pos := [4]int32{int32(s.Pos), int32(s.Pos), int32(s.Pos), 0} // a text token's (t, h, w, e)
	ropeIMRoPE(q, pos, hp.nHead, hd, hp.nRot, hp.ropeBase, hp.ropeScale, m.c.sections)
	ropeIMRoPE(k, pos, hp.nKVHead, hd, hp.nRot, hp.ropeBase, hp.ropeScale, m.c.sections)
	o.tr("Qcur", il, q)
	o.tr("Kcur", il, k)
	o.tr("Vcur", il, v)
	if o.kvF16 {
		k, v = cpuref.ActF16(k), cpuref.ActF16(v)
	}
	s.K[il] = append(s.K[il], k...)
	s.V[il] = append(s.V[il], v...)
	p := []int32{int32(s.Pos)}
	var att []float32
	if o.kvF16 {
		att = attentionFlashF16(q, s.K[il], s.V[il], p, hp.nHead, hp.nKVHead, hd, hp.attnScale, 0, 0, nil)
	} else {
		att = cpuref.AttentionOpts(q, s.K[il], s.V[il], p, hp.nHead, hp.nKVHead, hd, hp.attnScale, 0, 0)
	}
	o.tr("attn_pregate", il, att)
	for i := range att {
		att[i] *= sigmoid1(gate[i])
	}
	o.tr("attn_gated", il, att)
	r := mm("attn_output.weight", lw.wo, hp.nEmbd, qDim, att)
	o.tr("attn_output", il, r)
	return r
}

// forwardQwen35 is forward for qwen35: the tokens one by one from a fresh state, the last
// one's logits.
func forwardQwen35(f *gguf.File, hp hparams, tokens []int32, o options) ([]float32, error) {
	m, err := loadQwen35(f, hp, o)
	if err != nil {
		return nil, err
	}
	logits, err := m.Run(m.NewState(), tokens)
	if err != nil {
		return nil, err
	}
	return logits[len(logits)-1], nil
}

// SSMConvStep is ggml's ssm_conv for one token with its state, as build_conv_state feeds it:
// channel c's output is sum_{i<K} w[c*K+i] * in[i], in being the channel's K-1 state values
// (state[c*(K-1):], oldest first) followed by x[c]; the state then shifts by one, dropping its
// oldest value and taking x[c]. w holds len(x) rows of K taps (ssm_conv1d, shape [K, C]).
func SSMConvStep(state, w, x []float32, K int) []float32 {
	out := make([]float32, len(x))
	n := K - 1
	for c, xc := range x {
		st := state[c*n : (c+1)*n]
		var sum float64
		for i, v := range st {
			sum += float64(v) * float64(w[c*K+i])
		}
		sum += float64(xc) * float64(w[c*K+n])
		out[c] = float32(sum)
		if n > 0 {
			copy(st, st[1:])
			st[n-1] = xc
		}
	}
	return out
}

// GatedDeltaStep is ggml's gated_delta_net for one token and one head, with a scalar gate:
// s holds the head's state transposed, s[j*n+i] = S[i][j] (n = len(k) = len(v), i indexing
// keys, j values), which it advances; out receives the output:
//
//	S = S * exp(g)
//	d[j] = (v[j] - sum_i S[i][j] k[i]) * beta
//	S[i][j] += k[i] * d[j]
//	out[j] = (sum_i S[i][j] q[i]) / sqrt(n)
func GatedDeltaStep(s, q, k, v []float32, g, beta float32, out []float32) {
	n := len(v)
	decay := float32(math.Exp(float64(g)))
	for i := range s {
		s[i] *= decay
	}
	scale := 1 / math.Sqrt(float64(n))
	for j := range n {
		row := s[j*n : (j+1)*n]
		var sk float64
		for i, x := range row {
			sk += float64(x) * float64(k[i])
		}
		d := float32((float64(v[j]) - sk) * float64(beta))
		var sq float64
		for i := range row {
			row[i] = float32(float64(row[i]) + float64(k[i])*float64(d))
			sq += float64(row[i]) * float64(q[i])
		}
		out[j] = float32(sq * scale)
	}
}

// L2Norm is ggml's l2_norm over every row of n values of x: x / max(||x||_2, eps).
func L2Norm(x []float32, n int, eps float32) []float32 {
	out := make([]float32, len(x))
	for r := 0; r < len(x)/n; r++ {
		row := x[r*n : (r+1)*n]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		scale := 1 / math.Max(math.Sqrt(ss), float64(eps))
		for i, v := range row {
			out[r*n+i] = float32(float64(v) * scale)
		}
	}
	return out
}

// GatedRMSNorm is qwen35's build_norm_gated over every row (head) of n values of x: the row
// RMS-normalised (eps), times w (n values), times silu(z) elementwise (z as long as x).
func GatedRMSNorm(x, w, z []float32, n int, eps float32) []float32 {
	out := cpuref.RMSNorm(x, w, n, eps)
	for i := range out {
		out[i] *= silu1(z[i])
	}
	return out
}

// ropeIMRoPE rotates, in place, one token's heads (x: nHeads x headDim) as ggml's
// interleaved multi-section RoPE (GGML_ROPE_TYPE_IMROPE, llama.cpp's for qwen35): NeoX pairs
// (d, d + nRot/2) over the first nRot values of each head, pair d turning by
// pos[c] * scale * base^(-2d/nRot), where the position component c (t, h, w, e) is chosen by
// the sector s = d mod (sections' sum): t when s%3 == 0 and s < 3*sections[0], h when
// s%3 == 1 and s < 3*sections[1], w when s%3 == 2 and s < 3*sections[2], e otherwise. A text
// token's components are (p, p, p, 0), so pairs whose sector falls to e do not turn.
func ropeIMRoPE(x []float32, pos [4]int32, nHeads, headDim, nRot int, base, scale float32, sections [4]int) {
	half := nRot / 2
	total := sections[0] + sections[1] + sections[2] + sections[3]
	cs, sn := make([]float64, half), make([]float64, half)
	for d := range half {
		c := imropeComponent(d%total, sections)
		theta := float64(scale) * float64(pos[c]) * math.Pow(float64(base), -2*float64(d)/float64(nRot))
		cs[d], sn[d] = math.Cos(theta), math.Sin(theta)
	}
	for h := range nHeads {
		head := x[h*headDim : (h+1)*headDim]
		for d := range half {
			x0, x1 := float64(head[d]), float64(head[d+half])
			head[d] = float32(x0*cs[d] - x1*sn[d])
			head[d+half] = float32(x0*sn[d] + x1*cs[d])
		}
	}
}

// imropeComponent is the position component (0 t, 1 h, 2 w, 3 e) IMRoPE turns sector s by.
func imropeComponent(s int, sections [4]int) int {
	switch {
	case s%3 == 1 && s < 3*sections[1]:
		return 1
	case s%3 == 2 && s < 3*sections[2]:
		return 2
	case s%3 == 0 && s < 3*sections[0]:
		return 0
	}
	return 3
}

func sigmoid1(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

func silu1(x float32) float32 { return float32(float64(x) / (1 + math.Exp(-float64(x)))) }

// softplus1 is ggml's: x above 20, else ln(1 + e^x).
func softplus1(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}
