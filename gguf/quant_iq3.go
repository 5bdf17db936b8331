package gguf

import (
	"encoding/binary"

	"github.com/wgpu-llama/wgpu-llama/gguf/iqgrid"
)

// The 3-bit IQ types: 256 elements per super-block, in groups of 4 that each take one point of
// a grid of 4 magnitudes (package iqgrid), with a sign per element. Byte layouts, from
// ggml-common.h:
//
//	IQ3_XXS  98 B: d, qs[64] (8-bit grid indices, 8 per 32 elements), then per 32 elements a
//	         u32: four 7-bit sign codes (iqgrid.KSigns, one per 8 elements) and a 4-bit scale
//	         in the top bits; db = d * (0.5 + scale) * 0.5
//	IQ3_S   110 B: d, qs[64] (low bytes of 9-bit grid indices), qh[8] (the ninth bits, one
//	         byte per 32 elements), signs[32] (one bit per element), scales[4] (two 4-bit
//	         scales a byte, one per 32 elements); db = d * (1 + 2 * scale)
//
// Each element is db * grid * sign, in that order, as dequantize_row_iq3_* computes it.

const (
	sizeIQ3_XXS = 2 + 64 + 32
	sizeIQ3_S   = 2 + 64 + 8 + 32 + 4
)

// signedGrid4 writes the 4 magnitudes of grid point g times db, negating element j when bit j
// of signs is set.
func signedGrid4(y []float32, db float32, g uint32, signs uint8) {
	for j := range 4 {
		v := db * float32(uint8(g>>(8*j)))
		if signs>>j&1 != 0 {
			v = -v
		}
		y[j] = v
	}
}

func decodeIQ3_XXS(src []byte, dst []float32) {
	for b := range len(dst) / qk {
		x := src[b*sizeIQ3_XXS : (b+1)*sizeIQ3_XXS]
		y := dst[b*qk : (b+1)*qk]
		d := f16At(x)
		qs := x[2:66]
		for ib := range qk / 32 {
			aux := binary.LittleEndian.Uint32(x[66+4*ib:])
			db := d * (0.5 + float32(aux>>28)) * 0.5
			for l := range 4 {
				signs := iqgrid.KSigns(int(aux >> (7 * l) & 127))
				out := y[32*ib+8*l:]
				signedGrid4(out, db, iqgrid.IQ3XXS(int(qs[8*ib+2*l])), signs)
				signedGrid4(out[4:], db, iqgrid.IQ3XXS(int(qs[8*ib+2*l+1])), signs>>4)
			}
		}
	}
}

func decodeIQ3_S(src []byte, dst []float32) {
	for b := range len(dst) / qk {
		x := src[b*sizeIQ3_S : (b+1)*sizeIQ3_S]
		y := dst[b*qk : (b+1)*qk]
		d := f16At(x)
		qs, qh, signs, scales := x[2:66], x[66:74], x[74:106], x[106:110]
		for ib := range qk / 32 {
			db := d * float32(1+2*int32(scales[ib/2]>>(4*(ib%2))&0x0F))
			h := int(qh[ib])
			for l := range 4 {
				i0 := int(qs[8*ib+2*l]) | h<<(8-2*l)&256
				i1 := int(qs[8*ib+2*l+1]) | h<<(7-2*l)&256
				s := signs[4*ib+l]
				out := y[32*ib+8*l:]
				signedGrid4(out, db, iqgrid.IQ3S(i0), s)
				signedGrid4(out[4:], db, iqgrid.IQ3S(i1), s>>4)
			}
		}
	}
}
