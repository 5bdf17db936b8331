package gguf

import (
	"encoding/binary"
	"math"
)

// The non-linear 4-bit types: each 4-bit quant picks one of 16 fixed levels (iq4nlValues or
// mxfp4Values, quant_iq_values.go) that the block's scale multiplies. Byte layouts, from
// ggml-common.h:
//
//	IQ4_NL  18 B, 32 elements: d (f16), qs[16] (element l < 16 the low nibble of qs[l], 16 + l the high)
//	IQ4_XS 136 B, 256 elements: d (f16), scales_h (u16: 2 high bits of each sub-block scale),
//	       scales_l[4] (4 low bits), qs[128] (per 32 elements, 16 bytes as IQ4_NL's)
//	MXFP4   17 B, 32 elements: e (E8M0 power-of-two scale), qs[16] (as IQ4_NL's)
//
// The other IQ types are in quant_iq1.go, quant_iq2.go and quant_iq3.go.

const (
	sizeIQ4_NL = 2 + 16
	sizeIQ4_XS = 2 + 2 + 4 + 128
	sizeMXFP4  = 1 + 16
)

// e8m0ToF32Half is ggml's ggml_e8m0_to_fp32_half: half of the E8M0 scale 2^(e-127), i.e.
// 2^(e-128), as a float32 (subnormal for e < 2; 255, E8M0's NaN, is not treated specially and
// gives 2^127).
func e8m0ToF32Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func decodeIQ4_NL(src []byte, dst []float32) {
	for b := range len(dst) / qkLegacy {
		x := src[b*sizeIQ4_NL : (b+1)*sizeIQ4_NL]
		y := dst[b*qkLegacy : (b+1)*qkLegacy]
		d := f16At(x)
		for j, q := range x[2:18] {
			y[j] = d * float32(iq4nlValues[q&0x0F])
			y[j+16] = d * float32(iq4nlValues[q>>4])
		}
	}
}

func decodeIQ4_XS(src []byte, dst []float32) {
	for b := range len(dst) / qk {
		x := src[b*sizeIQ4_XS : (b+1)*sizeIQ4_XS]
		y := dst[b*qk : (b+1)*qk]
		d := f16At(x)
		scalesH := binary.LittleEndian.Uint16(x[2:])
		scalesL := x[4:8]
		for ib := range qk / 32 {
			ls := int32(scalesL[ib/2]>>(4*(ib%2))&0x0F) | int32(scalesH>>(2*ib)&3)<<4
			dl := d * float32(ls-32)
			qs := x[8+16*ib : 8+16*ib+16]
			out := y[32*ib : 32*ib+32]
			for j, q := range qs {
				out[j] = dl * float32(iq4nlValues[q&0x0F])
				out[j+16] = dl * float32(iq4nlValues[q>>4])
			}
		}
	}
}

func decodeMXFP4(src []byte, dst []float32) {
	for b := range len(dst) / qkLegacy {
		x := src[b*sizeMXFP4 : (b+1)*sizeMXFP4]
		y := dst[b*qkLegacy : (b+1)*qkLegacy]
		d := e8m0ToF32Half(x[0])
		for j, q := range x[1:17] {
			y[j] = float32(mxfp4Values[q&0x0F]) * d
			y[j+16] = float32(mxfp4Values[q>>4]) * d
		}
	}
}
