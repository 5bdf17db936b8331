package reference

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
)

// What llama.cpp's CPU build (x86, AVX2 and FMA) computes differently from Forward's plain
// float32 arithmetic, for tests that compare against its recorded outputs:
//
//   - By default llama-server, llama-completion and llama-eval-callback keep keys and values
//     in a float16 cache and attend with flash attention, which rounds q to float16 and keeps
//     its running output in float16 (attentionFlashF16). On the tiny random models of
//     models/moe, whose outputs amplify any rounding, that alone moves top-10 probabilities by
//     up to 0.07; with -fa off -ctk f32 -ctv f32 llama.cpp agrees with Forward to 2e-5.
//   - Products with quantized weights take their input rounded to 8-bit blocks (actRound,
//     linearQ8_1).
//
// forwardLlamaCppQuant reproduces llama.cpp's outputs on the quantized test models to 1e-6
// over their first steps (and on qwen3moe256-Q4_K_M over all 32). Not reproduced: the
// summation order of float32 products (tinyBLAS's, ggml_vec_dot_f32's) and of the 8-bit
// blocks, whose last-bit differences flip a float16 or 8-bit rounding sooner or later, after
// which these chaotic models drift apart; and flash attention's split over KV chunks, which
// ggml uses for one query over 512 cache rows or more.

// forwardLlamaCpp is Forward with llama.cpp's float16 cache and flash attention.
func forwardLlamaCpp(f *gguf.File, tokens []int32) ([]float32, error) {
	return forward(f, tokens, options{kvF16: true})
}

// attentionFlashF16 is AttentionSinks as ggml's CPU flash attention computes it
// (ggml_compute_forward_flash_attn_ext_f16_one_chunk) over a float16 cache: k and v hold
// float16 values; q is rounded to float16; keys are taken in order with a running maximum M
// and sum S, the running output kept in float16 (rounded after every rescale and every
// accumulated value row); after the last key, head h's sink logit s joins as one more score
// with no value (M' = max(M, s), the output and S rescaled by exp(M - M'), S += exp(s - M'));
// the output is divided by S.
func attentionFlashF16(q, k, v []float32, pos []int32, nHead, nKVHead, headDim int, scale, softCap float32, window int, sinks []float32) []float32 {
	out := make([]float32, len(q))
	group := nHead / nKVHead
	stride := nKVHead * headDim
	acc, qh := make([]float32, headDim), make([]float32, headDim)
	f16 := func(x float32) float32 { return gguf.F16ToF32(gguf.F32ToF16(x)) }
	for t, p := range pos {
		first := 0
		if window > 0 {
			first = max(0, int(p)+1-window)
		}
		for h := range nHead {
			qo := (t*nHead + h) * headDim
			kvo := (h / group) * headDim
			m, l := float32(math.Inf(-1)), float32(0)
			clear(acc)
			for d := range qh {
				qh[d] = f16(q[qo+d])
			}
			for j := first; j <= int(p); j++ {
				s := dotF16(qh, k[j*stride+kvo:j*stride+kvo+headDim])
				s *= scale
				if softCap > 0 {
					s = softCap * float32(math.Tanh(float64(s/softCap)))
				}
				ms, vs := float32(1), float32(1)
				if s > m {
					ms = float32(math.Exp(float64(m - s)))
					m = s
					for d := range acc {
						acc[d] = f16(acc[d] * ms)
					}
				} else {
					vs = float32(math.Exp(float64(s - m)))
				}
				for d := range acc { // ggml_vec_mad_f16: one fused multiply-add in float32
					acc[d] = f16(float32(math.FMA(float64(v[j*stride+kvo+d]), float64(vs), float64(acc[d]))))
				}
				l = l*ms + vs
			}
			if sinks != nil {
				s := sinks[h]
				ms, vs := float32(1), float32(1)
				if s > m {
					ms = float32(math.Exp(float64(m - s)))
					for d := range acc {
						acc[d] *= ms
					}
				} else {
					vs = float32(math.Exp(float64(s - m)))
				}
				l = l*ms + vs
			}
			for d := range acc {
				out[qo+d] = acc[d] / l
			}
		}
	}
	return out
}

// forwardLlamaCppQuant is forwardLlamaCpp with every product's input rounded as llama.cpp's
// CPU rounds it for the weight's type.
func forwardLlamaCppQuant(f *gguf.File, tokens []int32) ([]float32, error) {
	return forward(f, tokens, options{kvF16: true, actQuant: true})
}

// actRound is how llama.cpp's CPU build takes the input of a product with a weight of type t
// (the type's vec_dot_type): as it is for F32; rounded to F16 or BF16 for those; to Q8_0
// blocks of 32 for Q4_0, Q5_0, Q8_0, MXFP4 and IQ4_NL; to Q8_1 for Q4_1 and Q5_1 (the same
// values as Q8_0's; linearQ8_1 adds its block sums); to Q8_K blocks of 256 for the K-quants
// and the other IQ types.
func actRound(t gguf.GGMLType) func([]float32) []float32 {
	switch t.String() {
	case "F32":
		return func(x []float32) []float32 { return x }
	case "F16":
		return cpuref.ActF16
	case "BF16":
		return cpuref.ActBF16
	case "Q4_0", "Q5_0", "Q8_0", "MXFP4", "IQ4_NL", "Q4_1", "Q5_1":
		return cpuref.ActQ8_0
	}
	return cpuref.ActQ8_K
}

// weightType is the type of tensor name in f (F32 when absent).
func weightType(f *gguf.File, name string) gguf.GGMLType {
	if t, ok := f.Tensor(name); ok {
		return t.Type
	}
	return gguf.TypeF32
}

// storedRows resolves block il's tensor (its name in the block) to the tensor stored in f
// and the row its rows start at there, looking through the fused matrices loadLayer splits:
// attn_qkv (q's rows, then k's, then v's) and phi3's ffn_up (the gate's rows, then up's).
func storedRows(f *gguf.File, il int, tensor string, hp hparams) (name string, first int) {
	name = fmt.Sprintf("blk.%d.%s", il, tensor)
	if _, ok := f.Tensor(name); ok && !(tensor == "ffn_up.weight" && phi3FusedFFN(f, il)) {
		return name, 0
	}
	qDim, kvDim := hp.nHead*hp.headDim, hp.nKVHead*hp.headDim
	qkv := fmt.Sprintf("blk.%d.attn_qkv.weight", il)
	switch tensor {
	case "attn_q.weight":
		return qkv, 0
	case "attn_k.weight":
		return qkv, qDim
	case "attn_v.weight":
		return qkv, qDim + kvDim
	case "ffn_gate.weight":
		return fmt.Sprintf("blk.%d.ffn_up.weight", il), 0
	case "ffn_up.weight":
		return name, hp.nFF
	}
	return name, 0
}

// phi3FusedFFN says whether block il's ffn_up holds the gate's rows too (no ffn_gate).
func phi3FusedFFN(f *gguf.File, il int) bool {
	_, gate := f.Tensor(fmt.Sprintf("blk.%d.ffn_gate.weight", il))
	return !gate
}

// linearLlamaCpp is linear(w, b, rows, cols, x, nTokens) as llama.cpp's CPU computes it, w
// being the rows of f's tensor name from first on: the input rounded for the tensor's type
// (actRound), and the product of the float32 values; for Q4_1 and Q5_1, from the stored
// blocks, as ggml's AVX2 dot product with Q8_1 does (dotQ8_1); the bias added after.
func linearLlamaCpp(f *gguf.File, name string, first int, w, b []float32, rows, cols int, x []float32, nTokens int) []float32 {
	var y []float32
	if t, ok := f.Tensor(name); ok && (t.Type.String() == "Q4_1" || t.Type.String() == "Q5_1") {
		y = linearQ8_1(f.TensorData(t), t.Type.String() == "Q5_1", first, rows, cols, x, nTokens)
	} else {
		y = linear(w, nil, rows, cols, actRound(weightType(f, name))(x), nTokens)
	}
	if b != nil {
		for tk := range nTokens {
			for r := range rows {
				y[tk*rows+r] += b[r]
			}
		}
	}
	return y
}

// linearQ8_1 is the product of Q4_1 or Q5_1 rows (raw blocks: float16 d and m, Q5_1's 32
// high bits, 16 bytes of nibbles; rows from first on) with x quantized to Q8_1 (d = amax/127
// stored as float16, q = round-half-even(x * 127/amax), s = float16(d * sum q)), as ggml's
// AVX2 ggml_vec_dot_q{4,5}_1_q8_1 computes it: per block, eight lanes of four consecutive
// integer products, each lane += its sum * (d_w * d_x) (fused); sum m_w * s_x beside (fused);
// the lanes folded as hsum_float_8 does, plus that sum.
func linearQ8_1(raw []byte, q5 bool, first, rows, cols int, x []float32, nTokens int) []float32 {
	size := 20
	if q5 {
		size = 24
	}
	nb := cols / 32
	f16 := func(v float32) float32 { return gguf.F16ToF32(gguf.F32ToF16(v)) }
	fma := func(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }
	y := make([]float32, nTokens*rows)
	xq := make([]int32, cols)
	xd, xs := make([]float32, nb), make([]float32, nb)
	var wq [32]int32
	for tk := range nTokens {
		for blk := range nb { // quantize_row_q8_1
			v := x[tk*cols+blk*32 : tk*cols+blk*32+32]
			var amax float32
			for _, e := range v {
				amax = max(amax, float32(math.Abs(float64(e))))
			}
			d := amax / 127
			var id float32
			if amax != 0 {
				id = 127 / amax
			}
			var sum int32
			for i, e := range v {
				xq[blk*32+i] = int32(math.RoundToEven(float64(e * id)))
				sum += xq[blk*32+i]
			}
			xd[blk], xs[blk] = f16(d), f16(d*float32(sum))
		}
		for r := range rows {
			var acc [8]float32
			var summs float32
			for blk := range nb {
				bb := raw[((first+r)*nb+blk)*size:]
				dw := gguf.F16ToF32(binary.LittleEndian.Uint16(bb))
				mw := gguf.F16ToF32(binary.LittleEndian.Uint16(bb[2:]))
				qs := bb[4:20]
				var qh uint32
				if q5 {
					qh, qs = binary.LittleEndian.Uint32(bb[4:]), bb[8:24]
				}
				for j := range 16 {
					wq[j], wq[j+16] = int32(qs[j]&0xF), int32(qs[j]>>4)
					if q5 {
						wq[j] |= int32((qh>>j)&1) << 4
						wq[j+16] |= int32((qh>>(j+16))&1) << 4
					}
				}
				summs = fma(mw, xs[blk], summs)
				dd := dw * xd[blk]
				for l := range 8 {
					var q int32
					for i := 4 * l; i < 4*l+4; i++ {
						q += wq[i] * xq[blk*32+i]
					}
					acc[l] = fma(float32(q), dd, acc[l])
				}
			}
			y[tk*rows+r] = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7])) + summs
		}
	}
	return y
}

// dotF16 is ggml_vec_dot_f16 as llama.cpp's x86 build (AVX2, FMA) computes it on float16
// values: in runs of 32, four accumulators of eight lanes, each lane a fused multiply-add,
// then the accumulators added pairwise (0+2, 1+3, then the two), the eight lanes folded
// (l + l+4, then two horizontal adds), in float32; the leftover elements added in float64.
// Its summation order matters: a last-bit difference in a score can flip the float16 rounding
// of the running output.
func dotF16(x, y []float32) float32 {
	fma := func(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }
	np := len(x) &^ 31
	var acc [4][8]float32
	for i := 0; i < np; i += 32 {
		for j := range 4 {
			for l := range 8 {
				acc[j][l] = fma(x[i+8*j+l], y[i+8*j+l], acc[j][l])
			}
		}
	}
	var lanes [8]float32
	for l := range 8 {
		lanes[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l])
	}
	t0 := [4]float32{lanes[0] + lanes[4], lanes[1] + lanes[5], lanes[2] + lanes[6], lanes[3] + lanes[7]}
	sum := float64((t0[0] + t0[1]) + (t0[2] + t0[3]))
	for i := np; i < len(x); i++ {
		sum += float64(x[i] * y[i])
	}
	return float32(sum)
}
