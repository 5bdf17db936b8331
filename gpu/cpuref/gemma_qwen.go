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

// RoPEYaRN rotates x in place like RoPE (adjacent pairs, or halves when neox) with ggml's
// rope_yarn angle: theta_extrap = pos*freqBase^(-2i/nRot), interpolated by freqScale and
// blended back towards theta_extrap over the pairs corrLo..corrHi by extFactor, with cos and
// sin scaled by attnFactor * (1 + 0.1 ln(1/freqScale)) when extFactor != 0.
func RoPEYaRN(x []float32, pos []int32, nHeads, headDim, nRot int, neox bool, freqBase, freqScale, extFactor, attnFactor, corrLo, corrHi float32) {
	for t, p := range pos {
		for h := 0; h < nHeads; h++ {
			base := (t*nHeads + h) * headDim
			for i := 0; i < nRot/2; i++ {
				extrap := float64(p) * math.Pow(float64(freqBase), -2*float64(i)/float64(nRot))
				th := float64(freqScale) * extrap
				mscale := float64(attnFactor)
				if extFactor != 0 {
					y := (float64(i) - float64(corrLo)) / math.Max(0.001, float64(corrHi-corrLo))
					ramp := (1 - math.Min(1, math.Max(0, y))) * float64(extFactor)
					th = th*(1-ramp) + extrap*ramp
					mscale *= 1 + 0.1*math.Log(1/float64(freqScale))
				}
				a, b := base+2*i, base+2*i+1
				if neox {
					a, b = base+i, base+i+nRot/2
				}
				c, s := math.Cos(th)*mscale, math.Sin(th)*mscale
				x0, x1 := float64(x[a]), float64(x[b])
				x[a], x[b] = float32(x0*c-x1*s), float32(x0*s+x1*c)
			}
		}
	}
}

// LayerNorm normalises every row of n values of x to zero mean and unit variance (plus eps),
// then multiplies by w and adds b.
func LayerNorm(x, w, b []float32, n int, eps float32) []float32 {
	out := make([]float32, len(x))
	for r := 0; r < len(x)/n; r++ {
		row := x[r*n : (r+1)*n]
		var mean, vr float64
		for _, v := range row {
			mean += float64(v)
		}
		mean /= float64(n)
		for _, v := range row {
			vr += (float64(v) - mean) * (float64(v) - mean)
		}
		scale := 1 / math.Sqrt(vr/float64(n)+float64(eps))
		for i, v := range row {
			out[r*n+i] = float32((float64(v)-mean)*scale*float64(w[i]) + float64(b[i]))
		}
	}
	return out
}

// GELU is ggml's tanh approximation of GELU, elementwise.
func GELU(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		g := float64(v)
		out[i] = float32(0.5 * g * (1 + math.Tanh(0.7978845608028654*g*(1+0.044715*g*g))))
	}
	return out
}

// AvgPool averages s x s blocks of a g x g grid of rows of n values into a (g/s) x (g/s) grid,
// row by row (the gemma3 projector's pooling).
func AvgPool(x []float32, n, g, s int) []float32 {
	og := g / s
	out := make([]float32, og*og*n)
	for oy := range og {
		for ox := range og {
			for i := range n {
				var sum float64
				for dy := range s {
					for dx := range s {
						sum += float64(x[((oy*s+dy)*g+ox*s+dx)*n+i])
					}
				}
				out[(oy*og+ox)*n+i] = float32(sum / float64(s*s))
			}
		}
	}
	return out
}

// RoPEMulti rotates x in place as ggml's multi-section RoPE (ggml_rope_multi, NeoX pairs:
// element i with i + nRot/2): pos holds four position components per token (t, h, w, e), and
// pair i turns by the component its section names (i modulo the sections' total). In vision
// mode each section's frequency index restarts at its first pair and the angles spread over
// nRot/2 dimensions: theta = p * freqBase^(-2k/(nRot/2)), k counted from the section's start;
// otherwise theta = p * freqBase^(-2i/nRot).
func RoPEMulti(x []float32, pos []int32, nHeads, headDim, nRot int, freqBase float32, sections [4]int, vision bool) {
	half := nRot / 2
	total := sections[0] + sections[1] + sections[2] + sections[3]
	for t := range len(pos) / 4 {
		for h := range nHeads {
			base := (t*nHeads + h) * headDim
			for i := range half {
				s, c, start := i%total, 0, 0
				for c < 3 && s >= start+sections[c] {
					start += sections[c]
					c++
				}
				k, dims := float64(i), float64(nRot)
				if vision {
					k, dims = float64(s-start), float64(nRot/2)
				}
				theta := float64(pos[4*t+c]) * math.Pow(float64(freqBase), -2*k/dims)
				cs, sn := math.Cos(theta), math.Sin(theta)
				x0, x1 := float64(x[base+i]), float64(x[base+i+half])
				x[base+i] = float32(x0*cs - x1*sn)
				x[base+i+half] = float32(x0*sn + x1*cs)
			}
		}
	}
}
