package gguf

import (
	"encoding/binary"

	"github.com/wgpu-llama/wgpu-llama/gguf/iqgrid"
)

// The 1-bit IQ types: 256 elements per super-block, in groups of 8 that each take one point of
// an 11-bit grid of values -1, 0, 1 (iqgrid.IQ1S), shifted by ±iq1Delta and scaled. Byte
// layouts, from ggml-common.h:
//
//	IQ1_S 50 B: d (f16), qs[32] (low bytes of the grid indices), qh u16[8], one per 32
//	      elements: 3 high index bits per group of 8 (bits 3l..3l+2), a 3-bit scale s (bits
//	      12-14) and the delta's sign (bit 15); y = d * (2s + 1) * (grid + delta)
//	IQ1_M 56 B: qs[32] (as IQ1_S's), qh[16] (per group of 8 a nibble: 3 high index bits and
//	      the delta's sign, bit 3), scales u16[4]: per 16 elements a 3-bit scale (four a u16,
//	      bits 0-11), and the f16 d spread over the top nibbles of the four (lowest first)
//
// Each element is dl * (grid + delta), in that order, as dequantize_row_iq1_* computes it.

const (
	sizeIQ1_S = 2 + 32 + 16
	sizeIQ1_M = 32 + 16 + 8
	iq1Delta  = 0.125 // ggml's IQ1S_DELTA and IQ1M_DELTA
)

// shiftedGrid8 writes dl * (grid + delta) for the 8 values of grid point i.
func shiftedGrid8(y []float32, dl, delta float32, i int) {
	g := iqgrid.IQ1S(i)
	for j := range 8 {
		y[j] = dl * (float32(int8(g>>(8*j))) + delta)
	}
}

func decodeIQ1_S(src []byte, dst []float32) {
	for b := range len(dst) / qk {
		x := src[b*sizeIQ1_S : (b+1)*sizeIQ1_S]
		y := dst[b*qk : (b+1)*qk]
		d := f16At(x)
		qs := x[2:34]
		for ib := range qk / 32 {
			qh := binary.LittleEndian.Uint16(x[34+2*ib:])
			dl := d * float32(2*int32(qh>>12&7)+1)
			delta := float32(iq1Delta)
			if qh&0x8000 != 0 {
				delta = -iq1Delta
			}
			for l := range 4 {
				shiftedGrid8(y[32*ib+8*l:], dl, delta, int(qs[4*ib+l])|int(qh>>(3*l)&7)<<8)
			}
		}
	}
}

// iq1mScale is IQ1_M's super-block scale d: an f16 whose four nibbles are the top nibbles of
// the four scale words.
func iq1mScale(sc []byte) float32 {
	var u uint16
	for i := range 4 {
		u |= binary.LittleEndian.Uint16(sc[2*i:]) >> 12 << (4 * i)
	}
	return F16ToF32(u)
}

func decodeIQ1_M(src []byte, dst []float32) {
	for b := range len(dst) / qk {
		x := src[b*sizeIQ1_M : (b+1)*sizeIQ1_M]
		y := dst[b*qk : (b+1)*qk]
		qs, qh, sc := x[0:32], x[32:48], x[48:56]
		d := iq1mScale(sc)
		for ib := range qk / 32 {
			s := binary.LittleEndian.Uint16(sc[2*(ib/2):])
			shift := 6 * (ib % 2)
			dl := [2]float32{d * float32(2*int32(s>>shift&7)+1), d * float32(2*int32(s>>(shift+3)&7)+1)}
			for l := range 4 {
				h := qh[2*ib+l/2] >> (4 * (l % 2)) // the group's nibble
				delta := float32(iq1Delta)
				if h&8 != 0 {
					delta = -iq1Delta
				}
				shiftedGrid8(y[32*ib+8*l:], dl[l/2], delta, int(qs[4*ib+l])|int(h&7)<<8)
			}
		}
	}
}
