package gguf

import "math"

// F16ToF32 widens an IEEE binary16 value exactly (subnormals, infinities and NaN payloads
// included), as ggml's GGML_FP16_TO_FP32 does.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf / NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: mant * 2^-24; normalise it.
	e := uint32(127 - 14)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}

// F32ToF16 narrows to binary16 with round-to-nearest-even, overflow to infinity and NaN mapped
// to the quiet NaN 0x7E00 (sign kept). It is ggml's scalar ggml_compute_fp32_to_fp16, bit for
// bit, so F16 tensors and KV-cache values match llama.cpp's CPU backend.
func F32ToF16(f float32) uint16 {
	const scaleToInf = 0x1.0p+112
	const scaleToZero = 0x1.0p-110
	w := math.Float32bits(f)
	abs := math.Float32frombits(w &^ 0x80000000)
	// The explicit conversions force rounding after each step (Go may otherwise fuse them).
	base := float32(float32(abs*scaleToInf) * scaleToZero)
	shl1W := w + w
	sign := w & 0x80000000
	bias := shl1W & 0xFF000000
	if bias < 0x71000000 {
		bias = 0x71000000
	}
	base = float32(math.Float32frombits((bias>>1)+0x07800000) + base)
	b := math.Float32bits(base)
	expBits := (b >> 13) & 0x00007C00
	mantBits := b & 0x00000FFF
	if shl1W > 0xFF000000 {
		return uint16(sign>>16) | 0x7E00
	}
	return uint16(sign>>16 | (expBits + mantBits))
}

// BF16ToF32 widens a bfloat16 value (the top half of a float32), exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 narrows to bfloat16 with round-to-nearest-even, quieting NaNs, as ggml's
// ggml_compute_fp32_to_bf16 does.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + (0x7fff + (u>>16)&1)) >> 16)
}
