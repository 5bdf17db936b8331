package gguf

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refF32ToF16 is a plain round-to-nearest-even conversion computed in float64, against which the
// bit-trick version is checked.
func refF32ToF16(f float32) uint16 {
	sign := uint16(math.Float32bits(f)>>16) & 0x8000
	if f != f {
		return sign | 0x7E00
	}
	a := math.Abs(float64(f))
	if a >= 65520 { // halfway between 65504 and 2^16 rounds to even, i.e. to infinity
		return sign | 0x7C00
	}
	if a < 0x1p-14 {
		return sign | uint16(math.RoundToEven(a/0x1p-24)) // 1024 encodes the smallest normal
	}
	_, e := math.Frexp(a) // a = frac * 2^e, frac in [0.5, 1)
	e--
	m := math.RoundToEven((math.Ldexp(a, -e) - 1) * 1024)
	if m == 1024 {
		m = 0
		e++
	}
	if e > 15 {
		return sign | 0x7C00
	}
	return sign | uint16(e+15)<<10 | uint16(m)
}

func TestF16RoundTripAll(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := F16ToF32(h)
		exp, mant := h>>10&0x1f, h&0x3ff
		if exp == 0x1f && mant != 0 {
			if f == f {
				t.Fatalf("0x%04x: want NaN, got %v", h, f)
			}
			// NaN payloads are kept on widening; narrowing quiets them as ggml does.
			if got := math.Float32bits(f); got != uint32(h&0x8000)<<16|0x7f800000|uint32(mant)<<13 {
				t.Fatalf("0x%04x: NaN bits 0x%08x", h, got)
			}
			if back := F32ToF16(f); back != h&0x8000|0x7E00 {
				t.Fatalf("0x%04x: NaN narrows to 0x%04x", h, back)
			}
			continue
		}
		// Exact value check: sign * 2^(e-15) * (1 + m/1024), or subnormal m * 2^-24.
		var want float64
		switch {
		case exp == 0x1f:
			want = math.Inf(1)
		case exp == 0:
			want = float64(mant) * 0x1p-24
		default:
			want = math.Ldexp(1+float64(mant)/1024, int(exp)-15)
		}
		if h&0x8000 != 0 {
			want = -want
		}
		if float64(f) != want || math.Signbit(float64(f)) != (h&0x8000 != 0) {
			t.Fatalf("F16ToF32(0x%04x) = %v, want %v", h, f, want)
		}
		if back := F32ToF16(f); back != h {
			t.Fatalf("round trip 0x%04x -> %v -> 0x%04x", h, f, back)
		}
	}
}

func TestF32ToF16MatchesReference(t *testing.T) {
	check := func(f float32) {
		if got, want := F32ToF16(f), refF32ToF16(f); got != want {
			t.Fatalf("F32ToF16(%g = 0x%08x) = 0x%04x, want 0x%04x", f, math.Float32bits(f), got, want)
		}
	}
	// Every top-16-bit pattern combined with the low bits that decide rounding.
	lows := []uint32{0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x2001, 0x3000, 0x7fff, 0x8000, 0xffff}
	for hi := range uint32(1 << 16) {
		for _, lo := range lows {
			check(math.Float32frombits(hi<<16 | lo))
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		check(math.Float32frombits(r.Uint32()))
	}
	for _, f := range []float32{0, float32(math.Copysign(0, -1)), 65504, 65519.99, 65520, -65520, 0x1p-24, 0x1p-25, 0x1.8p-25, 0x1p-26,
		float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, math.SmallestNonzeroFloat32} {
		check(f)
	}
	if F32ToF16(65520) != 0x7C00 || F32ToF16(65519) != 0x7BFF || F32ToF16(0x1p-25) != 0 || F32ToF16(0x1.8p-25) != 1 {
		t.Error("edge cases")
	}
}

func TestBF16(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := BF16ToF32(h)
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("BF16ToF32(0x%04x)", h)
		}
		back := F32ToBF16(f)
		if f != f {
			if back != h|64 {
				t.Fatalf("NaN 0x%04x -> 0x%04x", h, back)
			}
		} else if back != h {
			t.Fatalf("BF16 round trip 0x%04x -> 0x%04x", h, back)
		}
	}
	// Ties round to even: 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125.
	if F32ToBF16(1+0x1p-8) != 0x3f80 || F32ToBF16(1+0x1p-8+0x1p-20) != 0x3f81 || F32ToBF16(1+3*0x1p-8) != 0x3f82 {
		t.Error("BF16 rounding")
	}
}
