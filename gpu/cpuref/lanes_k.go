package cpuref

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/iqgrid"
)

// MatMulSuperLanes is llama.cpp's CPU product on x86 with AVX2 and FMA of 256-element
// superblock weights that it does not repack there (Q2_K, Q5_K, Q6_K and the IQ types but
// IQ4_NL) with the activations rounded to Q8_K: the ggml_vec_dot_<type>_q8_K of each row and
// token. Every one of those kernels sums exact integer products into 8 int32 lanes, lane l
// taking the elements whose place in their 32-block is 4l .. 4l + 3 (32 activation bytes to
// a register, pairs folded twice), each times its sub-block's integer scale; per superblock
// the lanes are converted and fused into 8 float accumulators as fma(d_w·d_x, lane, acc); the
// accumulators are folded as hsum_float_8 at the end. What each type adds (its minimums, its
// offsets, IQ1's deltas, a final power of two) is superTerms'. Output is (nTokens, rows).
func MatMulSuperLanes(t gguf.GGMLType, w []byte, rows, cols int, x []float32, nTokens int) ([]float32, error) {
	st, ok := superTypes[t]
	if !ok {
		return nil, fmt.Errorf("cpuref: no superblock lane order for %s", t)
	}
	nb := cols / 256
	out := make([]float32, nTokens*rows)
	var terms superTerms
	for tk := range nTokens {
		xd, xq := q8KBlocks(x[tk*cols : (tk+1)*cols])
		for r := range rows {
			var acc, acc2 [8]float32
			var accMin [4]float32 // Q4_K's minimums: a lane per 64 elements
			var summs float32
			for b := range nb {
				blk := w[(r*nb+b)*st.size : (r*nb+b+1)*st.size]
				st.decode(blk, &terms)
				q := xq[256*b : 256*b+256]
				d := st.d(blk) * xd[b]
				switch {
				case terms.minLanes: // Q2_K: its minimums' lanes first, with -d_x·dmin
					dmin := -(xd[b] * f16At(blk[82:]))
					for l := range 8 {
						acc[l] = fmaOnce(dmin, float32(blockSum(&terms.min, q, l)), acc[l])
					}
				case terms.minLanes4: // Q4_K: in 4 lanes, a lane two 32-blocks
					dmin := -(xd[b] * f16At(blk[2:]))
					for k := range 4 {
						s := blockSum(&terms.min, q, 2*k) + blockSum(&terms.min, q, 2*k+1)
						accMin[k] = fmaOnce(dmin, float32(s), accMin[k])
					}
				case terms.minSum: // Q5_K: a scalar sum of the minimums
					dmin := -(xd[b] * f16At(blk[2:]))
					var s int32
					for l := range 8 {
						s += blockSum(&terms.min, q, l)
					}
					summs = fmaOnce(dmin, float32(s), summs)
				}
				for l := range 8 {
					lane := laneSum(&terms.p, q, l)
					if terms.offset != 0 { // Q6_K: 32 times the scales' block sums off each lane
						lane -= terms.offset * blockSum(&terms.scale, q, l)
					}
					acc[l] = fmaOnce(d, float32(lane), acc[l])
					if terms.deltaLanes { // IQ1_M
						acc2[l] = fmaOnce(d, float32(laneSum(&terms.delta, q, l)), acc2[l])
					}
				}
				if terms.deltaSum { // IQ1_S: the deltas' sum, in a scalar
					var s int32
					for l := range 8 {
						s += blockSum(&terms.delta, q, l)
					}
					summs = fmaOnce(d, float32(s), summs)
				}
			}
			v := st.tail * hsum8(acc)
			switch {
			case terms.deltaLanes:
				v += 0.125 * hsum8(acc2)
			case terms.deltaSum:
				v += 0.125 * summs
			case terms.minSum:
				v += summs
			case terms.minLanes4:
				v += (accMin[0] + accMin[2]) + (accMin[1] + accMin[3])
			}
			out[tk*rows+r] = v
		}
	}
	return out, nil
}

// SuperLaneTypes are the types MatMulSuperLanes reproduces.
var SuperLaneTypes = []gguf.GGMLType{gguf.TypeQ2_K, gguf.TypeQ3_K, gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K, gguf.TypeIQ2_XXS,
	gguf.TypeIQ2_XS, gguf.TypeIQ2_S, gguf.TypeIQ3_XXS, gguf.TypeIQ3_S, gguf.TypeIQ4_XS, gguf.TypeIQ1_S, gguf.TypeIQ1_M}

// RandomSuperBlocks is test input: n random blocks of type t, random bytes (every pattern is a valid
// block) with the block's f16 scales set to sane values.
func RandomSuperBlocks(rng *rand.Rand, t gguf.GGMLType, n int) []byte {
	ts := int(t.TypeSize())
	out := make([]byte, n*ts)
	for i := range out {
		out[i] = byte(rng.Uint32())
	}
	for b := range n {
		x := out[b*ts : (b+1)*ts]
		d := gguf.F32ToF16(float32(rng.NormFloat64()) * 0x1p-8)
		m := gguf.F32ToF16(float32(rng.NormFloat64()) * 0x1p-9)
		switch t {
		case gguf.TypeQ2_K:
			binary.LittleEndian.PutUint16(x[80:], d)
			binary.LittleEndian.PutUint16(x[82:], m)
		case gguf.TypeQ4_K, gguf.TypeQ5_K:
			binary.LittleEndian.PutUint16(x[0:], d)
			binary.LittleEndian.PutUint16(x[2:], m)
		case gguf.TypeQ3_K:
			binary.LittleEndian.PutUint16(x[108:], d)
		case gguf.TypeQ6_K:
			binary.LittleEndian.PutUint16(x[208:], d)
		case gguf.TypeIQ1_M: // d's nibbles at the top of the four scale words
			for i := range 4 {
				x[48+2*i+1] = x[48+2*i+1]&0x0F | byte(d>>(4*i)&0xF)<<4
			}
		default:
			binary.LittleEndian.PutUint16(x, d)
		}
	}
	return out
}

// superTerms are one superblock's integer weights as its vec_dot multiplies them: p the
// products of each element's quant and sub-block scale; min, scale and delta, where the type
// has them, the same for its minimums, scales and IQ1's delta signs times scales.
type superTerms struct {
	p, min, scale, delta        [256]int32
	offset                      int32 // Q6_K's 32
	minLanes, minLanes4, minSum bool
	deltaLanes, deltaSum        bool
}

// superType is a superblock type's layout for MatMulSuperLanes.
type superType struct {
	size   int                             // bytes a block
	d      func(blk []byte) float32        // the weight's scale
	decode func(blk []byte, t *superTerms) // the block's integer terms
	tail   float32                         // what the lanes' fold is multiplied by at the end
}

var superTypes = map[gguf.GGMLType]superType{
	gguf.TypeQ2_K: {84, func(b []byte) float32 { return f16At(b[80:]) }, func(b []byte, t *superTerms) {
		*t = superTerms{minLanes: true}
		unitScaled(gguf.TypeQ2_K, b, 80, 82, t.p[:], 1)    // sc·q
		unitScaled(gguf.TypeQ2_K, b, 82, 80, t.min[:], -1) // m
	}, 1},
	gguf.TypeQ3_K: iqSuperAt(gguf.TypeQ3_K, 110, 108),
	gguf.TypeQ4_K: {144, func(b []byte) float32 { return f16At(b[0:]) }, func(b []byte, t *superTerms) {
		*t = superTerms{minLanes4: true}
		unitScaled(gguf.TypeQ4_K, b, 0, 2, t.p[:], 1)
		unitScaled(gguf.TypeQ4_K, b, 2, 0, t.min[:], -1)
	}, 1},
	gguf.TypeQ5_K: {176, func(b []byte) float32 { return f16At(b[0:]) }, func(b []byte, t *superTerms) {
		*t = superTerms{minSum: true}
		unitScaled(gguf.TypeQ5_K, b, 0, 2, t.p[:], 1)
		unitScaled(gguf.TypeQ5_K, b, 2, 0, t.min[:], -1)
	}, 1},
	gguf.TypeQ6_K: {210, func(b []byte) float32 { return f16At(b[208:]) }, func(b []byte, t *superTerms) {
		*t = superTerms{offset: 32}
		unitScaled(gguf.TypeQ6_K, b, 208, -1, t.p[:], 1) // sc·(q - 32)
		for e := range 256 {
			t.scale[e] = int32(int8(b[192+e/16]))
			t.p[e] += 32 * t.scale[e] // sc·q: the kernel's unsigned quants
		}
	}, 1},
	gguf.TypeIQ2_XXS: iqSuper(gguf.TypeIQ2_XXS, 66, 8, 0.125),
	gguf.TypeIQ2_XS:  iqSuper(gguf.TypeIQ2_XS, 74, 8, 0.125),
	gguf.TypeIQ2_S:   iqSuper(gguf.TypeIQ2_S, 82, 8, 0.125),
	gguf.TypeIQ3_XXS: iqSuper(gguf.TypeIQ3_XXS, 98, 4, 0.25),
	gguf.TypeIQ3_S:   iqSuper(gguf.TypeIQ3_S, 110, 1, 1),
	gguf.TypeIQ4_XS:  iqSuper(gguf.TypeIQ4_XS, 136, 1, 1),
	gguf.TypeIQ1_S:   {50, func(b []byte) float32 { return f16At(b) }, decodeIQ1SLanes, 1},
	gguf.TypeIQ1_M:   {56, iq1MScale, decodeIQ1MLanes, 1},
}

// iqSuper is the layout of an IQ type whose dequantized value is d·p/unit for an integer
// product p of grid point, sign and sub-block scale (d at byte 0).
func iqSuper(t gguf.GGMLType, size int, unit, tail float32) superType {
	return superType{size, func(b []byte) float32 { return f16At(b) }, func(b []byte, st *superTerms) {
		*st = superTerms{}
		unitScaled(t, b, 0, -1, st.p[:], unit)
	}, tail}
}

// iqSuperAt is iqSuper for a type with d at byte at and integer products (Q3_K's signed
// quants times scales).
func iqSuperAt(t gguf.GGMLType, size, at int) superType {
	return superType{size, func(b []byte) float32 { return f16At(b[at:]) }, func(b []byte, st *superTerms) {
		*st = superTerms{}
		unitScaled(t, b, at, -1, st.p[:], 1)
	}, 1}
}

// unitScaled decodes blk with its f16 at byte one set to 1 (and the one at byte zero, unless
// negative, to 0), so that each value is the integer term times 1/unit, and stores those
// integers (exact: small integers and powers of two).
func unitScaled(t gguf.GGMLType, blk []byte, one, zero int, dst []int32, unit float32) {
	b := append([]byte(nil), blk...)
	binary.LittleEndian.PutUint16(b[one:], 0x3C00)
	if zero >= 0 {
		binary.LittleEndian.PutUint16(b[zero:], 0)
	}
	var y [256]float32
	if err := gguf.Dequantize(t, b, y[:]); err != nil {
		panic(err)
	}
	for e, v := range y {
		dst[e] = int32(v * unit)
	}
}

// decodeIQ1SLanes is IQ1_S's terms: per element its scale (2s + 1) times its grid value; per
// element the scale times the delta's sign (bit 15 of its 32-block's qh).
func decodeIQ1SLanes(b []byte, t *superTerms) {
	*t = superTerms{deltaSum: true}
	for ib := range 8 {
		qh := binary.LittleEndian.Uint16(b[34+2*ib:])
		ls := 2*int32(qh>>12&7) + 1
		sign := int32(1)
		if qh&0x8000 != 0 {
			sign = -1
		}
		for l := range 4 {
			g := iqgrid.IQ1S(int(b[2+4*ib+l]) | int(qh>>(3*l)&7)<<8)
			for j := range 8 {
				e := 32*ib + 8*l + j
				t.p[e] = ls * int32(int8(g>>(8*j)))
				t.delta[e] = ls * sign
			}
		}
	}
}

// decodeIQ1MLanes is IQ1_M's terms: decodeIQ1SLanes' with a 3-bit scale per 16 elements and a
// delta sign per 8 (the top bit of the group's qh nibble).
func decodeIQ1MLanes(b []byte, t *superTerms) {
	*t = superTerms{deltaLanes: true}
	qs, qh, sc := b[0:32], b[32:48], b[48:56]
	for ib := range 8 {
		s := binary.LittleEndian.Uint16(sc[2*(ib/2):])
		shift := 6 * (ib % 2)
		ls := [2]int32{2*int32(s>>shift&7) + 1, 2*int32(s>>(shift+3)&7) + 1}
		for l := range 4 {
			h := qh[2*ib+l/2] >> (4 * (l % 2))
			sign := int32(1)
			if h&8 != 0 {
				sign = -1
			}
			g := iqgrid.IQ1S(int(qs[4*ib+l]) | int(h&7)<<8)
			for j := range 8 {
				e := 32*ib + 8*l + j
				t.p[e] = ls[l/2] * int32(int8(g>>(8*j)))
				t.delta[e] = ls[l/2] * sign
			}
		}
	}
}

// iq1MScale is IQ1_M's d: an f16 of the four scale words' top nibbles.
func iq1MScale(b []byte) float32 {
	var u uint16
	for i := range 4 {
		u |= binary.LittleEndian.Uint16(b[48+2*i:]) >> 12 << (4 * i)
	}
	return gguf.F16ToF32(u)
}

// laneSum is lane l of a superblock: the terms' products with the activations at the places
// 4l .. 4l + 3 of each 32-block.
func laneSum(terms *[256]int32, q []int8, l int) int32 {
	var s int32
	for e := range 256 {
		if e%32/4 == l {
			s += terms[e] * int32(q[e])
		}
	}
	return s
}

// blockSum is the terms' products with the activations of 32-block l (what the kernels build
// from Q8_K's 16-element sums, bsums, one lane a 32-block).
func blockSum(terms *[256]int32, q []int8, l int) int32 {
	var s int32
	for e := 32 * l; e < 32*l+32; e++ {
		s += terms[e] * int32(q[e])
	}
	return s
}

// hsum8 is hsum_float_8's fold of 8 lanes.
func hsum8(l [8]float32) float32 {
	return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}

// q8KBlocks is ActQ8_K's rounding as llama.cpp stores it: each block's d (1/iscale) and the
// int8 values.
func q8KBlocks(x []float32) (d []float32, q []int8) {
	d, q = make([]float32, len(x)/256), make([]int8, len(x))
	for b := range d {
		var amax, mx float32
		for _, v := range x[256*b : 256*b+256] {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		if amax == 0 {
			continue
		}
		iscale := -127 / mx
		d[b] = 1 / iscale
		for j, v := range x[256*b : 256*b+256] {
			q[256*b+j] = int8(math.Min(127, math.RoundToEven(float64(iscale*v))))
		}
	}
	return d, q
}

// f16At is the f16 at the start of b.
func f16At(b []byte) float32 { return gguf.F16ToF32(binary.LittleEndian.Uint16(b)) }
