package gpu

// Scale multiplies the n values of x by s in place, in f32 (Gemma 4's layer_output_scale, a
// one-value tensor the model reads at load).
func (r *Recorder) Scale(x *Buffer, n int, s float32) {
	if !r.fits("scale", "x", x, n) {
		return
	}
	p := r.kernel("scale", []Access{ReadWrite}, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n, s), r.elementwise(n), x)
}
