package gguf

import (
	"encoding/binary"

	"github.com/wgpu-llama/wgpu-llama/gguf/iqgrid"
)

// The 2-bit IQ types: 256 elements per super-block, in groups of 8 that each take one point of
// a grid of 8 magnitudes (package iqgrid) and 8 signs; an f16 d and a 4-bit scale per 16 or
// 32 elements give the scale. Byte layouts, from ggml-common.h:
//
//	IQ2_XXS 66 B: d, qs[64]: per 32 elements two u32 words: 4 grid indices (bytes of the
//	        first), and in the second four 7-bit sign codes (iqgrid.KSigns) and the 4-bit scale
//	        in the top bits
//	IQ2_XS  74 B: d, qs u16[32] (9-bit grid index, 7-bit sign code), scales[8] (two 4-bit
//	        scales per 32 elements, one per 16)
//	IQ2_S   82 B: d, qs[64] (32 low bytes of 10-bit grid indices, then 32 sign bytes), qh[8]
//	        (2 high index bits per group), scales[8] (as IQ2_XS's)
//
// Each element is db * grid * sign with db = d * (0.5 + scale) * 0.25, in that order, as
// dequantize_row_iq2_* computes it.

const (
	sizeIQ2_XXS = 2 + 64
	sizeIQ2_XS  = 2 + 64 + 8
	sizeIQ2_S   = 2 + 64 + 8 + 8
)

// signedGrid8 writes the 8 magnitudes of grid point g times db, negating element j when bit j
// of signs is set (ggml's kmask_iq2xs test).
func signedGrid8(y []float32, db float32, g uint64, signs uint8) {
	for j := range 8 {
		v := db * float32(uint8(g>>(8*j)))
		if signs>>j&1 != 0 {
			v = -v
		}
		y[j] = v
	}
}

// iq2Scale is db for a 4-bit scale s: d * (0.5 + s) * 0.25.
func iq2Scale(d float32, s uint32) float32 {
	return d * (0.5 + float32(s)) * 0.25
}

func decodeIQ2_XXS(src []byte, dst []float32) {
	for b := range len(dst) / qk {
		x := src[b*sizeIQ2_XXS : (b+1)*sizeIQ2_XXS]
		y := dst[b*qk : (b+1)*qk]
		d := f16At(x)
		for ib := range qk / 32 {
			q := x[2+8*ib : 2+8*ib+8]
			aux := binary.LittleEndian.Uint32(q[4:])
			db := iq2Scale(d, aux>>28)
			for l := range 4 {
				signedGrid8(y[32*ib+8*l:], db, iqgrid.IQ2XXS(int(q[l])), iqgrid.KSigns(int(aux>>(7*l)&127)))
			}
		}
	}
}

func decodeIQ2_XS(src []byte, dst []float32) {
	for b := range len(dst) / qk {
		x := src[b*sizeIQ2_XS : (b+1)*sizeIQ2_XS]
		y := dst[b*qk : (b+1)*qk]
		d := f16At(x)
		scales := x[66:74]
		for ib := range qk / 32 {
			db := [2]float32{iq2Scale(d, uint32(scales[ib]&0x0F)), iq2Scale(d, uint32(scales[ib]>>4))}
			for l := range 4 {
				q := binary.LittleEndian.Uint16(x[2+2*(4*ib+l):])
				signedGrid8(y[32*ib+8*l:], db[l/2], iqgrid.IQ2XS(int(q&511)), iqgrid.KSigns(int(q>>9)))
			}
		}
	}
}

func decodeIQ2_S(src []byte, dst []float32) {
	for b := range len(dst) / qk {
		x := src[b*sizeIQ2_S : (b+1)*sizeIQ2_S]
		y := dst[b*qk : (b+1)*qk]
		d := f16At(x)
		qs, signs, qh, scales := x[2:34], x[34:66], x[66:74], x[74:82]
		for ib := range qk / 32 {
			db := [2]float32{iq2Scale(d, uint32(scales[ib]&0x0F)), iq2Scale(d, uint32(scales[ib]>>4))}
			for l := range 4 {
				idx := int(qs[4*ib+l]) | int(qh[ib])<<(8-2*l)&0x300
				signedGrid8(y[32*ib+8*l:], db[l/2], iqgrid.IQ2S(idx), signs[4*ib+l])
			}
		}
	}
}
