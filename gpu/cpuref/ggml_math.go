package cpuref

import (
	"math"
	"math/big"
)

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

// Expf is the C library's expf as glibc 2.36 computes it on x86-64 (what llama.cpp's scalar
// exp calls): in double precision, z = x·32/ln2 rounded to an integer k (ties to even), r = z
// - k, and e^x = 2^(k/32)·(1 + C2·r + C1·r^2 + C0·r^3), rounded to float once. Its cubic leaves
// about 0.06% of results a float away from the correctly rounded e^x; llama.cpp has those.
// The constants are glibc's (its __exp2f_data, read from this machine's libm), the table
// 2^(i/32) rounded to doubles; TestExpfIsGlibcs checks this against the C library.
func Expf(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 0x1.62e42ep6:
		return float32(math.Inf(1))
	case x < -0x1.9fe368p6:
		return 0
	}
	const (
		invln2N = 0x1.71547652b82fep+5
		shift   = 0x1.8p+52
		c0      = 0x1.c6af84b912394p-20
		c1      = 0x1.ebfce50fac4f3p-13
		c2      = 0x1.62e42ff0c52d6p-6
	)
	z := invln2N * float64(x)
	kd := z + shift // rounds z to an integer, ties to even
	ki := math.Float64bits(kd)
	kd -= shift
	r := z - kd
	s := math.Float64frombits(exp2Tab[ki%32] + ki<<47) // 2^(k/32): 2^(i/32), exponent + k >> 5
	y := math.FMA(math.FMA(c0, r, c1), r*r, math.FMA(c2, r, 1))
	return float32(y * s)
}

// Logf is the C library's logf as glibc 2.36 computes it on x86-64 (what llama.cpp's softplus
// calls): x = 2^k z with z in [0x3f330000, 2·0x3f330000) in 16 bands, r = z·(1/c) - 1 for a
// tabulated point c of z's band, and ln x = ln c + k ln2 + r + r^2 (A2 + A1 r + A0 r^2) in
// double precision, rounded to float once; about 0.07% of results are a float away from the
// correctly rounded ln x. The table and coefficients are glibc's (__logf_data, read from this
// machine's libm); TestLogfIsGlibcs checks this against the C library.
func Logf(x float32) float32 {
	ix := math.Float32bits(x)
	switch {
	case ix == 0x3f800000:
		return 0
	case ix == 0 || ix == 0x80000000:
		return float32(math.Inf(-1))
	case ix == 0x7f800000:
		return x
	case ix&0x80000000 != 0 || ix >= 0x7f800000:
		return float32(math.NaN())
	case ix < 0x00800000: // subnormal: normalised
		ix = math.Float32bits(x*0x1p23) - 23<<23
	}
	tmp := ix - 0x3f330000
	t := logfTab[(tmp>>19)%16]
	k := int32(tmp) >> 23
	z := float64(math.Float32frombits(ix - tmp&(0x1ff<<23)))
	r := math.FMA(z, t[0], -1)
	y0 := t[1] + float64(k)*0x1.62e42fefa39efp-1
	r2 := r * r
	y := math.FMA(-0x1.00ea348b88334p-2, r2, math.FMA(0x1.5575b0be00b6ap-2, r, -0x1.ffffef20a4123p-2))
	return float32(math.FMA(y, r2, y0+r))
}

// logfTab is glibc's __logf_data.tab: for each band, 1/c and ln c.
var logfTab = [16][2]float64{
	{0x1.661ec79f8f3bep+0, -0x1.57bf7808caadep-2}, {0x1.571ed4aaf883dp+0, -0x1.2bef0a7c06ddbp-2},
	{0x1.49539f0f010b0p+0, -0x1.01eae7f513a67p-2}, {0x1.3c995b0b80385p+0, -0x1.b31d8a68224e9p-3},
	{0x1.30d190c8864a5p+0, -0x1.6574f0ac07758p-3}, {0x1.25e227b0b8ea0p+0, -0x1.1aa2bc79c8100p-3},
	{0x1.1bb4a4a1a343fp+0, -0x1.a4e76ce8c0e5ep-4}, {0x1.12358f08ae5bap+0, -0x1.1973c5a611cccp-4},
	{0x1.0953f419900a7p+0, -0x1.252f438e10c1ep-5}, {1, 0},
	{0x1.e608cfd9a47acp-1, 0x1.aa5aa5df25984p-5}, {0x1.ca4b31f026aa0p-1, 0x1.c5e53aa362eb4p-4},
	{0x1.b2036576afce6p-1, 0x1.526e57720db08p-3}, {0x1.9c2d163a1aa2dp-1, 0x1.bc2860d224770p-3},
	{0x1.886e6037841edp-1, 0x1.1058bc8a07ee1p-2}, {0x1.767dcf5534862p-1, 0x1.4043057b6ee09p-2},
}

// exp2Tab[i] is glibc's table for expf: the bits of 2^(i/32) rounded to a double, less i << 47
// (so that adding k << 47 for k = 32 m + i also adds m to the exponent).
var exp2Tab = func() (t [32]uint64) {
	for i := range t {
		t[i] = math.Float64bits(exp2Frac(i)) - uint64(i)<<47
	}
	return t
}()

// exp2Frac is 2^(i/32) rounded to the nearest double: Newton's iteration for x^32 = 2^i in
// 200-bit floats, from the float64 estimate.
func exp2Frac(i int) float64 {
	const prec = 200
	x := new(big.Float).SetPrec(prec).SetFloat64(math.Exp2(float64(i) / 32))
	target := new(big.Float).SetPrec(prec).SetMantExp(big.NewFloat(1), i)
	for range 4 {
		p := new(big.Float).SetPrec(prec).SetFloat64(1)
		for range 31 {
			p.Mul(p, x)
		}
		num := new(big.Float).SetPrec(prec).Mul(p, x)
		num.Sub(num, target)
		den := new(big.Float).SetPrec(prec).Mul(p, big.NewFloat(32))
		x.Sub(x, num.Quo(num, den))
	}
	f, _ := x.Float64()
	return f
}

// SiLUV is ggml_v_silu of one lane: x / (1 + ggml_v_expf(0 - x)).
func SiLUV(x float32) float32 { return x / (1 + ExpV(0-x)) }

// SigmoidC is ggml's scalar sigmoid, 1 / (1 + expf(-x)).
func SigmoidC(x float32) float32 { return 1 / (1 + Expf(-x)) }

func abs32(x float32) float32 { return float32(math.Abs(float64(x))) }
