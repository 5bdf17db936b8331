package gguf

// The K-quants: super-blocks of 256 elements split into sub-blocks of 16 or 32, each with its
// own scale (and minimum) quantized against one or two f16 super-block scales. Byte layouts,
// from ggml-common.h:
//
//	Q2_K  84 B: scales[16] (low nibble scale, high nibble min), qs[64] (2 bits), d, dmin
//	Q3_K 110 B: hmask[32] (high bit), qs[64] (low 2 bits), scales[12] (6-bit), d
//	Q4_K 144 B: d, dmin, scales[12] (6-bit scales and mins), qs[128] (4 bits)
//	Q5_K 176 B: d, dmin, scales[12], qh[32] (high bit), qs[128] (low 4 bits)
//	Q6_K 210 B: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8), d
//
// As in quant_legacy.go, float32(a*b) + c keeps products rounded before they are added, as in
// llama.cpp's reference code.

const (
	sizeQ2_K = 84
	sizeQ3_K = 110
	sizeQ4_K = 144
	sizeQ5_K = 176
	sizeQ6_K = 210
)

// q3Scale unpacks Q3_K's j-th 6-bit scale (0..63, biased by 32): the low nibbles fill bytes 0-7
// (sub-blocks 0-7 low nibble, 8-15 high nibble), the top two bits sit in bytes 8-11, byte
// 8+j%4 at bit 2*(j/4).
func q3Scale(sb []byte, j int) int32 {
	var lo byte
	if j < 8 {
		lo = sb[j] & 0x0F
	} else {
		lo = sb[j-8] >> 4
	}
	return int32(lo | (sb[8+j%4]>>(2*(j/4))&3)<<4)
}

// scaleMinK4 is ggml's get_scale_min_k4: sub-block j's 6-bit scale and min in Q4_K/Q5_K's
// 12 bytes. Sub-blocks 0-3 use the low 6 bits of bytes 0-3 (scale) and 4-7 (min); sub-blocks
// 4-7 use the nibbles of bytes 8-11 plus the top 2 bits of bytes 0-3 (scale) and 4-7 (min).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0x0F | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

func decodeQ2_K(src []byte, dst []float32) {
	for b := range len(dst) / qk {
		x := src[b*sizeQ2_K : (b+1)*sizeQ2_K]
		y := dst[b*qk : (b+1)*qk]
		d, dmin := f16At(x[80:]), f16At(x[82:])
		scales := x[0:16]
		for n := range 2 {
			q := x[16+32*n : 16+32*n+32]
			for j := range 4 {
				shift := 2 * j
				for h := range 2 {
					sc := scales[8*n+2*j+h]
					dl, ml := d*float32(sc&0x0F), dmin*float32(sc>>4)
					out := y[128*n+32*j+16*h : 128*n+32*j+16*h+16]
					for l, qv := range q[16*h : 16*h+16] {
						out[l] = float32(dl*float32(qv>>shift&3)) - ml
					}
				}
			}
		}
	}
}

func decodeQ3_K(src []byte, dst []float32) {
	for b := range len(dst) / qk {
		x := src[b*sizeQ3_K : (b+1)*sizeQ3_K]
		y := dst[b*qk : (b+1)*qk]
		d := f16At(x[108:])
		hmask, sb := x[0:32], x[96:108]
		for n := range 2 {
			q := x[32+32*n : 32+32*n+32]
			for j := range 4 {
				shift := 2 * j
				m := uint8(1) << (4*n + j)
				for h := range 2 {
					dl := d * float32(q3Scale(sb, 8*n+2*j+h)-32)
					out := y[128*n+32*j+16*h : 128*n+32*j+16*h+16]
					for l := range 16 {
						v := int32(q[16*h+l] >> shift & 3)
						if hmask[16*h+l]&m == 0 {
							v -= 4
						}
						out[l] = dl * float32(v)
					}
				}
			}
		}
	}
}

func decodeQ4_K(src []byte, dst []float32) {
	for b := range len(dst) / qk {
		x := src[b*sizeQ4_K : (b+1)*sizeQ4_K]
		y := dst[b*qk : (b+1)*qk]
		d, dmin := f16At(x), f16At(x[2:])
		sb := x[4:16]
		for g := range 4 {
			sc1, m1 := scaleMinK4(2*g, sb)
			sc2, m2 := scaleMinK4(2*g+1, sb)
			d1, min1 := d*float32(sc1), dmin*float32(m1)
			d2, min2 := d*float32(sc2), dmin*float32(m2)
			q := x[16+32*g : 16+32*g+32]
			out := y[64*g : 64*g+64]
			for l, qv := range q {
				out[l] = float32(d1*float32(qv&0x0F)) - min1
			}
			for l, qv := range q {
				out[32+l] = float32(d2*float32(qv>>4)) - min2
			}
		}
	}
}

func decodeQ5_K(src []byte, dst []float32) {
	for b := range len(dst) / qk {
		x := src[b*sizeQ5_K : (b+1)*sizeQ5_K]
		y := dst[b*qk : (b+1)*qk]
		d, dmin := f16At(x), f16At(x[2:])
		sb, qh := x[4:16], x[16:48]
		for g := range 4 {
			sc1, m1 := scaleMinK4(2*g, sb)
			sc2, m2 := scaleMinK4(2*g+1, sb)
			d1, min1 := d*float32(sc1), dmin*float32(m1)
			d2, min2 := d*float32(sc2), dmin*float32(m2)
			ql := x[48+32*g : 48+32*g+32]
			out := y[64*g : 64*g+64]
			// The high bit of the low-nibble half is bit 2g of qh, of the high half bit 2g+1.
			for l, qv := range ql {
				v := qv&0x0F | (qh[l]>>(2*g)&1)<<4
				out[l] = float32(d1*float32(v)) - min1
			}
			for l, qv := range ql {
				v := qv>>4 | (qh[l]>>(2*g+1)&1)<<4
				out[32+l] = float32(d2*float32(v)) - min2
			}
		}
	}
}

func decodeQ6_K(src []byte, dst []float32) {
	for b := range len(dst) / qk {
		x := src[b*sizeQ6_K : (b+1)*sizeQ6_K]
		y := dst[b*qk : (b+1)*qk]
		d := f16At(x[208:])
		for n := range 2 {
			ql := x[64*n : 64*n+64]
			qh := x[128+32*n : 128+32*n+32]
			sc := x[192+8*n : 192+8*n+8]
			out := y[128*n : 128*n+128]
			for l := range 32 {
				is := l / 16
				q1 := int32(ql[l]&0x0F|(qh[l]>>0&3)<<4) - 32
				q2 := int32(ql[l+32]&0x0F|(qh[l]>>2&3)<<4) - 32
				q3 := int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				out[l] = d * float32(int8(sc[is])) * float32(q1)
				out[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				out[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				out[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
		}
	}
}
