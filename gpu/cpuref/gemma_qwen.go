package cpuref

import "math"

// RoPENeoX rotates, in place, the first nRot dimensions of every head of x (nTokens x nHeads x
// headDim) GPT-NeoX style: element i pairs with i + nRot/2, turned by pos[t]*freqBase^(-2i/nRot).
func RoPENeoX(x []float32, pos []int32, nHeads, headDim, nRot int, freqBase float32) {
	half := nRot / 2
	for t, p := range pos {
		for h := 0; h < nHeads; h++ {
			base := (t*nHeads + h) * headDim
			for i := 0; i < half; i++ {
				theta := float64(p) * math.Pow(float64(freqBase), -2*float64(i)/float64(nRot))
				c, s := math.Cos(theta), math.Sin(theta)
				x0, x1 := float64(x[base+i]), float64(x[base+i+half])
				x[base+i] = float32(x0*c - x1*s)
				x[base+i+half] = float32(x0*s + x1*c)
			}
		}
	}
}

// GELUMul returns gelu(gate) * up elementwise with ggml's tanh approximation of GELU.
func GELUMul(gate, up []float32) []float32 {
	out := make([]float32, len(gate))
	for i, g := range gate {
		x := float64(g)
		a := 0.5 * x * (1 + math.Tanh(0.7978845608028654*x*(1+0.044715*x*x)))
		out[i] = float32(a * float64(up[i]))
	}
	return out
}

// SoftCap returns limit * tanh(x / limit) elementwise.
func SoftCap(x []float32, limit float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(float64(limit) * math.Tanh(float64(v)/float64(limit)))
	}
	return out
}
