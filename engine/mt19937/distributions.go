package mt19937

import "math"

// Source gives uniform 32-bit outputs over the full range, as std::mt19937 does.
type Source interface {
	Uint32() uint32
}

// Canonical64 is libstdc++'s std::generate_canonical<double, 53>: two outputs x1, x2 make
// (x1 + x2*2^32) / 2^64, the sum rounded once to a double; a result that rounds up to 1 is
// replaced by the largest double below 1.
func Canonical64(g Source) float64 {
	const r = 1 << 32
	sum := float64(g.Uint32())
	sum += float64(g.Uint32()) * r
	v := sum / (r * r)
	if v >= 1 {
		return math.Nextafter(1, 0)
	}
	return v
}

// Canonical32 is libstdc++'s std::generate_canonical<float, 24>: one output, converted to
// float (rounded to nearest) and divided by 2^32; a result of 1 becomes the largest float
// below 1.
func Canonical32(g Source) float32 {
	v := float32(g.Uint32()) / (1 << 32)
	if v >= 1 {
		return math.Nextafter32(1, 0)
	}
	return v
}

// UniformFloat64 is std::uniform_real_distribution<double>(a, b) drawing once from g.
func UniformFloat64(g Source, a, b float64) float64 {
	return float64(Canonical64(g)*(b-a)) + a // the conversion forbids a fused multiply-add
}

// UniformFloat32 is std::uniform_real_distribution<float>(a, b) drawing once from g: one
// 32-bit output, not two.
func UniformFloat32(g Source, a, b float32) float32 {
	return float32(Canonical32(g)*(b-a)) + a
}

// Discrete is one draw of libstdc++'s std::discrete_distribution<int> built over weights:
// the weights widened to double and divided by their sum, cumulative sums with the last set
// to exactly 1, one Canonical64 draw and the first index whose cumulative sum is not below
// it. Fewer than two weights give 0 without drawing, as libstdc++ does.
func Discrete(g Source, weights []float32) int {
	if len(weights) < 2 {
		return 0
	}
	sum := 0.0
	for _, w := range weights {
		sum += float64(w)
	}
	u := Canonical64(g)
	cum := 0.0
	for i, w := range weights[:len(weights)-1] {
		cum += float64(w) / sum
		if cum >= u {
			return i
		}
	}
	return len(weights) - 1
}
