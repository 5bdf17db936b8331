package cpuref

import "math"

// ExpV is ggml_v_expf, llama.cpp's vector exp on x86 with AVX2 and FMA (ggml-cpu/vec.h), of
// one lane: what its silu, swiglu and soft_max take for runs of 8 values.
func ExpV(x float32) float32 {
	const r = 0x1.8p23
	z := fmaOnce(x, 0x1.715476p+0, r)
	n := z - r
	b := fmaOnce(-n, 0x1.7f7d1cp-20, fmaOnce(-n, 0x1.62e4p-1, x))
	e := math.Float32bits(z) << 23
	k := math.Float32frombits(e + math.Float32bits(1))
	u := b * b
	j := fmaOnce(fmaOnce(fmaOnce(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fmaOnce(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u, 0x1.ffffecp-1*b)
	if abs32(n) <= 126 {
		return fmaOnce(j, k, k)
	}
	var g uint32
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	s2 := math.Float32frombits(e - g)
	if abs32(n) > 192 {
		return s1 * s1
	}
	return fmaOnce(s2, j, s2) * s1
}

// Expf is the C library's expf, correctly rounded (as glibc's is in all but the rarest cases).
func Expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// SiLUV is ggml_v_silu of one lane: x / (1 + ggml_v_expf(0 - x)).
func SiLUV(x float32) float32 { return x / (1 + ExpV(0-x)) }

// SigmoidC is ggml's scalar sigmoid, 1 / (1 + expf(-x)).
func SigmoidC(x float32) float32 { return 1 / (1 + Expf(-x)) }

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }
