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
	r.Dispatch(p, Params(n, s, 0), r.elementwise(n), x)
}

// ScaleRows multiplies rows rows of n values of x in place by s and then by w (n values), in
// f32 in that order, as ggml_scale and then ggml_mul by a vector do (Gemma 4's router input).
func (r *Recorder) ScaleRows(x, w *Buffer, rows, n int, s float32) {
	if !r.fits("scale", "x", x, rows*n) || !r.fits("scale", "w", w, n) {
		return
	}
	p := r.kernel("scale", []Access{ReadWrite, ReadOnly}, 64, "WEIGHTS")
	if p == nil {
		return
	}
	r.Dispatch(p, Params(rows*n, s, n), r.elementwise(rows*n), x, w)
}
