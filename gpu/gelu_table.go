package gpu

import (
	"encoding/binary"
	"math"
)

// GELUTable is ggml's GELU table as its CPU backend builds it at start (GGML_GELU_FP16): for
// every half h, the half of ggml_gelu_f32(h) = 0.5 h (1 + tanhf(sqrt(2/pi) h (1 + 0.044715 h
// h))), with the fused multiply-add GCC makes of 1 + 0.044715 h h and the C library's tanhf
// (glibc 2.36's, Debian 12's: fdlibm's single-precision tanhf and expm1f, reproduced here in
// float32 operation by operation). Its geglu and gelu look their values up in it, so a kernel
// that reads it (glu.wgsl with CPUMath) gives llama.cpp's values exactly; computing them on
// the device with its tanh (lavapipe's is off by up to 1e-7) moves 1% of the halves, most of
// them where 1 + tanh cancels. Entry h is at halves[h].
func GELUTable() []uint16 {
	const coefA, sqrt2OverPi = float32(0.044715), float32(0.79788456080286535587989211986876)
	t := make([]uint16, 1<<16)
	for h := range t {
		x := halfToF32(uint16(h))
		inner := float32(math.FMA(float64(coefA*x), float64(x), 1)) // exact in float64, rounded once
		v := float32(0.5*x) * (1 + tanhf(sqrt2OverPi*x*inner))
		t[h] = f32ToHalf(v)
	}
	return t
}

// geluTableBuffer is GELUTable on the device, uploaded on first use.
func (d *Device) geluTableBuffer() (*Buffer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.geluTable == nil {
		b, err := d.Upload("gelu table", geluTableBytes())
		if err != nil {
			return nil, err
		}
		d.geluTable = b
	}
	return d.geluTable, nil
}

// geluTableBytes is GELUTable as the kernels bind it: two halves a word, lowest first.
func geluTableBytes() []byte {
	t := GELUTable()
	b := make([]byte, 2*len(t))
	for i, h := range t {
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
	return b
}

// tanhf is fdlibm's single-precision tanh as glibc 2.36 computes it: x (1 + x) below 2^-55,
// from expm1f(2|x|) as 1 - 2 / (t + 2) from 1 on, as -t / (t + 2) with t = expm1f(-2|x|)
// below 1, and +-1 from 22 on.
func tanhf(x float32) float32 {
	ix := math.Float32bits(x) & 0x7fffffff
	var z float32
	switch {
	case ix >= 0x7f800000:
		return float32(math.Tanh(float64(x))) // +-1 for +-inf, NaN for NaN
	case ix < 0x24000000:
		return x * (1 + x)
	case ix >= 0x41b00000:
		z = 1
	case ix >= 0x3f800000:
		t := expm1f(2 * abs32(x))
		z = 1 - 2/(t+2)
	default:
		t := expm1f(-2 * abs32(x))
		z = -t / (t + 2)
	}
	if math.Signbit(float64(x)) {
		return -z
	}
	return z
}

// expm1f is fdlibm's single-precision e^x - 1 (glibc 2.36's): the argument reduced by k ln2
// (ln2 in two parts), e^r - 1 from a rational approximation in r^2/2 with a correction term,
// and 2^k applied to the exponent. Every product feeding a sum is rounded on its own
// (float32 conversions), as the C code compiled without FMA rounds it.
func expm1f(x float32) float32 {
	const (
		lnHi   = float32(6.9313812256e-01)
		lnLo   = float32(9.0580006145e-06)
		invLn2 = float32(1.4426950216e+00)
		q1     = float32(-3.3333335072e-02)
		q2     = float32(1.5873016091e-03)
		q3     = float32(-7.9365076090e-05)
		q4     = float32(4.0082177293e-06)
		q5     = float32(-2.0109921195e-07)
	)
	hx := math.Float32bits(x)
	neg := hx&0x80000000 != 0
	hx &= 0x7fffffff
	if hx >= 0x4195b844 { // |x| >= 27 ln2
		if hx >= 0x42b17218 && !neg {
			return float32(math.Inf(1)) // the callers pass at most 44
		}
		if neg {
			return -1
		}
	}
	var k int32
	var c float32
	switch {
	case hx > 0x3eb17218: // |x| > ln2 / 2
		var hi, lo float32
		if hx < 0x3f851592 { // and < 1.5 ln2
			if !neg {
				hi, lo, k = x-lnHi, lnLo, 1
			} else {
				hi, lo, k = x+lnHi, -lnLo, -1
			}
		} else {
			half := float32(0.5)
			if neg {
				half = -0.5
			}
			k = int32(float32(invLn2*x) + half)
			t := float32(k)
			hi = x - float32(t*lnHi) // exact
			lo = float32(t * lnLo)
		}
		x = hi - lo
		c = (hi - x) - lo
	case hx < 0x33000000: // |x| < 2^-25
		return x
	}
	hfx := float32(0.5 * x)
	hxs := float32(x * hfx)
	p := float32(hxs * q5)
	p = float32(hxs * (q4 + p))
	p = float32(hxs * (q3 + p))
	p = float32(hxs * (q2 + p))
	p = float32(hxs * (q1 + p))
	r1 := 1 + p
	t := 3 - float32(r1*hfx)
	e := float32(hxs * ((r1 - t) / (6 - float32(x*t))))
	if k == 0 {
		return x - (float32(x*e) - hxs)
	}
	e = float32(x*(e-c)) - c
	e -= hxs
	if k == -1 {
		return float32(0.5*(x-e)) - 0.5
	}
	if k == 1 {
		if x < -0.25 {
			return -2 * (e - (x + 0.5))
		}
		return 1 + float32(2*(x-e))
	}
	if k <= -2 || k > 56 {
		y := 1 - (e - x)
		y = math.Float32frombits(math.Float32bits(y) + uint32(k)<<23)
		return y - 1
	}
	var y float32
	if k < 23 {
		t := math.Float32frombits(0x3f800000 - (0x1000000 >> k)) // 1 - 2^-k
		y = t - (e - x)
	} else {
		t := math.Float32frombits(uint32(0x7f-k) << 23) // 2^-k
		y = x - (e + t)
		y++
	}
	return math.Float32frombits(math.Float32bits(y) + uint32(k)<<23)
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// halfToF32 and f32ToHalf convert as F16C does (round to nearest even).
func halfToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	e, m := uint32(h>>10)&0x1f, uint32(h)&0x3ff
	switch {
	case e == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | m<<13)
	case e == 0:
		return math.Float32frombits(sign) + float32(m)*float32(math.Ldexp(1, -24))*sign1(sign)
	}
	return math.Float32frombits(sign | (e+112)<<23 | m<<13)
}

func sign1(sign uint32) float32 {
	if sign != 0 {
		return -1
	}
	return 1
}

func f32ToHalf(v float32) uint16 {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7fffffff
	switch {
	case a > 0x7f800000:
		return sign | 0x7e00
	case a >= 0x477ff000:
		return sign | 0x7c00
	case a < 0x38800000:
		return sign | uint16(math.RoundToEven(float64(math.Float32frombits(a))*(1<<24)))
	}
	r := a + 0xfff + (a>>13)&1
	return sign | uint16((r-0x38000000)>>13)
}
