package cpuref

import (
	"math"
	"math/big"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// MatMulQ8_0Lanes is llama.cpp's CPU product on x86 with AVX2 of Q8_0 weights w (ggml's
// blocks: f16 d, 32 int8; rows of cols values) with the activations x rounded to Q8_0
// (ActQ8_0), nTokens rows of cols: per block the int8 products summed in 8 lanes of 4, each
// lane accumulated over the blocks as fma(d_w·d_x, lane, acc) rounded once, the lanes folded
// as hsum_float_8 folds them. ggml_vec_dot_q8_0_q8_0 (one token) and llamafile's
// tinyBLAS_Q0_AVX (batches) both sum so. Output is (nTokens, rows).
func MatMulQ8_0Lanes(w []byte, rows, cols int, x []float32, nTokens int) []float32 {
	return matMulInt8Lanes(w, 34, func(b []byte, q *[32]int8) {
		for j := range q {
			q[j] = int8(b[2+j])
		}
	}, rows, cols, x, nTokens)
}

// MatMulQ5_0Lanes is MatMulQ8_0Lanes for Q5_0 weights (ggml's blocks: f16 d, u32 qh, 16
// nibble bytes; values q - 16), as ggml_vec_dot_q5_0_q8_0 sums them.
func MatMulQ5_0Lanes(w []byte, rows, cols int, x []float32, nTokens int) []float32 {
	return matMulInt8Lanes(w, 22, func(b []byte, q *[32]int8) {
		qh := uint32(b[2]) | uint32(b[3])<<8 | uint32(b[4])<<16 | uint32(b[5])<<24
		for j := range q {
			nib := b[6+j%16] >> (4 * (j / 16)) & 0xF
			q[j] = int8(nib|byte(qh>>j&1)<<4) - 16
		}
	}, rows, cols, x, nTokens)
}

// MatMulQ4_1Lanes is MatMulQ8_0Lanes for Q4_1 weights (ggml's blocks: f16 d, f16 m, 16 nibble
// bytes) with activations rounded to Q8_1, as ggml_vec_dot_q4_1_q8_1 sums them: the unsigned
// values' lanes, and each block's m times the activations' f16(d·Σq) fused into a scalar sum
// added after the lanes' fold.
func MatMulQ4_1Lanes(w []byte, rows, cols int, x []float32, nTokens int) []float32 {
	return matMulInt8Lanes(w, 20, func(b []byte, q *[32]int8) {
		for j := range q {
			q[j] = int8(b[4+j%16] >> (4 * (j / 16)) & 0xF)
		}
	}, rows, cols, x, nTokens)
}

// MatMulQ5_1Lanes is MatMulQ4_1Lanes for Q5_1 weights (f16 d, f16 m, u32 qh, 16 nibble bytes).
func MatMulQ5_1Lanes(w []byte, rows, cols int, x []float32, nTokens int) []float32 {
	return matMulInt8Lanes(w, 24, func(b []byte, q *[32]int8) {
		qh := uint32(b[4]) | uint32(b[5])<<8 | uint32(b[6])<<16 | uint32(b[7])<<24
		for j := range q {
			q[j] = int8(b[8+j%16]>>(4*(j/16))&0xF | byte(qh>>j&1)<<4)
		}
	}, rows, cols, x, nTokens)
}

// matMulInt8Lanes is the lane-order product of blocks of blockBytes bytes, each an f16 scale
// (and with a minimum, blockBytes 20 or 24, an f16 m after it) and the 32 int8 values decode
// gives.
func matMulInt8Lanes(w []byte, blockBytes int, decode func([]byte, *[32]int8), rows, cols int, x []float32, nTokens int) []float32 {
	nb := cols / 32
	withMin := blockBytes == 20 || blockBytes == 24
	out := make([]float32, nTokens*rows)
	var q [32]int8
	for t := range nTokens {
		xr := x[t*cols : (t+1)*cols]
		xd, xq := q8Blocks(xr)
		xs := ActQ8_1Sums(xr)
		for r := range rows {
			var lane [8]float32
			var summs float32
			for b := range nb {
				blk := w[(r*nb+b)*blockBytes:]
				decode(blk, &q)
				d := gguf.F16ToF32(uint16(blk[0])|uint16(blk[1])<<8) * xd[b]
				if withMin {
					summs = fmaOnce(gguf.F16ToF32(uint16(blk[2])|uint16(blk[3])<<8), xs[b], summs)
				}
				for l := range lane {
					var s int32
					for i := 4 * l; i < 4*l+4; i++ {
						s += int32(q[i]) * int32(xq[32*b+i])
					}
					lane[l] = fmaOnce(d, float32(s), lane[l])
				}
			}
			out[t*rows+r] = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7])) + summs
		}
	}
	return out
}

// q8Blocks is ActQ8_0's rounding of x as llama.cpp stores it: each block's f16 scale (as
// f32) and the int8 values.
func q8Blocks(x []float32) (d []float32, q []int8) {
	d, q = make([]float32, len(x)/32), make([]int8, len(x))
	for b := range d {
		var amax float32
		for _, v := range x[32*b : 32*b+32] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d[b] = f16Round(amax / 127)
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		for j, v := range x[32*b : 32*b+32] {
			q[32*b+j] = int8(math.RoundToEven(float64(v * id)))
		}
	}
	return d, q
}

// FMAOnce is a*b + c rounded once to f32, as a fused multiply-add rounds it.
func FMAOnce(a, b, c float32) float32 { return fmaOnce(a, b, c) }

// fmaOnce is FMAOnce.
func fmaOnce(a, b, c float32) float32 {
	// a*b is exact in float64; their sum with c exact at this precision (the values here
	// are within a few hundred binary orders of each other).
	var s big.Float
	s.SetPrec(400).SetFloat64(float64(a) * float64(b))
	s.Add(&s, new(big.Float).SetFloat64(float64(c)))
	f, _ := s.Float32()
	return f
}

// DotF32VecDot is ggml_vec_dot_f32 on x86 with AVX2 and FMA (one token's product with F32
// weights): element i of each run of 32 fused into lane i % 32, the lanes folded by
// GGML_F32_VEC_REDUCE, then the last len % 32 elements added one by one as GCC compiles the
// C++ loop sum += x * y: it vectorizes the leftovers four at a time as an in-order reduction
// (the four products rounded, then added in order) and contracts the last len % 4 into fused
// multiply-adds (checked against llama.cpp's library: cpuref's TestVecDotF32IsGGMLs).
func DotF32VecDot(x, y []float32) float32 {
	var lane [32]float32
	whole := len(x) &^ 31
	for i := 0; i < whole; i++ {
		lane[i%32] = fmaOnce(x[i], y[i], lane[i%32])
	}
	sum := fold32(&lane)
	fours := whole + (len(x)-whole)&^3
	for i := whole; i < len(x); i++ {
		if i < fours {
			sum += float32(x[i] * y[i]) // the conversion rounds the product: no fused multiply-add
		} else {
			sum = fmaOnce(x[i], y[i], sum)
		}
	}
	return sum
}

// DotF32TinyBLAS is llamafile's tinyBLAS on x86 with AVX2 (a batch's product with F32
// weights, rows a multiple of 8): element i fused into lane i % 8, the lanes folded as
// hsum_float_8 folds them.
func DotF32TinyBLAS(x, y []float32) float32 {
	var l [8]float32
	for i := range x {
		l[i%8] = fmaOnce(x[i], y[i], l[i%8])
	}
	return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}
