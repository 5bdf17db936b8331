package cpuref

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/gguf"
)

// MatMulRepacked8 is llama.cpp's CPU product on x86 with AVX2 of weights it repacks eight rows
// to a block there (rows a multiple of 8: Q4_0, IQ4_NL and MXFP4 with Q8_0 activations, Q4_K
// with Q8_K ones; arch/x86/repack.cpp's gemv and gemm). Each output is one float chain: per
// block the exact integer sum of quant times activation (Q4_K: times the sub-blocks' 6-bit
// scales) fused as fma(sum, d_w·d_x, acc). Q4_K keeps its minimums in a second chain, fused
// the same way with dmin_w·d_x, and subtracts it at the end; its gemm, which takes the first
// gemmTokens tokens (llama.cpp: the row count less its remainder mod 4), fuses every 64
// elements, its gemv (the rest, and every mul_mat_id) every superblock. Output is (nTokens,
// rows).
func MatMulRepacked8(t gguf.GGMLType, w []byte, rows, cols int, x []float32, nTokens, gemmTokens int) ([]float32, error) {
	out := make([]float32, nTokens*rows)
	switch t {
	case gguf.TypeQ4_0, gguf.TypeIQ4_NL, gguf.TypeMXFP4:
		size := int(t.TypeSize())
		nb := cols / 32
		for tk := range nTokens {
			xd, xq := q8Blocks(x[tk*cols : (tk+1)*cols])
			for r := range rows {
				var acc float32
				for b := range nb {
					blk := w[(r*nb+b)*size : (r*nb+b+1)*size]
					d, q := unitBlock32(t, blk)
					var s int32
					for i := range q {
						s += q[i] * int32(xq[32*b+i])
					}
					acc = fmaOnce(float32(s), d*xd[b], acc)
				}
				out[tk*rows+r] = acc
			}
		}
	case gguf.TypeQ4_K:
		nb := cols / 256
		var p, m [256]int32
		for tk := range nTokens {
			xd, xq := q8KBlocks(x[tk*cols : (tk+1)*cols])
			group := 256 // elements per fused sum: gemv's superblock
			if tk < gemmTokens {
				group = 64
			}
			for r := range rows {
				var acc, accMin float32
				for b := range nb {
					blk := w[(r*nb+b)*144 : (r*nb+b+1)*144]
					unitScaled(t, blk, 0, 2, p[:], 1)  // sc·q
					unitScaled(t, blk, 2, 0, m[:], -1) // the sub-block's minimum
					d, dmin := f16At(blk)*xd[b], f16At(blk[2:])*xd[b]
					for g := 0; g < 256; g += group {
						var s, sm int32
						for e := g; e < g+group; e++ {
							s += p[e] * int32(xq[256*b+e])
							sm += m[e] * int32(xq[256*b+e])
						}
						acc = fmaOnce(float32(s), d, acc)
						accMin = fmaOnce(float32(sm), dmin, accMin)
					}
				}
				out[tk*rows+r] = acc - accMin
			}
		}
	default:
		return nil, fmt.Errorf("cpuref: %s is not repacked eight rows to a block on x86", t)
	}
	return out, nil
}

// unitBlock32 is a 32-block's scale and its integer values: Q4_0's q - 8, IQ4_NL's and
// MXFP4's table levels (MXFP4's doubled, with its E8M0 scale halved, as ggml stores them).
func unitBlock32(t gguf.GGMLType, blk []byte) (float32, [32]int32) {
	b := append([]byte(nil), blk...)
	var d float32
	if t == gguf.TypeMXFP4 {
		d = float32(math.Ldexp(1, int(b[0])-128))
		if b[0] < 2 {
			d = math.Float32frombits(0x00200000 << b[0])
		}
		b[0] = 128 // a scale of 1
	} else {
		d = f16At(b)
		binary.LittleEndian.PutUint16(b, 0x3C00)
	}
	var y [32]float32
	if err := gguf.Dequantize(t, b, y[:]); err != nil {
		panic(err)
	}
	var q [32]int32
	for i, v := range y {
		q[i] = int32(v)
	}
	return d, q
}
