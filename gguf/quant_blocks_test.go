package gguf

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// Hand-made blocks: bytes laid out field by field from ggml-common.h, with the expected floats
// worked out by hand (literal cases) or from the element's position in the layout (full
// cases, packed element by element here rather than by the decoder's loops). Scales are
// powers of two and levels small integers, so every expected value is exact.

const (
	h1    = 0x3C00 // f16 1.0
	h2    = 0x4000 // f16 2.0
	hHalf = 0x3800 // f16 0.5
	hQtr  = 0x3400 // f16 0.25
	hM1   = 0xBC00 // f16 -1.0
)

func le16(b []byte, v uint16) { binary.LittleEndian.PutUint16(b, v) }

func dequant(t *testing.T, typ GGMLType, block []byte) []float32 {
	t.Helper()
	n := int(typ.BlockSize()) * len(block) / int(typ.TypeSize())
	out := make([]float32, n)
	if err := Dequantize(typ, block, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func expectAll(t *testing.T, got []float32, want func(e int) float32) {
	t.Helper()
	bad := 0
	for e, g := range got {
		if w := want(e); g != w {
			t.Errorf("element %d = %g, want %g", e, g, w)
			if bad++; bad > 5 {
				t.FailNow()
			}
		}
	}
}

func TestBlockFloat(t *testing.T) {
	f16 := []byte{0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B, 0x01, 0x00, 0x00, 0x80}
	want16 := []float32{1, -2, 65504, 0x1p-24, 0}
	bf16 := []byte{0x80, 0x3F, 0x40, 0xC0, 0x49, 0x40}
	want32 := []float32{1, -3, 3.140625}
	expectAll(t, dequant(t, TypeF16, f16), func(e int) float32 { return want16[e] })
	expectAll(t, dequant(t, TypeBF16, bf16), func(e int) float32 { return want32[e] })
	f32 := []byte{0, 0, 0x80, 0x3F, 0, 0, 0x40, 0xC0}
	expectAll(t, dequant(t, TypeF32, f32), func(e int) float32 { return []float32{1, -3}[e] })
}

func TestBlockQ8_0(t *testing.T) {
	b := make([]byte, 34)
	le16(b, hQtr)
	for j := range 32 {
		b[2+j] = byte(int8(8*j - 128)) // -128, -120, ..., 120
	}
	expectAll(t, dequant(t, TypeQ8_0, b), func(e int) float32 { return float32(8*e-128) / 4 })
}

func TestBlockQ4_0(t *testing.T) {
	b := make([]byte, 18)
	le16(b, hHalf)
	for j := range 16 {
		b[2+j] = byte(j) | byte(15-j)<<4 // element j: nibble j, element j+16: nibble 15-j
	}
	got := dequant(t, TypeQ4_0, b)
	if got[0] != -4 || got[15] != 3.5 || got[16] != 3.5 || got[31] != -4 {
		t.Errorf("ends %g %g %g %g, want -4 3.5 3.5 -4", got[0], got[15], got[16], got[31])
	}
	expectAll(t, got, func(e int) float32 {
		if e < 16 {
			return float32(e-8) * 0.5
		}
		return float32(15-(e-16)-8) * 0.5
	})
}

func TestBlockQ4_1(t *testing.T) {
	b := make([]byte, 20)
	le16(b, hQtr)
	le16(b[2:], hM1)
	for j := range 16 {
		b[4+j] = byte(j) | byte(j^5)<<4
	}
	got := dequant(t, TypeQ4_1, b)
	if got[0] != -1 || got[16] != 0.25 { // 0*0.25-1, 5*0.25-1
		t.Errorf("got[0]=%g got[16]=%g, want -1 0.25", got[0], got[16])
	}
	expectAll(t, got, func(e int) float32 {
		if e < 16 {
			return float32(e)*0.25 - 1
		}
		return float32((e-16)^5)*0.25 - 1
	})
}

// q5HighBits is the qh word of the Q5 tests: element j's fifth bit is bit j.
const q5HighBits = 0xA5C3_0F01

func TestBlockQ5_0(t *testing.T) {
	b := make([]byte, 22)
	le16(b, h1)
	binary.LittleEndian.PutUint32(b[2:], q5HighBits)
	for j := range 16 {
		b[6+j] = byte(j) | byte(15-j)<<4
	}
	got := dequant(t, TypeQ5_0, b)
	// Element 0: nibble 0, high bit 1 -> 16-16 = 0. Element 16: nibble 15, bit 16 of qh
	// (0x...0F01 >> 16 = 0xA5C3, bit 0 = 1) -> 31-16 = 15. Element 1: nibble 1, bit 0 -> -15.
	if got[0] != 0 || got[16] != 15 || got[1] != -15 {
		t.Errorf("got[0,16,1] = %g %g %g, want 0 15 -15", got[0], got[16], got[1])
	}
	expectAll(t, got, func(e int) float32 {
		lo := e
		if e >= 16 {
			lo = 15 - (e - 16)
		}
		return float32(lo|int(q5HighBits>>e&1)<<4) - 16
	})
}

func TestBlockQ5_1(t *testing.T) {
	b := make([]byte, 24)
	le16(b, hHalf)
	le16(b[2:], h2)
	binary.LittleEndian.PutUint32(b[4:], q5HighBits)
	for j := range 16 {
		b[8+j] = byte(15-j) | byte(j)<<4
	}
	got := dequant(t, TypeQ5_1, b)
	if got[0] != 17.5 || got[31] != 17.5 { // (15|16)*0.5+2: bits 0 and 31 of qh are set
		t.Errorf("got[0]=%g got[31]=%g, want 17.5 17.5", got[0], got[31])
	}
	expectAll(t, got, func(e int) float32 {
		lo := 15 - e
		if e >= 16 {
			lo = e - 16
		}
		return float32(lo|int(q5HighBits>>e&1)<<4)*0.5 + 2
	})
}

// put2bit stores a 2-bit level as Q2_K/Q3_K lay them out: 128-element halves of 32 bytes,
// element p of a half in byte p%32 at bit 2*(p/32).
func put2bit(qs []byte, e int, v uint8) {
	half, p := e/128, e%128
	qs[32*half+p%32] |= (v & 3) << (2 * (p / 32))
}

func TestBlockQ2_K(t *testing.T) {
	b := make([]byte, 84) // scales[16] qs[64] d dmin
	b[0] = 0x21           // sub-block 0: scale 1, min 2
	b[15] = 0xF3          // sub-block 15: scale 3, min 15
	b[16+0] = 0b11_10_01_00
	b[16+63] = 0xFF // elements 159, 191, 223, 255 at level 3
	le16(b[80:], h2)
	le16(b[82:], hHalf)
	got := dequant(t, TypeQ2_K, b)
	want := map[int]float32{
		0:   2*1*0 - 0.5*2, // -1
		1:   -1,
		32:  0, // sub-block 2 has scale 0 and min 0
		64:  0,
		159: 0,
		240: -7.5,        // 2*3*0 - 0.5*15
		255: 2*3*3 - 7.5, // 10.5
		223: 0,
	}
	for e, w := range want {
		if got[e] != w {
			t.Errorf("element %d = %g, want %g", e, got[e], w)
		}
	}

	// Full: every sub-block its own scale and min, every element its own level.
	rng := rand.New(rand.NewPCG(1, 2))
	b = make([]byte, 84)
	var L [256]uint8
	for e := range L {
		L[e] = uint8(rng.IntN(4))
		put2bit(b[16:80], e, L[e])
	}
	for j := range 16 {
		b[j] = byte(j) | byte(15-j)<<4
	}
	le16(b[80:], hHalf)
	le16(b[82:], hQtr)
	expectAll(t, dequant(t, TypeQ2_K, b), func(e int) float32 {
		j := e / 16
		return 0.5*float32(j)*float32(L[e]) - 0.25*float32(15-j)
	})
}

// packQ3Scales packs sixteen 6-bit values as Q3_K stores them: low nibbles in bytes 0-7
// (sub-blocks 0-7 low half, 8-15 high half), top two bits in byte 8+j%4 at bit 2*(j/4).
func packQ3Scales(s [16]uint8) []byte {
	sb := make([]byte, 12)
	for j, v := range s {
		if j < 8 {
			sb[j] |= v & 0xF
		} else {
			sb[j-8] |= (v & 0xF) << 4
		}
		sb[8+j%4] |= (v >> 4) << (2 * (j / 4))
	}
	return sb
}

func TestBlockQ3_K(t *testing.T) {
	// Literal: scales decode to 1 (sub-block 0), -30 (8), 16 (15), -32 elsewhere; every element
	// at level 1 with its high bit set (so 1, not 1-4).
	b := make([]byte, 110) // hmask[32] qs[64] scales[12] d
	for i := range 32 {
		b[i] = 0xFF
	}
	for i := 32; i < 96; i++ {
		b[i] = 0b01_01_01_01
	}
	copy(b[96:], []byte{0x21, 0, 0, 0, 0, 0, 0, 0, 0b10, 0, 0, 0b11 << 6})
	le16(b[108:], h1)
	expectAll(t, dequant(t, TypeQ3_K, b), func(e int) float32 {
		switch e / 16 {
		case 0:
			return 1 // 0x21 low nibble 1 | (byte 8 bits 0-1 = 2)<<4 = 33, -32
		case 8:
			return -30 // 0x21 high nibble 2 | (byte 8 bits 4-5 = 0)<<4, -32
		case 15:
			return 16 // byte 7 high nibble 0 | (byte 11 bits 6-7 = 3)<<4 = 48, -32
		}
		return -32
	})

	// Full: random 3-bit levels (high bit in hmask bit e/32 of byte e%32) and 6-bit scales.
	rng := rand.New(rand.NewPCG(3, 4))
	b = make([]byte, 110)
	var L [256]uint8
	var s [16]uint8
	for e := range L {
		L[e] = uint8(rng.IntN(8))
		put2bit(b[32:96], e, L[e])
		b[e%32] |= (L[e] >> 2) << (e / 32)
	}
	for j := range s {
		s[j] = uint8(rng.IntN(64))
	}
	s[3], s[12] = 63, 0
	copy(b[96:], packQ3Scales(s))
	le16(b[108:], hHalf)
	expectAll(t, dequant(t, TypeQ3_K, b), func(e int) float32 {
		return 0.5 * float32(int(s[e/16])-32) * float32(int(L[e])-4)
	})
}

// packK4Scales packs eight 6-bit scales and mins as Q4_K/Q5_K store them: sub-blocks 0-3 in
// the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 as nibbles of bytes
// 8-11 (scale low, min high) with their top two bits in bits 6-7 of bytes 0-3 and 4-7.
func packK4Scales(sc, mn [8]uint8) []byte {
	sb := make([]byte, 12)
	for j := range 8 {
		if j < 4 {
			sb[j] |= sc[j]
			sb[j+4] |= mn[j]
		} else {
			sb[j+4] = sc[j]&0xF | (mn[j]&0xF)<<4
			sb[j-4] |= (sc[j] >> 4) << 6
			sb[j] |= (mn[j] >> 4) << 6
		}
	}
	return sb
}

func TestBlockQ4_K(t *testing.T) {
	// Literal: sub-block 0 scale 5 min 7, sub-block 4 scale 2|3<<4 = 50 min 9|1<<4 = 25.
	b := make([]byte, 144) // d dmin scales[12] qs[128]
	le16(b, h1)
	le16(b[2:], hHalf)
	copy(b[4:], []byte{0xC5, 0, 0, 0, 0x47, 0, 0, 0, 0x92, 0, 0, 0})
	for i := 16; i < 144; i++ {
		b[i] = 0x31 // low nibble 1, high nibble 3
	}
	expectAll(t, dequant(t, TypeQ4_K, b), func(e int) float32 {
		switch e / 32 {
		case 0:
			return 5*1 - 0.5*7 // 1.5
		case 4:
			return 50*1 - 0.5*25 // 37.5
		}
		return 0
	})

	// Full: each 64-element group g uses bytes 32g..32g+31: low nibbles are sub-block 2g,
	// high nibbles sub-block 2g+1.
	rng := rand.New(rand.NewPCG(5, 6))
	b = make([]byte, 144)
	var L [256]uint8
	var sc, mn [8]uint8
	for j := range 8 {
		sc[j], mn[j] = uint8(rng.IntN(64)), uint8(rng.IntN(64))
	}
	sc[7], mn[6] = 63, 63
	for e := range L {
		L[e] = uint8(rng.IntN(16))
		g, p := e/64, e%64
		b[16+32*g+p%32] |= L[e] << (4 * (p / 32))
	}
	le16(b, hHalf)
	le16(b[2:], hQtr)
	copy(b[4:], packK4Scales(sc, mn))
	expectAll(t, dequant(t, TypeQ4_K, b), func(e int) float32 {
		j := e / 32
		return 0.5*float32(sc[j])*float32(L[e]) - 0.25*float32(mn[j])
	})
}

func TestBlockQ5_K(t *testing.T) {
	// Literal: all scales 1, mins 0; nibbles 1 (low) and 2 (high); three high bits set.
	b := make([]byte, 176) // d dmin scales[12] qh[32] qs[128]
	le16(b, h1)
	copy(b[4:], []byte{1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1})
	b[16+0] = 0x01  // bit 0: group 0 low half, element 0
	b[16+5] = 0x02  // bit 1: group 0 high half, element 32+5
	b[16+31] = 0x80 // bit 7: group 3 high half, element 192+32+31
	for i := 48; i < 176; i++ {
		b[i] = 0x21
	}
	expectAll(t, dequant(t, TypeQ5_K, b), func(e int) float32 {
		switch e {
		case 0:
			return 17
		case 37, 255:
			return 18
		}
		if e%64 < 32 {
			return 1
		}
		return 2
	})

	// Full: the fifth bit of element e (group g, position p) is bit 2g+p/32 of qh[p%32].
	rng := rand.New(rand.NewPCG(7, 8))
	b = make([]byte, 176)
	var L [256]uint8
	var sc, mn [8]uint8
	for j := range 8 {
		sc[j], mn[j] = uint8(rng.IntN(64)), uint8(rng.IntN(64))
	}
	for e := range L {
		L[e] = uint8(rng.IntN(32))
		g, p := e/64, e%64
		b[48+32*g+p%32] |= (L[e] & 0xF) << (4 * (p / 32))
		b[16+p%32] |= (L[e] >> 4) << (2*g + p/32)
	}
	le16(b, hHalf)
	le16(b[2:], hQtr)
	copy(b[4:], packK4Scales(sc, mn))
	expectAll(t, dequant(t, TypeQ5_K, b), func(e int) float32 {
		j := e / 32
		return 0.5*float32(sc[j])*float32(L[e]) - 0.25*float32(mn[j])
	})
}

func TestBlockQ6_K(t *testing.T) {
	// Literal: int8 scales -3 (sub-block 0), 127 (15), 1 elsewhere; all quants -32 except
	// elements 0, 32, 64, 96 set through ql[0], ql[32] and qh[0].
	b := make([]byte, 210) // ql[128] qh[64] scales[16] d
	b[0] = 0xAF            // element 0 low nibble 15, element 64 high nibble 10
	b[128] = 0b11_10_01_11 // high 2 bits: element 0 -> 3, 32 -> 1, 64 -> 2, 96 -> 3
	for j := range 16 {
		b[192+j] = 1
	}
	b[192] = 0xFD // -3
	b[192+15] = 127
	le16(b[208:], hHalf)
	expectAll(t, dequant(t, TypeQ6_K, b), func(e int) float32 {
		switch e {
		case 0:
			return 0.5 * -3 * (15 | 3<<4 - 32) // -46.5
		case 32:
			return 0.5 * 1 * (0 | 1<<4 - 32) // -8
		case 64:
			return 0.5 * 1 * (10 | 2<<4 - 32) // 5
		case 96:
			return 0.5 * 1 * (0 | 3<<4 - 32) // 8
		}
		switch e / 16 {
		case 0:
			return 0.5 * -3 * -32 // 48
		case 15:
			return 0.5 * 127 * -32 // -2032
		}
		return -16
	})

	// Full: element e sits in half n=e/128 at quarter k=(e%128)/32, lane l=e%32: low 4 bits in
	// ql[64n + 32*(k%2) + l] (nibble k/2), high 2 bits in qh[32n + l] at bit 2k.
	rng := rand.New(rand.NewPCG(9, 10))
	b = make([]byte, 210)
	var L [256]uint8
	var sc [16]int8
	for j := range sc {
		sc[j] = int8(rng.IntN(256) - 128)
		b[192+j] = byte(sc[j])
	}
	for e := range L {
		L[e] = uint8(rng.IntN(64))
		n, k, l := e/128, e%128/32, e%32
		b[64*n+32*(k%2)+l] |= (L[e] & 0xF) << (4 * (k / 2))
		b[128+32*n+l] |= (L[e] >> 4) << (2 * k)
	}
	le16(b[208:], hQtr)
	expectAll(t, dequant(t, TypeQ6_K, b), func(e int) float32 {
		return 0.25 * float32(sc[e/16]) * float32(int(L[e])-32)
	})
}
