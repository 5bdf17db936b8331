package cpuref

import "math"

// The Mixture-of-Experts operations of gpu/moe.go, as llama.cpp's build_moe_ffn computes them.
// An assignment is a token's slot: assignment a = token·k + slot.

// Gating functions, numbered as llama.cpp's llama_expert_gating_func_type (and gpu.MoEGating).
const (
	GateSoftmax       = 1
	GateSigmoid       = 2
	GateSoftmaxWeight = 3
	GateSqrtSoftplus  = 4
)

// MoEWeightSumMin is the floor of the sum normalised expert weights are divided by.
const MoEWeightSumMin = 6.103515625e-5

// MoERoute returns, for each row of nExperts router logits, the k chosen experts and their
// weights (k per row, slot order): probabilities by gating (0 taken as softmax), the k largest
// of them plus bias (nil: none; for choosing only), largest first with ties to the lower
// index; their probabilities as weights, softmaxed over the k under GateSoftmaxWeight, divided
// by their sum clamped below at MoEWeightSumMin when norm, times scale unless it is 0 or 1.
// Values are rounded to f32 where ggml stores them.
func MoERoute(logits []float32, nExperts, k, gating int, bias []float32, norm bool, scale float32) (ids []int32, weights []float32) {
	for t := 0; t < len(logits)/nExperts; t++ {
		row := logits[t*nExperts : (t+1)*nExperts]
		probs := make([]float32, nExperts)
		switch gating {
		case GateSigmoid:
			for i, v := range row {
				probs[i] = float32(1 / (1 + math.Exp(-float64(v))))
			}
		case GateSoftmaxWeight:
			copy(probs, row)
		case GateSqrtSoftplus:
			for i, v := range row {
				sp := float64(v)
				if v <= 20 {
					sp = math.Log(1 + math.Exp(sp))
				}
				probs[i] = float32(math.Sqrt(sp))
			}
		default:
			copy(probs, softmax32(row))
		}
		sel := probs
		if bias != nil {
			sel = make([]float32, nExperts)
			for i := range sel {
				sel[i] = probs[i] + bias[i]
			}
		}
		chosen := make([]bool, nExperts)
		w := make([]float32, k)
		for j := 0; j < k; j++ {
			best := -1
			for e := range sel {
				if !chosen[e] && (best < 0 || sel[e] > sel[best]) {
					best = e
				}
			}
			chosen[best] = true
			ids = append(ids, int32(best))
			w[j] = probs[best]
		}
		if gating == GateSoftmaxWeight {
			w = softmax32(w)
		}
		if norm {
			var sum float64
			for _, v := range w {
				sum += float64(v)
			}
			s := max(float32(sum), MoEWeightSumMin)
			for j := range w {
				w[j] /= s
			}
		}
		if scale != 0 && scale != 1 {
			for j := range w {
				w[j] *= scale
			}
		}
		weights = append(weights, w...)
	}
	return ids, weights
}

// softmax32 is ggml's soft_max of a row: exp(x - max) times f32(1 / sum).
func softmax32(x []float32) []float32 {
	m := x[0]
	for _, v := range x {
		m = max(m, v)
	}
	out := make([]float32, len(x))
	var sum float64
	for i, v := range x {
		out[i] = float32(math.Exp(float64(v - m)))
		sum += float64(out[i])
	}
	inv := float32(1 / sum)
	for i := range out {
		out[i] *= inv
	}
	return out
}

// MatMulID is ggml's mul_mat_id: y[a, r] = sum_c w[ids[a], r, c] * x[a / xPer, c] for every
// assignment a (len(ids)), w holding experts matrices of rows x cols one after the other and x
// rows of cols (xPer: assignments per input row, k for gate and up, 1 for down).
func MatMulID(w []float32, rows, cols int, x []float32, xPer int, ids []int32) []float32 {
	y := make([]float32, len(ids)*rows)
	for a, e := range ids {
		xr := x[a/xPer*cols : (a/xPer+1)*cols]
		for r := 0; r < rows; r++ {
			wr := w[(int(e)*rows+r)*cols : (int(e)*rows+r+1)*cols]
			var s float64
			for c := range wr {
				s += float64(wr[c]) * float64(xr[c])
			}
			y[a*rows+r] = float32(s)
		}
	}
	return y
}

// AddID is ggml's add_id in place: y[a, col + i] += bias[ids[a], i] for i < width, y rows of
// stride.
func AddID(y []float32, stride, col int, bias []float32, width int, ids []int32) {
	for a, e := range ids {
		for i := 0; i < width; i++ {
			y[a*stride+col+i] += bias[int(e)*width+i]
		}
	}
}

// SwiGLUOAI is ggml's swiglu_oai as its CPU backend computes it: g = min(gate, limit),
// u = clamp(up, -limit, limit), out = g / (1 + exp(-alpha g)) * (u + 1).
func SwiGLUOAI(gate, up []float32, alpha, limit float32) []float32 {
	out := make([]float32, len(gate))
	for i := range gate {
		g := min(gate[i], limit)
		u := min(max(up[i], -limit), limit)
		a := float32(float64(g) / (1 + math.Exp(float64(alpha*-g))))
		out[i] = a * (u + 1)
	}
	return out
}

// MoECombine sums each token's k expert outputs (y rows of width, one per assignment) times
// their weights in llama.cpp's f32 order: each product rounded, then added in slot order.
func MoECombine(y, weights []float32, nTokens, k, width int) []float32 {
	out := make([]float32, nTokens*width)
	for t := 0; t < nTokens; t++ {
		for i := 0; i < width; i++ {
			var s float32
			for j := 0; j < k; j++ {
				a := t*k + j
				v := float32(weights[a] * y[a*width+i]) // rounded: no fused multiply-add
				if j == 0 {
					s = v
				} else {
					s += v
				}
			}
			out[t*width+i] = s
		}
	}
	return out
}
