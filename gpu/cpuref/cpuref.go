// Package cpuref is the plain-Go reference for every GPU kernel: the same operation, written
// for clarity and accumulated in float64, against which the WGSL kernels are tested and with
// which a CPU forward pass can be written to check a GPU one.
package cpuref

import (
	"math"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// GetRows returns rows ids of w (a matrix of rows of cols values), concatenated.
func GetRows(w []float32, cols int, ids []int32) []float32 {
	out := make([]float32, 0, len(ids)*cols)
	for _, id := range ids {
		out = append(out, w[int(id)*cols:int(id+1)*cols]...)
	}
	return out
}

// RMSNorm normalises every row of n values of x to unit root-mean-square (plus eps) and
// multiplies it by w.
func RMSNorm(x, w []float32, n int, eps float32) []float32 {
	out := make([]float32, len(x))
	for r := 0; r < len(x)/n; r++ {
		row := x[r*n : (r+1)*n]
		var ss float64
		for _, v := range row {
			ss += float64(v) * float64(v)
		}
		scale := 1 / math.Sqrt(ss/float64(n)+float64(eps))
		for i, v := range row {
			out[r*n+i] = float32(float64(v) * scale * float64(w[i]))
		}
	}
	return out
}

// RMSNormGGML is RMSNorm in llama.cpp's CPU roundings (ggml_compute_forward_rms_norm_f32, then
// ggml_mul by the weight): each square rounded to f32 and summed in double, the mean rounded
// to f32, scale = 1.0f/sqrtf(mean + eps) in f32, out = (x*scale)*w in f32.
func RMSNormGGML(x, w []float32, n int, eps float32) []float32 {
	out := make([]float32, len(x))
	for r := 0; r < len(x)/n; r++ {
		row := x[r*n : (r+1)*n]
		var ss float64
		for _, v := range row {
			ss += float64(v * v)
		}
		mean := float32(ss / float64(n))
		scale := 1 / float32(math.Sqrt(float64(mean+eps)))
		for i, v := range row {
			out[r*n+i] = (v * scale) * w[i]
		}
	}
	return out
}

// MatMul returns y[t, r] = sum_k x[t, k] * w[r, k] for a rows x cols weight and nTokens rows of x.
func MatMul(w []float32, rows, cols int, x []float32, nTokens int) []float32 {
	y := make([]float32, nTokens*rows)
	for t := 0; t < nTokens; t++ {
		xr := x[t*cols : (t+1)*cols]
		for r := 0; r < rows; r++ {
			wr := w[r*cols : (r+1)*cols]
			var s float64
			for k := range wr {
				s += float64(wr[k]) * float64(xr[k])
			}
			y[t*rows+r] = float32(s)
		}
	}
	return y
}

// RoPE rotates, in place, adjacent pairs of the first nRot dimensions of every head of x
// (nTokens x nHeads x headDim) by pos[t] * freqBase^(-2i/nRot), llama's "normal" RoPE.
func RoPE(x []float32, pos []int32, nHeads, headDim, nRot int, freqBase float32) {
	for t, p := range pos {
		for h := 0; h < nHeads; h++ {
			base := (t*nHeads + h) * headDim
			for i := 0; i < nRot; i += 2 {
				theta := float64(p) * math.Pow(float64(freqBase), -float64(i)/float64(nRot))
				c, s := math.Cos(theta), math.Sin(theta)
				x0, x1 := float64(x[base+i]), float64(x[base+i+1])
				x[base+i] = float32(x0*c - x1*s)
				x[base+i+1] = float32(x0*s + x1*c)
			}
		}
	}
}

// Attention computes causal grouped-query attention: for token t and head h, softmax over
// cache rows j <= pos[t] of q.k_j*scale, applied to v_j, where k and v hold nKVHead heads per
// row and query heads share them in groups of nHead/nKVHead.
func Attention(q, k, v []float32, pos []int32, nHead, nKVHead, headDim int, scale float32) []float32 {
	return AttentionOpts(q, k, v, pos, nHead, nKVHead, headDim, scale, 0, 0)
}

// AttentionOpts is Attention with Gemma's options: scores capped as softCap*tanh(s/softCap)
// when softCap > 0, and only the last window positions seen when window > 0.
func AttentionOpts(q, k, v []float32, pos []int32, nHead, nKVHead, headDim int, scale, softCap float32, window int) []float32 {
	return AttentionWith(q, k, v, pos, nHead, nKVHead, headDim, AttnOpts{Scale: scale, SoftCap: softCap, Window: window})
}

// AttnOpts are the reference attention's options: the score scale, Gemma's soft-cap (> 0) and
// sliding window (> 0), and gpt-oss's attention sinks.
type AttnOpts struct {
	Scale   float32
	SoftCap float32
	Window  int
	// Sinks, when not nil, holds one score per query head: a virtual key counted in the
	// softmax's sum (and its max) that contributes no value.
	Sinks []float32
}

// sink is head h's sink score, or -Inf (no sink).
func (o AttnOpts) sink(h int) float64 {
	if o.Sinks == nil {
		return math.Inf(-1)
	}
	return float64(o.Sinks[h])
}

// AttentionWith is AttentionOpts with its options, sinks included, in an AttnOpts.
func AttentionWith(q, k, v []float32, pos []int32, nHead, nKVHead, headDim int, o AttnOpts) []float32 {
	out := make([]float32, len(q))
	group := nHead / nKVHead
	stride := nKVHead * headDim
	for t := range pos {
		for h := 0; h < nHead; h++ {
			qo := (t*nHead + h) * headDim
			kvo := (h / group) * headDim
			scores, first, sum := attentionScores(q, k, pos, t, h, nHead, nKVHead, headDim, o)
			for d := 0; d < headDim; d++ {
				var acc float64
				for j := first; j < len(scores); j++ {
					acc += scores[j] * float64(v[j*stride+kvo+d])
				}
				out[qo+d] = float32(acc / sum)
			}
		}
	}
	return out
}

// attentionScores is token t's query head h's exp(s_j - max s) over cache rows first..pos[t]
// (AttentionOpts' layout and options) and their sum; a sink counts in the max and the sum.
func attentionScores(q, k []float32, pos []int32, t, h, nHead, nKVHead, headDim int, o AttnOpts) (scores []float64, first int, sum float64) {
	scale, softCap, window := o.Scale, o.SoftCap, o.Window
	qo := (t*nHead + h) * headDim
	kvo := h / (nHead / nKVHead) * headDim
	stride := nKVHead * headDim
	p := int(pos[t])
	if window > 0 {
		first = max(0, p+1-window)
	}
	scores = make([]float64, p+1)
	maxS := math.Inf(-1)
	for j := first; j <= p; j++ {
		var s float64
		for d := 0; d < headDim; d++ {
			s += float64(q[qo+d]) * float64(k[j*stride+kvo+d])
		}
		s *= float64(scale)
		if softCap > 0 {
			s = float64(softCap) * math.Tanh(s/float64(softCap))
		}
		scores[j] = s
		maxS = math.Max(maxS, s)
	}
	sink := o.sink(h)
	maxS = math.Max(maxS, sink)
	for j := first; j <= p; j++ {
		scores[j] = math.Exp(scores[j] - maxS)
		sum += scores[j]
	}
	sum += math.Exp(sink - maxS) // 0 without a sink
	return scores, first, sum
}

// SiLUMul returns silu(gate) * up elementwise, the llama FFN's gated activation.
func SiLUMul(gate, up []float32) []float32 {
	out := make([]float32, len(gate))
	for i, g := range gate {
		gf := float64(g)
		out[i] = float32(gf / (1 + math.Exp(-gf)) * float64(up[i]))
	}
	return out
}

// Add returns a + b elementwise.
func Add(a, b []float32) []float32 {
	out := make([]float32, len(a))
	for i := range a {
		out[i] = a[i] + b[i]
	}
	return out
}

// RelErr is ||got - want|| / ||want||, the kernels' accuracy measure.
func RelErr(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return math.Inf(1) // a NaN or infinity where the reference has a number fails any bound
		}
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// ActQ8_0 rounds x in blocks of 32 as llama.cpp's quantize_row_q8_0 does for activations:
// d = amax/127 kept as f16, q = round-half-even(x * 127/amax), value d*q.
func ActQ8_0(x []float32) []float32 {
	out := make([]float32, len(x))
	for b := 0; b < len(x); b += 32 {
		var amax float32
		for _, v := range x[b : b+32] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := f16Round(amax / 127)
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		for j, v := range x[b : b+32] {
			out[b+j] = d * float32(math.RoundToEven(float64(v*id)))
		}
	}
	return out
}

// ActQ8_K rounds x in blocks of 256 as llama.cpp's quantize_row_q8_K does: iscale = -127 over
// the value of largest magnitude, q = min(127, round-half-even(iscale*x)), value q/iscale.
func ActQ8_K(x []float32) []float32 {
	out := make([]float32, len(x))
	for b := 0; b < len(x); b += 256 {
		var amax, mx float32
		for _, v := range x[b : b+256] {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		if amax == 0 {
			continue
		}
		iscale := -127 / mx
		d := 1 / iscale
		for j, v := range x[b : b+256] {
			out[b+j] = d * float32(math.Min(127, math.RoundToEven(float64(iscale*v))))
		}
	}
	return out
}

// ActF16 rounds every value to half precision (round to nearest even).
func ActF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = f16Round(v)
	}
	return out
}

// GELUF16 is GELU as llama.cpp's CPU backend computes it (GGML_GELU_FP16): x rounded to f16,
// GELU of that in float32, rounded to f16; 0 at -10 and below, x itself at 10 and above.
func GELUF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		switch {
		case v <= -10:
			out[i] = 0
		case v >= 10:
			out[i] = v
		default:
			h := f16Round(v)
			g := float32(0.5 * float64(h) * (1 + math.Tanh(0.7978845608028654*float64(h)*(1+0.044715*float64(h)*float64(h)))))
			out[i] = f16Round(g)
		}
	}
	return out
}

// GELUMulF16 is ggml's geglu as llama.cpp's CPU backend computes it: GELUF16 of the gate
// times up, in f32.
func GELUMulF16(gate, up []float32) []float32 {
	out := GELUF16(gate)
	for i := range out {
		out[i] *= up[i]
	}
	return out
}

// GELUQuickF16 is CLIP's quick GELU, x * sigmoid(1.702 x), as llama.cpp's CPU backend
// computes it (GGML_GELU_QUICK_FP16): x rounded to f16, the function of that in float32,
// rounded to f16. Unlike GELUF16's table there is no clamp.
func GELUQuickF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		h := f16Round(v)
		out[i] = f16Round(h * float32(1/(1+math.Exp(-1.702*float64(h)))))
	}
	return out
}

// ActBF16 rounds every value to bfloat16 (round to nearest even).
func ActBF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		b := math.Float32bits(v)
		out[i] = math.Float32frombits((b + 0x7FFF + (b>>16)&1) & 0xFFFF0000)
	}
	return out
}

func f16Round(v float32) float32 { return gguf.F16ToF32(gguf.F32ToF16(v)) }

// AttentionF16 is Attention as llama.cpp's CPU flash attention computes it over an f16 cache:
// q rounded to f16, keys taken in order with a running maximum, and the running output kept in
// f16 (rounded after every rescale and every accumulated value row). k and v hold f16 values.
func AttentionF16(q, k, v []float32, pos []int32, nHead, nKVHead, headDim int, scale, softCap float32, window int) []float32 {
	return AttentionF16With(q, k, v, pos, nHead, nKVHead, headDim, AttnOpts{Scale: scale, SoftCap: softCap, Window: window})
}

// AttentionF16With is AttentionF16 with its options in an AttnOpts. A sink is applied after
// all the keys, as llama.cpp's flash attention does: to the output back in f32, unrounded.
func AttentionF16With(q, k, v []float32, pos []int32, nHead, nKVHead, headDim int, o AttnOpts) []float32 {
	scale, softCap, window := o.Scale, o.SoftCap, o.Window
	out := make([]float32, len(q))
	group := nHead / nKVHead
	stride := nKVHead * headDim
	acc, qh := make([]float32, headDim), make([]float32, headDim)
	for t, p := range pos {
		for h := 0; h < nHead; h++ {
			qo := (t*nHead + h) * headDim
			kvo := (h / group) * headDim
			m, l := float32(math.Inf(-1)), float32(0)
			clear(acc)
			first := 0
			if window > 0 {
				first = max(0, int(p)+1-window)
			}
			for j := first; j <= int(p); j++ {
				for d := range qh {
					qh[d] = f16Round(q[qo+d])
				}
				s := DotGGML(qh, k[j*stride+kvo:j*stride+kvo+headDim]) * scale
				if softCap > 0 {
					s = softCap * float32(math.Tanh(float64(s/softCap)))
				}
				ms, vs := float32(1), float32(1)
				if s > m {
					ms = float32(math.Exp(float64(m - s)))
					m = s
					for d := range acc {
						acc[d] = f16Round(acc[d] * ms)
					}
				} else {
					vs = float32(math.Exp(float64(s - m)))
				}
				for d := range acc {
					acc[d] = f16Round(v[j*stride+kvo+d]*vs + acc[d])
				}
				l = l*ms + vs
			}
			if o.Sinks != nil {
				s := o.Sinks[h]
				ms, vs := float32(1), float32(1)
				if s > m {
					ms = float32(math.Exp(float64(m - s)))
					m = s
					for d := range acc {
						acc[d] *= ms
					}
				} else {
					vs = float32(math.Exp(float64(s - m)))
				}
				l = l*ms + vs
			}
			inv := 1 / l // llama.cpp's S_inv
			for d := range acc {
				out[qo+d] = acc[d] * inv
			}
		}
	}
	return out
}

// DotGGML is x . y as ggml's vec_dot_f16 and vec_dot_f32 sum on AVX2: each run of 32 values
// into 32 lanes, each lane summing its products over the runs (fused), the lanes folded as
// GGML_F32x8_REDUCE does (four sums of 8 lanes pairwise, then by halves and neighbours), the
// values past the last whole run added to that in double.
func DotGGML(x, y []float32) float32 {
	var lane [32]float32
	whole := len(x) &^ 31
	for c := 0; c < whole; c += 32 {
		for e := range lane {
			lane[e] = float32(math.FMA(float64(x[c+e]), float64(y[c+e]), float64(lane[e])))
		}
	}
	var sum float64
	if whole > 0 {
		sum = float64(fold32(&lane))
	}
	for i := whole; i < len(x); i++ {
		sum += float64(x[i] * y[i])
	}
	return float32(sum)
}

// fold32 is GGML_F32_VEC_REDUCE (x86, AVX2) of 32 lanes, four registers of 8: registers 0 + 2
// and 1 + 3, those two added, the 8 lanes halved to 4 and then added in neighbouring pairs.
func fold32(lane *[32]float32) float32 {
	var half [4]float32
	for i := range half {
		lo := (lane[i] + lane[16+i]) + (lane[8+i] + lane[24+i])
		hi := (lane[4+i] + lane[20+i]) + (lane[12+i] + lane[28+i])
		half[i] = lo + hi
	}
	return (half[0] + half[1]) + (half[2] + half[3])
}

// ActQ8_1Sums is the per-32-block sum llama.cpp's Q8_1 stores beside ActQ8_0's values:
// f16(d * sum q) with the unrounded d = amax/127.
func ActQ8_1Sums(x []float32) []float32 {
	out := make([]float32, len(x)/32)
	for b := range out {
		blk := x[32*b : 32*b+32]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		var sum float32
		for _, v := range blk {
			sum += float32(math.RoundToEven(float64(v * id)))
		}
		out[b] = f16Round(amax / 127 * sum)
	}
	return out
}
