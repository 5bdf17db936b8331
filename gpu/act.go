package gpu

// ActQuant is how matmul activations are rounded before the product, mirroring ggml's
// vec_dot_type: llama.cpp's CPU backend quantizes activations to the weight's dot-product
// partner type, and rounding the same way makes quantized models reproduce its outputs.
type ActQuant uint8

// Activation roundings.
const (
	ActNone ActQuant = iota // f32 weights: activations as they are
	ActF16
	ActBF16
	ActQ8_0 // blocks of 32 (Q8_0 partner)
	ActQ8_1 // ActQ8_0 plus per-block sums (Q8_1 partner of Q4_1 and Q5_1)
	ActQ8_K // blocks of 256 (K-quant partner)
)

// Block is the number of activations that share a scale.
func (a ActQuant) Block() int {
	switch a {
	case ActQ8_0, ActQ8_1:
		return 32
	case ActQ8_K:
		return 256
	}
	return 4
}

func (a ActQuant) defines() []string {
	return [][]string{nil, {"F16"}, {"BF16"}, {"Q8_0"}, {"Q8_0", "SUMS"}, {"Q8_K"}}[a]
}

// ActFor is the activation rounding llama.cpp's CPU backend applies for weights of type t.
func ActFor(t WeightType) ActQuant {
	switch t {
	case F16:
		return ActF16
	case BF16:
		return ActBF16
	case Q8_0, Q4_0, Q5_0:
		return ActQ8_0
	case Q4_1, Q5_1:
		return ActQ8_1
	case Q2_K, Q3_K, Q4_K, Q5_K, Q6_K:
		return ActQ8_K
	}
	return ActNone
}

// QuantizeActivations writes rows xRow0 .. xRow0+nRows of x (rows of k floats) to out,
// rounded as a (out rows start at 0); for ActQ8_1 each 32-block's sum goes to sums (else nil).
// k must be a multiple of a.Block().
func (r *Recorder) QuantizeActivations(a ActQuant, x *Buffer, xRow0, nRows, k int, out, sums *Buffer) {
	if a == ActNone {
		r.fail("gpu: QuantizeActivations with ActNone")
		return
	}
	if k%a.Block() != 0 {
		r.fail("gpu: activations of %d values do not split into blocks of %d", k, a.Block())
		return
	}
	if a == ActQ8_1 {
		p := r.kernel("act_quant", []Access{ReadOnly, ReadWrite, ReadWrite}, 64, a.defines()...)
		if p != nil {
			r.Dispatch(p, Params(k, nRows, xRow0), r.elementwise(k/a.Block()*nRows), x, out, sums)
		}
		return
	}
	p := r.kernel("act_quant", []Access{ReadOnly, ReadWrite}, 64, a.defines()...)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(k, nRows, xRow0), r.elementwise(k/a.Block()*nRows), x, out)
}
