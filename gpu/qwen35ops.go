package gpu

// The small per-token operations of Qwen3.5's (qwen35's) layers around the recurrent kernels
// (recurrent.go) and attention, as llama.cpp computes them (src/models/qwen35.cpp): the
// Gated DeltaNet layer's gates (DeltaGates: beta = sigmoid(ssm_beta·x), g = softplus(ssm_alpha·x
// + ssm_dt)·ssm_a) and its gated output norm (GatedRMSNorm: build_norm_gated), and the gated
// attention layer's output gate (SigmoidGate: o·sigmoid(gate)). Each reads and writes head
// vectors where a HeadLayout says, so they take their operands in the projections' buffers as
// they are, without copies.

// HeadLayout says where a batch's head vectors lie in a buffer of rows: element e of head h of
// row t is float t·Stride + Col + h·HeadStride + e. HeadStride 0 means the heads are packed
// (the head size). Heads of a row must lie within the row (Col + (heads-1)·HeadStride +
// head size at most Stride), and heads written must not overlap.
type HeadLayout struct{ Stride, Col, HeadStride int }

// headStride is l's head stride, HeadStride or dim when that is 0.
func (l HeadLayout) headStride(dim int) int {
	if l.HeadStride == 0 {
		return dim
	}
	return l.HeadStride
}

// headsFit checks, recording the failure, that rows rows of heads head vectors of dim floats
// lie as l says within b: inside their rows, not overlapping when written.
func (r *Recorder) headsFit(op, what string, b *Buffer, l HeadLayout, rows, heads, dim int, written bool) bool {
	hs := l.headStride(dim)
	end := l.Col + (heads-1)*hs + dim
	if l.Col < 0 || hs < 0 || end > l.Stride || (written && heads > 1 && hs < dim) {
		r.fail("gpu: %s: %s: %d heads of %d at column %d, %d apart, in rows of %d", op, what, heads, dim, l.Col, hs, l.Stride)
		return false
	}
	return r.fits(op, what, b, (rows-1)*l.Stride+end)
}

// GatedRMSNorm is qwen35's gated norm (llama.cpp's build_norm_gated: ggml_rms_norm, ggml_mul
// by the weight, ggml_mul by ggml_silu of the gate) over head vectors of o in place: each
// head vector v of headDim floats (rows rows of heads heads, as ol says) becomes
//
//	((v · s) · w) · silu(z),   s = 1/sqrt(Σv²/headDim + eps),  silu(z) = z/(1+exp(-z))
//
// elementwise, in f32 in that order, with z the same head of the same row of the gate (as zl
// says in z) and w headDim floats shared by the heads (ssm_norm). The squares are summed as
// ggml sums them, in double (emulated: norm_sum.inc), the mean rounded to f32. qwen35 applies it to DeltaNet's output (rows of VHeads·HeadDim,
// HeadLayout{Stride: VHeads·HeadDim}) with z = attn_gate·x, eps f_norm_rms_eps.
//
// One invocation per head vector; its loops are 2·headDim.
func (r *Recorder) GatedRMSNorm(o *Buffer, ol HeadLayout, z *Buffer, zl HeadLayout, w *Buffer, rows, heads, headDim int, eps float32) {
	const op = "gated_norm"
	if rows < 1 || heads < 1 || headDim < 1 {
		r.fail("gpu: %s: %d rows of %d heads of %d", op, rows, heads, headDim)
		return
	}
	if !r.headsFit(op, "o", o, ol, rows, heads, headDim, true) || !r.headsFit(op, "z", z, zl, rows, heads, headDim, false) ||
		!r.fits(op, "w", w, headDim) {
		return
	}
	p := r.kernel("gated_norm", []Access{ReadWrite, ReadOnly, ReadOnly}, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(rows, heads, headDim, ol.Stride, ol.Col, ol.headStride(headDim), zl.Stride, zl.Col, zl.headStride(headDim), eps, 0),
		r.elementwise(rows*heads), o, z, w)
}

// DeltaGates computes the Gated DeltaNet's per-head gates of rows tokens as qwen35's graph
// does (ggml_add, ggml_softplus, ggml_mul; ggml_sigmoid), in f32: for token t and value head h
// (of heads, ssm_dt_rank),
//
//	g[t, h]    = softplus(alpha[t, h] + dtBias[h]) · ssmA[h]
//	beta[t, h] = 1/(1 + exp(-betaIn[t, h]))
//
// with softplus(x) = x above 20, else log(1 + exp(x)) (ggml's op_softplus, logf(1.0f +
// expf(x)): 0 below about -17, where log1p would give e^x). alpha and betaIn are the
// projections ssm_alpha·x and ssm_beta·x, one value per head where al and bl say (layouts of
// heads of one float: HeadStride 0 packs them; they may share a buffer); dtBias (ssm_dt.bias)
// and ssmA (ssm_a, -exp(A_log)) heads floats each. g and beta receive rows of heads floats, the
// layout DeltaNet reads.
//
// One invocation per (token, head); no loops.
func (r *Recorder) DeltaGates(alpha *Buffer, al HeadLayout, betaIn *Buffer, bl HeadLayout, dtBias, ssmA, g, beta *Buffer, rows, heads int) {
	const op = "delta_gates"
	if rows < 1 || heads < 1 {
		r.fail("gpu: %s: %d rows of %d heads", op, rows, heads)
		return
	}
	if !r.headsFit(op, "alpha", alpha, al, rows, heads, 1, false) || !r.headsFit(op, "beta's input", betaIn, bl, rows, heads, 1, false) ||
		!r.fits(op, "dt_bias", dtBias, heads) || !r.fits(op, "ssm_a", ssmA, heads) ||
		!r.fits(op, "g", g, rows*heads) || !r.fits(op, "beta", beta, rows*heads) {
		return
	}
	p := r.kernel("delta_gates", []Access{ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadWrite, ReadWrite}, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(rows, heads, al.Stride, al.Col, al.headStride(1), bl.Stride, bl.Col, bl.headStride(1)),
		r.elementwise(rows*heads), alpha, betaIn, dtBias, ssmA, g, beta)
}

// SigmoidGate is the output gate of qwen35's gated attention (ggml_sigmoid, then ggml_mul) in
// place, in f32: o[t, h, e] *= 1/(1 + exp(-gate[t, h, e])) over rows rows of heads head
// vectors of headDim floats, o's as ol says and the gate's as gl says. In qwen35 the gate is
// the second half of each head's 2·head_dim rows of attn_q's output (q's row of stride
// 2·n_head·head_dim: HeadLayout{Stride: 2·n_head·head_dim, Col: head_dim, HeadStride:
// 2·head_dim}) and o attention's output.
//
// One invocation per element; no loops.
func (r *Recorder) SigmoidGate(o *Buffer, ol HeadLayout, gate *Buffer, gl HeadLayout, rows, heads, headDim int) {
	const op = "sigmoid_gate"
	if rows < 1 || heads < 1 || headDim < 1 {
		r.fail("gpu: %s: %d rows of %d heads of %d", op, rows, heads, headDim)
		return
	}
	if !r.headsFit(op, "o", o, ol, rows, heads, headDim, true) || !r.headsFit(op, "the gate", gate, gl, rows, heads, headDim, false) {
		return
	}
	p := r.kernel("sigmoid_gate", []Access{ReadWrite, ReadOnly}, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(rows, heads, headDim, ol.Stride, ol.Col, ol.headStride(headDim), gl.Stride, gl.Col, gl.headStride(headDim)),
		r.elementwise(rows*heads*headDim), o, gate)
}
