package cpuref

import "math"

// The recurrent-state operations of gpu/recurrent.go (the Gated DeltaNet layers of
// Qwen3-Next and Qwen3.5), as ggml's CPU ops compute them: the order of the operations and
// the f32 roundings where ggml stores or accumulates in f32 (ssm_conv's sums, the delta
// rule's state, deltas and outputs), float64 where ggml accumulates in double (l2_norm) or
// where a SIMD dot product's lane order is not reproducible anyway (the delta rule's dots,
// summed in float64 and rounded once).

// Seq is one sequence's part of a batch: its tokens are rows First .. First+Tokens-1, its
// states live in slot Slot (gpu.RecurrentSeq).
type Seq struct{ First, Tokens, Slot int }

// SSMConv is ggml's ssm_conv over a batch of sequences, each continuing from its conv state:
// for token t of a sequence and channel c, with ext the sequence's dConv-1 state rows
// followed by its input rows,
//
//	out[t, c] = Σ_{i<dConv} ext[t+i, c] · w[c·dConv + i]
//
// summed in f32 from 0 in ascending i (ggml_compute_forward_ssm_conv_f32), then silu(v) =
// v/(1+exp(-v)) when silu is set (the ggml_silu qwen35's graph applies after). x holds rows
// of xStride floats, the channels at columns xCol ..; out (returned) rows of channels floats,
// as many rows as x; state holds per slot channels·(dConv-1) floats, channel c's rows oldest
// first at c·(dConv-1), and is updated in place to the last dConv-1 rows of ext.
func SSMConv(x []float32, xStride, xCol int, w, state []float32, channels, dConv int, seqs []Seq, silu bool) []float32 {
	ks := dConv - 1
	out := make([]float32, len(x)/xStride*channels)
	for _, s := range seqs {
		for c := 0; c < channels; c++ {
			st := state[(s.Slot*channels+c)*ks : (s.Slot*channels+c+1)*ks]
			ext := make([]float32, 0, ks+s.Tokens)
			ext = append(ext, st...)
			for t := 0; t < s.Tokens; t++ {
				ext = append(ext, x[(s.First+t)*xStride+xCol+c])
			}
			for t := 0; t < s.Tokens; t++ {
				var sum float32
				for i := 0; i < dConv; i++ {
					sum += float32(ext[t+i] * w[c*dConv+i]) // the product rounded: no fused multiply-add
				}
				if silu {
					sum = SiLU32(sum)
				}
				out[(s.First+t)*channels+c] = sum
			}
			copy(st, ext[s.Tokens:])
		}
	}
	return out
}

// SiLU32 is ggml's silu in f32: x / (1 + exp(-x)).
func SiLU32(x float32) float32 {
	e := float32(math.Exp(-float64(x)))
	return x / (1 + e)
}

// DeltaNet is ggml's gated_delta_net (ggml_compute_forward_gated_delta_net_f32, K = 1) over
// a batch of sequences, each continuing from its state. Per sequence, value head h (of vHeads)
// and token, with q and k head h % kHeads (ggml's tiled broadcast) of dim values, v head h,
// beta and the gate g (one value per head, or with kda dim values per head), and the state
// matrix M (dim x dim, M[j][i] = S[i][j]: row j, over the key dimension i, is the value
// dimension j's column of S):
//
//	M[j][i] *= exp(g)                   (kda: exp(g[i]))
//	delta[j] = (v[j] - Σ_i M[j][i]·k[i]) · beta
//	M[j][i] += k[i] · delta[j]
//	o[j]     = (Σ_i M[j][i]·q[i]) · 1/sqrt(dim)
//
// qkv holds rows of stride floats with q, k and v at columns qCol, kCol and vCol (kHeads,
// kHeads and vHeads heads of dim values); g rows of vHeads floats (kda: vHeads·dim), beta rows
// of vHeads; out (returned) rows of vHeads·dim, o of head h at h·dim. state holds per slot
// vHeads matrices of dim·dim floats, M[j][i] of head h at (h·dim + j)·dim + i, updated in
// place. The op neither normalises q and k nor activates g and beta: qwen35's graph does.
func DeltaNet(qkv []float32, stride, qCol, kCol, vCol int, g, beta, state []float32, dim, kHeads, vHeads int, kda bool, seqs []Seq) []float32 {
	out := make([]float32, len(qkv)/stride*vHeads*dim)
	scale := float32(1 / float64(float32(math.Sqrt(float64(dim))))) // 1.0f/sqrtf(S_v), both in f32
	delta := make([]float32, dim)
	eg := make([]float32, dim)
	for _, s := range seqs {
		for h := 0; h < vHeads; h++ {
			kh := h % kHeads
			m := state[(s.Slot*vHeads+h)*dim*dim : (s.Slot*vHeads+h+1)*dim*dim]
			for t := 0; t < s.Tokens; t++ {
				row := s.First + t
				q := qkv[row*stride+qCol+kh*dim : row*stride+qCol+(kh+1)*dim]
				k := qkv[row*stride+kCol+kh*dim : row*stride+kCol+(kh+1)*dim]
				v := qkv[row*stride+vCol+h*dim : row*stride+vCol+(h+1)*dim]
				b := beta[row*vHeads+h]
				if kda {
					for i := range eg {
						eg[i] = float32(math.Exp(float64(g[(row*vHeads+h)*dim+i])))
					}
				} else {
					e := float32(math.Exp(float64(g[row*vHeads+h])))
					for i := range eg {
						eg[i] = e
					}
				}
				for j := 0; j < dim; j++ {
					mj := m[j*dim : (j+1)*dim]
					for i := range mj {
						mj[i] *= eg[i]
					}
				}
				for j := 0; j < dim; j++ {
					sk := dot32(m[j*dim:(j+1)*dim], k)
					delta[j] = (v[j] - sk) * b
				}
				for j := 0; j < dim; j++ {
					mj := m[j*dim : (j+1)*dim]
					for i := range mj {
						mj[i] = float32(float64(mj[i]) + float64(k[i])*float64(delta[j])) // one rounding, as an FMA
					}
				}
				for j := 0; j < dim; j++ {
					out[(row*vHeads+h)*dim+j] = dot32(m[j*dim:(j+1)*dim], q) * scale
				}
			}
		}
	}
	return out
}

// dot32 is a dot product summed in float64 and rounded to f32 once.
func dot32(a, b []float32) float32 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return float32(s)
}

// L2Norm is ggml's l2_norm (ggml_compute_forward_l2_norm_f32) over heads vectors of headDim
// values at column col of each row of stride floats of x, in place: x · 1/max(‖x‖, eps),
// the squares rounded to f32 and summed in float64, the norm's sqrt taken in f32.
func L2Norm(x []float32, stride, col, heads, headDim int, eps float32) {
	for r := 0; r < len(x)/stride; r++ {
		for h := 0; h < heads; h++ {
			v := x[r*stride+col+h*headDim : r*stride+col+(h+1)*headDim]
			var sum float64
			for _, e := range v {
				sum += float64(e * e)
			}
			n := float32(math.Sqrt(float64(float32(sum))))
			scale := 1 / max(n, eps)
			for i := range v {
				v[i] *= scale
			}
		}
	}
}
