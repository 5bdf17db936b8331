package cpuref

import "math"

// The small operations of Qwen3.5's layers (gpu/qwen35ops.go) as ggml's CPU ops compute them:
// each op's result rounded to f32 where ggml stores it, the RMS norm's sum of squares in
// float64 (ggml sums in double).

// HeadLayout says where head vectors lie in rows (gpu.HeadLayout): element e of head h of row
// t is at t·Stride + Col + h·HeadStride + e, HeadStride 0 meaning the head size.
type HeadLayout struct{ Stride, Col, HeadStride int }

// at is the index of element e of head h of row t, for heads of dim values.
func (l HeadLayout) at(t, h, e, dim int) int {
	hs := l.HeadStride
	if hs == 0 {
		hs = dim
	}
	return t*l.Stride + l.Col + h*hs + e
}

// GatedRMSNorm is qwen35's build_norm_gated over head vectors of o in place (rows rows of
// heads heads of dim values, as ol says): ggml_rms_norm (s = 1/sqrtf(mean + eps), the mean in
// float64 rounded to f32, then v·s in f32), ggml_mul by w (dim values), then ggml_mul by
// SiLU32 of z's same head (as zl says), each product rounded to f32.
func GatedRMSNorm(o []float32, ol HeadLayout, z []float32, zl HeadLayout, w []float32, rows, heads, dim int, eps float32) {
	for t := range rows {
		for h := range heads {
			var ss float64
			for e := range dim {
				v := float64(o[ol.at(t, h, e, dim)])
				ss += v * v
			}
			mean := float32(ss / float64(dim))
			scale := float32(1 / float64(float32(math.Sqrt(float64(mean+eps)))))
			for e := range dim {
				i := ol.at(t, h, e, dim)
				y := o[i] * scale
				y = y * w[e]
				o[i] = y * SiLU32(z[zl.at(t, h, e, dim)])
			}
		}
	}
}

// Sigmoid32 is ggml's sigmoid in f32: 1 / (1 + expf(-x)).
func Sigmoid32(x float32) float32 {
	return 1 / (1 + Expf(-x))
}

// Softplus32 is ggml's softplus in f32 (op_softplus): x above 20, else logf(1 + expf(x)).
func Softplus32(x float32) float32 {
	if x > 20 {
		return x
	}
	return Logf(1 + Expf(x))
}

// DeltaGates is the Gated DeltaNet's gates for rows tokens of heads value heads: g[t, h] =
// Softplus32(alpha[t, h] + dtBias[h]) · ssmA[h] and beta[t, h] = Sigmoid32(betaIn[t, h]),
// each op rounded to f32, alpha and betaIn one value per head as al and bl say; g and beta
// (returned) rows of heads values.
func DeltaGates(alpha []float32, al HeadLayout, betaIn []float32, bl HeadLayout, dtBias, ssmA []float32, rows, heads int) (g, beta []float32) {
	g, beta = make([]float32, rows*heads), make([]float32, rows*heads)
	for t := range rows {
		for h := range heads {
			x := alpha[al.at(t, h, 0, 1)] + dtBias[h]
			g[t*heads+h] = Softplus32(x) * ssmA[h]
			beta[t*heads+h] = Sigmoid32(betaIn[bl.at(t, h, 0, 1)])
		}
	}
	return g, beta
}

// SigmoidGate is gated attention's output gate in place: o[t, h, e] *= Sigmoid32(gate[t, h,
// e]) in f32, over rows rows of heads heads of dim values, as ol and gl say.
func SigmoidGate(o []float32, ol HeadLayout, gate []float32, gl HeadLayout, rows, heads, dim int) {
	for t := range rows {
		for h := range heads {
			for e := range dim {
				o[ol.at(t, h, e, dim)] *= Sigmoid32(gate[gl.at(t, h, e, dim)])
			}
		}
	}
}

// RoPEInterleaved rotates x in place as ggml's interleaved multi-section RoPE
// (GGML_ROPE_TYPE_IMROPE: Qwen3-VL, qwen35; NeoX pairs, element i with i + nRot/2): pos
// holds four position components per token (t, h, w, e), and pair i turns by
// p·freqBase^(-2i/nRot) with p the component of its sector s = i modulo the sections' total:
// h when s%3 == 1 and s < 3·sections[1], w when s%3 == 2 and s < 3·sections[2], t when
// s%3 == 0 and s < 3·sections[0], e otherwise (ggml_mrope_cache_init's order of the tests).
func RoPEInterleaved(x []float32, pos []int32, nHeads, headDim, nRot int, freqBase float32, sections [4]int) {
	half := nRot / 2
	total := sections[0] + sections[1] + sections[2] + sections[3]
	for t := range len(pos) / 4 {
		for h := range nHeads {
			base := (t*nHeads + h) * headDim
			for i := range half {
				s, c := i%total, 3
				switch {
				case s%3 == 1 && s < 3*sections[1]:
					c = 1
				case s%3 == 2 && s < 3*sections[2]:
					c = 2
				case s%3 == 0 && s < 3*sections[0]:
					c = 0
				}
				theta := float64(pos[4*t+c]) * math.Pow(float64(freqBase), -2*float64(i)/float64(nRot))
				cs, sn := math.Cos(theta), math.Sin(theta)
				x0, x1 := float64(x[base+i]), float64(x[base+i+half])
				x[base+i] = float32(x0*cs - x1*sn)
				x[base+i+half] = float32(x0*sn + x1*cs)
			}
		}
	}
}
