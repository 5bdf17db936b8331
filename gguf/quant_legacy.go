package gguf

import (
	"encoding/binary"
	"math"
)

// The legacy block types: 32 elements per block, one f16 scale (and for the _1 types an f16
// minimum) followed by the quants. Layouts are ggml-common.h's block_q4_0 ... block_q8_0.
//
// Float expressions that multiply and then add are written as float32(a*b) + c: the explicit
// conversion forbids the compiler from fusing them into an FMA (which Go may do on arm64 and
// others), since llama.cpp's reference code rounds the product first.

const (
	qkLegacy = 32
	sizeQ4_0 = 2 + 16
	sizeQ4_1 = 2 + 2 + 16
	sizeQ5_0 = 2 + 4 + 16
	sizeQ5_1 = 2 + 2 + 4 + 16
	sizeQ8_0 = 2 + 32
)

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

// absMax returns the element of largest magnitude (the first one on ties), keeping its sign,
// as quantize_row_q4_0_ref and q5_0 pick their scale.
func absMax(x []float32) float32 {
	var amax, m float32
	for _, v := range x {
		if a := abs32(v); amax < a {
			amax, m = a, v
		}
	}
	return m
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

func inverse(d float32) float32 {
	if d != 0 {
		return 1 / d
	}
	return 0
}

// truncInt8 is C's (int8_t) cast of a float as x86 compilers emit it: truncate toward zero
// to 32 bits, keep the low byte.
func truncInt8(f float32) int32 { return int32(int8(int32(f))) }

func decodeQ4_0(src []byte, dst []float32) {
	for b := range len(dst) / qkLegacy {
		x := src[b*sizeQ4_0 : (b+1)*sizeQ4_0]
		y := dst[b*qkLegacy : (b+1)*qkLegacy]
		d := f16At(x)
		qs := x[2:18]
		for j := range 16 {
			y[j] = float32(int32(qs[j]&0x0F)-8) * d
			y[j+16] = float32(int32(qs[j]>>4)-8) * d
		}
	}
}

func encodeQ4_0(src []float32, dst []byte) {
	for b := range len(src) / qkLegacy {
		x := src[b*qkLegacy : (b+1)*qkLegacy]
		y := dst[b*sizeQ4_0 : (b+1)*sizeQ4_0]
		d := absMax(x) / -8
		id := inverse(d)
		putF16(y, d)
		for j := range 16 {
			x0 := x[j] * id
			x1 := x[j+16] * id
			xi0 := min(15, truncInt8(x0+8.5))
			xi1 := min(15, truncInt8(x1+8.5))
			y[2+j] = uint8(xi0) | uint8(xi1)<<4
		}
	}
}

func decodeQ4_1(src []byte, dst []float32) {
	for b := range len(dst) / qkLegacy {
		x := src[b*sizeQ4_1 : (b+1)*sizeQ4_1]
		y := dst[b*qkLegacy : (b+1)*qkLegacy]
		d, m := f16At(x), f16At(x[2:])
		qs := x[4:20]
		for j := range 16 {
			y[j] = float32(float32(qs[j]&0x0F)*d) + m
			y[j+16] = float32(float32(qs[j]>>4)*d) + m
		}
	}
}

func encodeQ4_1(src []float32, dst []byte) {
	for b := range len(src) / qkLegacy {
		x := src[b*qkLegacy : (b+1)*qkLegacy]
		y := dst[b*sizeQ4_1 : (b+1)*sizeQ4_1]
		lo, hi := minMax(x)
		d := (hi - lo) / 15
		id := inverse(d)
		putF16(y, d)
		putF16(y[2:], lo)
		for j := range 16 {
			x0 := (x[j] - lo) * id
			x1 := (x[j+16] - lo) * id
			xi0 := min(15, truncInt8(x0+0.5))
			xi1 := min(15, truncInt8(x1+0.5))
			y[4+j] = uint8(xi0) | uint8(xi1)<<4
		}
	}
}

func decodeQ5_0(src []byte, dst []float32) {
	for b := range len(dst) / qkLegacy {
		x := src[b*sizeQ5_0 : (b+1)*sizeQ5_0]
		y := dst[b*qkLegacy : (b+1)*qkLegacy]
		d := f16At(x)
		qh := binary.LittleEndian.Uint32(x[2:])
		qs := x[6:22]
		for j := range 16 {
			h0 := uint8(qh>>j<<4) & 0x10
			h1 := uint8(qh>>(j+12)) & 0x10
			y[j] = float32(int32(qs[j]&0x0F|h0)-16) * d
			y[j+16] = float32(int32(qs[j]>>4|h1)-16) * d
		}
	}
}

func encodeQ5_0(src []float32, dst []byte) {
	for b := range len(src) / qkLegacy {
		x := src[b*qkLegacy : (b+1)*qkLegacy]
		y := dst[b*sizeQ5_0 : (b+1)*sizeQ5_0]
		d := absMax(x) / -16
		id := inverse(d)
		putF16(y, d)
		var qh uint32
		for j := range 16 {
			x0 := x[j] * id
			x1 := x[j+16] * id
			xi0 := uint8(min(31, truncInt8(x0+16.5)))
			xi1 := uint8(min(31, truncInt8(x1+16.5)))
			y[6+j] = xi0&0x0F | (xi1&0x0F)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		binary.LittleEndian.PutUint32(y[2:], qh)
	}
}

func decodeQ5_1(src []byte, dst []float32) {
	for b := range len(dst) / qkLegacy {
		x := src[b*sizeQ5_1 : (b+1)*sizeQ5_1]
		y := dst[b*qkLegacy : (b+1)*qkLegacy]
		d, m := f16At(x), f16At(x[2:])
		qh := binary.LittleEndian.Uint32(x[4:])
		qs := x[8:24]
		for j := range 16 {
			h0 := uint8(qh>>j<<4) & 0x10
			h1 := uint8(qh>>(j+12)) & 0x10
			y[j] = float32(float32(qs[j]&0x0F|h0)*d) + m
			y[j+16] = float32(float32(qs[j]>>4|h1)*d) + m
		}
	}
}

func encodeQ5_1(src []float32, dst []byte) {
	for b := range len(src) / qkLegacy {
		x := src[b*qkLegacy : (b+1)*qkLegacy]
		y := dst[b*sizeQ5_1 : (b+1)*sizeQ5_1]
		lo, hi := minMax(x)
		d := (hi - lo) / 31
		id := inverse(d)
		putF16(y, d)
		putF16(y[2:], lo)
		var qh uint32
		for j := range 16 {
			x0 := (x[j] - lo) * id
			x1 := (x[j+16] - lo) * id
			// quantize_row_q5_1_ref casts to uint8_t without clamping.
			xi0 := uint8(int32(x0 + 0.5))
			xi1 := uint8(int32(x1 + 0.5))
			y[8+j] = xi0&0x0F | (xi1&0x0F)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		binary.LittleEndian.PutUint32(y[4:], qh)
	}
}

func decodeQ8_0(src []byte, dst []float32) {
	for b := range len(dst) / qkLegacy {
		x := src[b*sizeQ8_0 : (b+1)*sizeQ8_0]
		y := dst[b*qkLegacy : (b+1)*qkLegacy]
		d := f16At(x)
		for j, q := range x[2:34] {
			y[j] = float32(int8(q)) * d
		}
	}
}

func encodeQ8_0(src []float32, dst []byte) {
	for b := range len(src) / qkLegacy {
		x := src[b*qkLegacy : (b+1)*qkLegacy]
		y := dst[b*sizeQ8_0 : (b+1)*sizeQ8_0]
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		d := amax / 127
		id := inverse(d)
		putF16(y, d)
		for j, v := range x {
			// roundf: half away from zero, exact in float64 for a float32 input.
			y[2+j] = uint8(int32(math.Round(float64(v * id))))
		}
	}
}
