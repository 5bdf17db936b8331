package reference

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// The Mixture-of-Experts feed-forward block and attention sinks, as llama.cpp b10587 builds
// them (build_moe_ffn and build_attn_mha in src/llama-graph.cpp; soft_max, swiglu_oai and
// flash attention's sinks in ggml/src/ggml-cpu/ops.cpp), written to be checked against:
//
//	logits = x @ ffn_gate_inp (+ ffn_gate_inp.bias)                  [n_expert]
//	probs  = softmax(logits) | sigmoid(logits) | logits | sqrt(softplus(logits))   (the gating)
//	chosen = the n_used largest of probs (+ exp_probs_b, a bias for choosing only), largest first
//	w      = probs[chosen]; softmax(w) under SOFTMAX_WEIGHT (gpt-oss); w / max(sum w, 2^-14)
//	         when normalised; w * scale when scale is neither 0 nor 1
//	out    = sum over chosen e, in order, of w_e * (act(x @ gate_e (+b), x @ up_e (+b)) @ down_e (+b))
//	         (+ the shared expert, times sigmoid(x . ffn_gate_inp_shexp) when that exists)
//
// act is silu(g) * u (llama.cpp's swiglu; silu(u) alone when there is no gate) or gpt-oss's
// swiglu_oai. Values are accumulated in float64, as gpu/cpuref's kernels are.

// Gating is how a router's logits become the experts' weights: llama.cpp's
// llama_expert_gating_func_type, with its numbering (0 is "none").
type Gating int

const (
	// GatingSoftmax: probabilities softmax(logits) over every expert; the top k of them chosen
	// and weighted by them (qwen3moe, qwen2moe, llama/Mixtral).
	GatingSoftmax Gating = 1
	// GatingSigmoid: probabilities sigmoid(logits), chosen and weighted as softmax's.
	GatingSigmoid Gating = 2
	// GatingSoftmaxWeight: the top k of the raw logits chosen, weighted by the softmax over
	// those k logits alone (gpt-oss).
	GatingSoftmaxWeight Gating = 3
	// GatingSqrtSoftplus: probabilities sqrt(softplus(logits)), softplus(x) = x above 20.
	GatingSqrtSoftplus Gating = 4
)

// WeightSumMin is the floor under the sum by which normalised expert weights are divided,
// the smallest normal float16 (llama.cpp's clamp before the ggml_div).
const WeightSumMin = 6.103515625e-5

// gpt-oss's swiglu_oai constants (build_moe_ffn's LLM_FFN_SWIGLU_OAI_MOE).
const (
	OAIAlpha = 1.702
	OAILimit = 7.0
)

// Activation is an expert's gated activation.
type Activation int

const (
	// ActSiLU is silu(gate) * up, or silu(up) when the experts have no gate.
	ActSiLU Activation = iota
	// ActSwiGLUOAI is gpt-oss's SwiGLUOAI(gate, up, OAIAlpha, OAILimit).
	ActSwiGLUOAI
)

// Routing is how build_moe_ffn turns a token's router logits into chosen experts and weights.
type Routing struct {
	NUsed  int    // experts chosen per token (expert_used_count)
	Gating Gating // 0 is taken as GatingSoftmax
	// SelectionBias, when not nil, is added to the gating probabilities for choosing the
	// experts only (DeepSeek V3's exp_probs_b); the weights come from the unbiased ones.
	SelectionBias []float32
	Normalize     bool    // divide the chosen weights by their sum, floored at WeightSumMin
	Scale         float32 // multiplies the weights unless 0 or 1 (expert_weights_scale)
}

// Route returns the experts chosen for one token's router logits (with the router's bias
// already added), largest first (ties: the lower index), and their weights.
func (r Routing) Route(logits []float32) (ids []int, weights []float32) {
	n := len(logits)
	probs := make([]float32, n)
	switch r.Gating {
	case GatingSoftmax, 0:
		copy(probs, softmax(logits))
	case GatingSigmoid:
		for i, v := range logits {
			probs[i] = float32(1 / (1 + math.Exp(-float64(v))))
		}
	case GatingSoftmaxWeight:
		copy(probs, logits)
	case GatingSqrtSoftplus:
		for i, v := range logits {
			sp := float64(v)
			if v <= 20 {
				sp = math.Log(1 + math.Exp(float64(v)))
			}
			probs[i] = float32(math.Sqrt(sp))
		}
	default:
		panic(fmt.Sprintf("reference: gating %d unknown", r.Gating))
	}
	sel := probs
	if r.SelectionBias != nil {
		sel = make([]float32, n)
		for i := range sel {
			sel[i] = probs[i] + r.SelectionBias[i]
		}
	}
	ids = TopK(sel, r.NUsed)
	weights = make([]float32, len(ids))
	for i, e := range ids {
		weights[i] = probs[e]
	}
	if r.Gating == GatingSoftmaxWeight {
		weights = softmax(weights)
	}
	if r.Normalize {
		weights = NormalizeWeights(weights)
	}
	if r.Scale != 0 && r.Scale != 1 {
		for i := range weights {
			weights[i] *= r.Scale
		}
	}
	return ids, weights
}

// TopK returns the indices of the k largest values of x, largest first, ties to the lower
// index (ggml_argsort_top_k's order on distinct values).
func TopK(x []float32, k int) []int {
	order := make([]int, len(x))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(x[b], x[a]) })
	return order[:min(k, len(x))]
}

// NormalizeWeights divides w by its sum, the sum floored at WeightSumMin.
func NormalizeWeights(w []float32) []float32 {
	var sum float32
	for _, v := range w {
		sum += v
	}
	sum = max(sum, WeightSumMin)
	out := make([]float32, len(w))
	for i, v := range w {
		out[i] = v / sum
	}
	return out
}

// softmax is ggml_soft_max of one row: exp(x - max x) over its sum.
func softmax(x []float32) []float32 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	e := make([]float64, len(x))
	var sum float64
	for i, v := range x {
		e[i] = math.Exp(float64(v) - m)
		sum += e[i]
	}
	out := make([]float32, len(x))
	for i := range e {
		out[i] = float32(e[i] / sum)
	}
	return out
}

// SwiGLUOAI is gpt-oss's gated activation (ggml_swiglu_oai): with g = min(gate, limit) and
// u = clamp(up, -limit, limit), g * sigmoid(alpha*g) * (u + 1).
func SwiGLUOAI(gate, up []float32, alpha, limit float32) []float32 {
	out := make([]float32, len(gate))
	for i := range gate {
		g := float64(min(gate[i], limit))
		u := float64(max(-limit, min(up[i], limit)))
		out[i] = float32(g / (1 + math.Exp(-float64(alpha)*g)) * (u + 1))
	}
	return out
}

// SharedExpert is a dense SiLU-gated FFN that every token runs beside the routed experts
// (qwen2moe's ffn_*_shexp), its output scaled by sigmoid(x . GateInp) when GateInp is set.
type SharedExpert struct {
	NFF      int
	Gate, Up []float32 // NFF rows of the block's NEmbd
	Down     []float32 // NEmbd rows of NFF
	GateInp  []float32 // [NEmbd] (ffn_gate_inp_shexp), or nil for an ungated shared expert
}

// MoE is one block's Mixture-of-Experts feed-forward network. Expert e's matrices are the
// e-th of the stacked GGUF tensors (shape [cols, rows, NExpert]); biases are nil when absent.
type MoE struct {
	NEmbd, NFF, NExpert int
	Routing
	Router     []float32 // NExpert rows of NEmbd (ffn_gate_inp)
	RouterBias []float32 // [NExpert] (ffn_gate_inp.bias)
	Gate, Up   []float32 // NExpert x NFF rows of NEmbd (ffn_gate_exps, ffn_up_exps); Gate may be nil
	GateBias   []float32 // NExpert x NFF
	UpBias     []float32 // NExpert x NFF
	Down       []float32 // NExpert x NEmbd rows of NFF (ffn_down_exps)
	DownBias   []float32 // NExpert x NEmbd
	Act        Activation
	Shared     *SharedExpert

	// mm, when set, replaces linear for one token's product with the named tensor (its name
	// in the block, as "ffn_up_exps.weight"), w being its rows from first on: llama.cpp's
	// CPU arithmetic (llamacpp.go).
	mm func(tensor string, first int, w, b []float32, rows, cols int, x []float32) []float32
}

// linear is x @ w (+ b) for one token, w being tensor's rows from first on.
func (m *MoE) linear(tensor string, first int, w, b []float32, rows, cols int, x []float32) []float32 {
	if m.mm == nil {
		return linear(w, b, rows, cols, x, 1)
	}
	return m.mm(tensor, first, w, b, rows, cols, x)
}

// SplitGateUp splits fused ffn_gate_up_exps values (shape [nEmbd, 2*nFF, nExpert]: each
// expert's nFF gate rows, then its nFF up rows) into the separate gate and up stacks.
func SplitGateUp(gateUp []float32, nEmbd, nFF, nExpert int) (gate, up []float32) {
	m := nFF * nEmbd
	gate, up = make([]float32, 0, nExpert*m), make([]float32, 0, nExpert*m)
	for e := range nExpert {
		gate = append(gate, gateUp[2*e*m:(2*e+1)*m]...)
		up = append(up, gateUp[(2*e+1)*m:(2*e+2)*m]...)
	}
	return gate, up
}

// Forward runs nTokens rows of NEmbd inputs (the FFN-normed residual) through the block.
func (m *MoE) Forward(x []float32, nTokens int) []float32 {
	out := make([]float32, nTokens*m.NEmbd)
	for t := range nTokens {
		xt := x[t*m.NEmbd : (t+1)*m.NEmbd]
		logits := m.linear("ffn_gate_inp.weight", 0, m.Router, m.RouterBias, m.NExpert, m.NEmbd, xt)
		ids, w := m.Route(logits)
		acc := make([]float64, m.NEmbd)
		for i, e := range ids {
			y := m.expert(e, xt)
			for j, v := range y {
				acc[j] += float64(w[i] * v) // ggml_mul by the weight, then the adds
			}
		}
		if s := m.Shared; s != nil {
			y := m.sharedFFN(xt)
			scale := 1.0
			if s.GateInp != nil {
				z := m.linear("ffn_gate_inp_shexp.weight", 0, s.GateInp, nil, 1, m.NEmbd, xt)[0]
				scale = 1 / (1 + math.Exp(-float64(z)))
			}
			for j, v := range y {
				acc[j] += float64(v) * scale
			}
		}
		for j, v := range acc {
			out[t*m.NEmbd+j] = float32(v)
		}
	}
	return out
}

// expert runs expert e on one token's input.
func (m *MoE) expert(e int, x []float32) []float32 {
	mat := m.NFF * m.NEmbd
	part := func(v []float32, size int) []float32 {
		if v == nil {
			return nil
		}
		return v[e*size : (e+1)*size]
	}
	first := e * m.NFF // the expert's first row in the stacked gate and up tensors
	up := m.linear("ffn_up_exps.weight", first, part(m.Up, mat), part(m.UpBias, m.NFF), m.NFF, m.NEmbd, x)
	var act []float32
	switch {
	case m.Act == ActSwiGLUOAI:
		gate := m.linear("ffn_gate_exps.weight", first, part(m.Gate, mat), part(m.GateBias, m.NFF), m.NFF, m.NEmbd, x)
		act = SwiGLUOAI(gate, up, OAIAlpha, OAILimit)
	case m.Gate == nil: // llama.cpp's has_gate false: silu(up)
		act = silu(up)
	default:
		gate := m.linear("ffn_gate_exps.weight", first, part(m.Gate, mat), part(m.GateBias, m.NFF), m.NFF, m.NEmbd, x)
		act = silu(gate)
		for i := range act {
			act[i] *= up[i]
		}
	}
	return m.linear("ffn_down_exps.weight", e*m.NEmbd, part(m.Down, mat), part(m.DownBias, m.NEmbd), m.NEmbd, m.NFF, act)
}

// sharedFFN is the shared expert, a dense SiLU-gated FFN, on one token:
// (silu(x @ gate) * (x @ up)) @ down.
func (m *MoE) sharedFFN(x []float32) []float32 {
	s := m.Shared
	g := silu(m.linear("ffn_gate_shexp.weight", 0, s.Gate, nil, s.NFF, m.NEmbd, x))
	u := m.linear("ffn_up_shexp.weight", 0, s.Up, nil, s.NFF, m.NEmbd, x)
	for i := range g {
		g[i] *= u[i]
	}
	return m.linear("ffn_down_shexp.weight", 0, s.Down, nil, m.NEmbd, s.NFF, g)
}

func silu(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(float64(v) / (1 + math.Exp(-float64(v))))
	}
	return out
}

// AttentionSinks is causal grouped-query attention (cpuref.AttentionOpts' layout, scale,
// soft-cap and window) with gpt-oss's attention sinks: head h's softmax denominator gains
// exp(sinks[h]), a logit taken as it is (not scaled) for a position with no value, so that
// out = sum_j exp(s_j - m) v_j / (sum_j exp(s_j - m) + exp(sinks[h] - m)), m = max(s, sinks[h]).
// With sinks nil it is plain attention.
func AttentionSinks(q, k, v []float32, pos []int32, nHead, nKVHead, headDim int, scale, softCap float32, window int, sinks []float32) []float32 {
	out := make([]float32, len(q))
	group := nHead / nKVHead
	stride := nKVHead * headDim
	for t, p := range pos {
		first := 0
		if window > 0 {
			first = max(0, int(p)+1-window) // llama.cpp masks p1 - p0 >= n_swa
		}
		for h := range nHead {
			qo := (t*nHead + h) * headDim
			kvo := (h / group) * headDim
			scores := make([]float64, int(p)+1)
			m := math.Inf(-1)
			for j := first; j <= int(p); j++ {
				var s float64
				for d := range headDim {
					s += float64(q[qo+d]) * float64(k[j*stride+kvo+d])
				}
				s *= float64(scale)
				if softCap > 0 {
					s = float64(softCap) * math.Tanh(s/float64(softCap))
				}
				scores[j] = s
				m = math.Max(m, s)
			}
			if sinks != nil {
				m = math.Max(m, float64(sinks[h]))
			}
			var sum float64
			for j := first; j <= int(p); j++ {
				scores[j] = math.Exp(scores[j] - m)
				sum += scores[j]
			}
			if sinks != nil {
				sum += math.Exp(float64(sinks[h]) - m)
			}
			for d := range headDim {
				var acc float64
				for j := first; j <= int(p); j++ {
					acc += scores[j] * float64(v[j*stride+kvo+d])
				}
				out[qo+d] = float32(acc / sum)
			}
		}
	}
	return out
}
