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
	ActQ8_0 // blocks of 32 (Q8_0 partner, also of IQ4_NL and MXFP4)
	ActQ8_1 // ActQ8_0 plus per-block sums (Q8_1 partner of Q4_1 and Q5_1)
	ActQ8_K // blocks of 256 (partner of the K-quants and the other IQ types)
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
	case Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4:
		return ActQ8_0
	case Q4_1, Q5_1:
		return ActQ8_1
	case Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ3_S, IQ3_XXS, IQ2_S, IQ2_XS, IQ2_XXS, IQ1_M, IQ1_S:
		return ActQ8_K
	}
	return ActNone
}

// Acts are a matrix product's input rows: f32 activations, or what QuantizeActivations made
// of them.
type Acts struct {
	X    *Buffer
	Row0 int     // first row of X to read
	Sums *Buffer // ActQ8_1's block sums, for Q4_1 and Q5_1 weights; else nil
	// Packed is the rounding whose packed layout X holds (act_quant.wgsl's PACKED: int8
	// blocks with their scale, or pairs of 16-bit values), which CPU adapters' matrix kernel
	// reads in half or a quarter of the loads; ActNone: X holds f32.
	Packed ActQuant
}

// packedDefines are the matrix kernel's defines for reading activations packed as a.
func (a ActQuant) packedDefines() []string {
	switch a {
	case ActQ8_0, ActQ8_1:
		return []string{"XPACK", "XPACK_Q8", "XB=32"}
	case ActQ8_K:
		return []string{"XPACK", "XPACK_Q8", "XB=256"}
	case ActF16:
		return []string{"XPACK", "XPACK_F16"}
	case ActBF16:
		return []string{"XPACK", "XPACK_BF16"}
	}
	return nil
}

// actQuantSpan is the values of a row that act_quant's cooperative (COOP) workgroup takes.
const actQuantSpan = 256

// IntDotFor reports whether a product of a weight of type t with nTokens rounded rows takes
// integer dot products on this device (IntDot): QuantizeForIntDot's packed rows then feed it,
// the matrix-vector kernel's for a few tokens, matmul_q8.wgsl's tiles for more.
func (d *Device) IntDotFor(t WeightType, nTokens int) bool {
	switch t {
	case Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4:
	default:
		if !gridType(t) {
			return false
		}
	}
	return d.IntDot && !d.BarrierFree && (nTokens <= matvecMaxTokens || d.IntDotTiles)
}

// FloatPrefillEnv, when set to a non-empty value, has GPUs multiply prompts' integer-block
// weights in dequantized float tiles (matmul.wgsl) rather than integer-dot ones
// (Device.IntDotTiles): the two side by side on one device.
const FloatPrefillEnv = "WGPU_LLAMA_FLOAT_PREFILL"

// gridType reports whether t looks its quants up in a grid of points (the IQ1, IQ2 and IQ3
// types): their integer dot products are super_lanes.inc's (IDOT_GRID).
func gridType(t WeightType) bool {
	switch t {
	case IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S:
		return true
	}
	return false
}

// QuantizeForIntDot is QuantizeActivations for GPUs' integer dot products (IntDotFor): the
// same Q8_0, Q8_1 or Q8_K rounding, written packed (the block's scale, then four int8 a word).
func (r *Recorder) QuantizeForIntDot(a ActQuant, x *Buffer, xRow0, nRows, k int, out, sums *Buffer) Acts {
	if r.d.BarrierFree || a != ActQ8_0 && a != ActQ8_1 && a != ActQ8_K {
		r.fail("gpu: integer-dot activations as %d on this adapter", a)
		return Acts{X: out, Packed: a}
	}
	return r.quantize(a, x, xRow0, nRows, k, out, sums, true)
}

// packedFit reports whether activations x fit a product of a weight of type t over nTokens
// rows, and whether they take GPUs' integer dot products: CPU adapters read packed rows of
// their weight's rounding; GPUs read them only with integer dot products (IntDotFor; Q8_1's
// with their block sums).
func (r *Recorder) packedFit(t WeightType, x Acts, nTokens int) (intDot, ok bool) {
	switch {
	case x.Packed == ActNone:
		return false, true
	case ActFor(t) != x.Packed:
		return false, false
	case r.d.BarrierFree:
		return false, true
	}
	return true, r.d.IntDotFor(t, nTokens) && (x.Packed != ActQ8_1 || x.Sums != nil)
}

// cooperativeDefines are GPUs' matrix-vector kernel's defines for a weight of type t and
// activations x: integer dot products on packed rows (intDot), or Q4_K's chunked loop.
func cooperativeDefines(t WeightType, x Acts, intDot bool) []string {
	switch {
	case intDot && gridType(t):
		return append([]string{"IDOT", "IDOT_GRID"}, x.Packed.packedDefines()...)
	case intDot:
		return append([]string{"IDOT"}, x.Packed.packedDefines()...)
	case t == Q4_K:
		return []string{"CHUNK_DOT"}
	}
	return nil
}

// QuantizeActivations rounds rows xRow0 .. xRow0+nRows of x (rows of k floats) as a into out
// (rows from 0; for ActQ8_1 each 32-block's sum goes to sums, else nil) and returns them as a
// matrix product's input: packed for a batch (and with CPUMath Q8_0 and Q8_1 always) on CPU
// adapters, f32 otherwise. (Packed rows take 1.2-1.35x less time there at 64 tokens; one token's block
// loops are faster on f32.)
// out needs nRows * k floats either way. k must be a multiple of a.Block().
func (r *Recorder) QuantizeActivations(a ActQuant, x *Buffer, xRow0, nRows, k int, out, sums *Buffer) Acts {
	if a == ActNone {
		r.fail("gpu: QuantizeActivations with ActNone")
		return Acts{X: out}
	}
	// With CPUMath Q8 rows are packed for one token too: their weights take matvec_lanes.wgsl,
	// which multiplies the int8 values.
	packed := r.d.BarrierFree && (nRows > 1 || (a == ActQ8_0 || a == ActQ8_1 || a == ActQ8_K) && r.d.CPUMath)
	return r.quantize(a, x, xRow0, nRows, k, out, sums, packed)
}

// quantize records act_quant's rounding of the rows into out (packed or f32, with Q8_1's block
// sums into sums): on GPUs the cooperative kernel, a workgroup per actQuantSpan values of a row,
// each value an invocation; on CPU adapters an invocation per block.
func (r *Recorder) quantize(a ActQuant, x *Buffer, xRow0, nRows, k int, out, sums *Buffer, packed bool) Acts {
	acts := Acts{X: out}
	if k%a.Block() != 0 {
		r.fail("gpu: activations of %d values do not split into blocks of %d", k, a.Block())
		return acts
	}
	defs, bind, bufs := a.defines(), []Access{ReadOnly, ReadWrite}, []*Buffer{x, out}
	if packed {
		defs, acts.Packed = append(defs, "PACKED"), a
	}
	if a == ActQ8_1 {
		bind, bufs, acts.Sums = append(bind, ReadWrite), append(bufs, sums), sums
	}
	if !r.d.BarrierFree {
		if p := r.kernel("act_quant", bind, actQuantSpan, append(defs, "COOP")...); p != nil {
			r.Dispatch(p, Params(k, nRows, xRow0, float32(0)), r.grid((k+actQuantSpan-1)/actQuantSpan*nRows), bufs...)
		}
		return acts
	}
	if p := r.kernel("act_quant", bind, 64, defs...); p != nil {
		r.Dispatch(p, Params(k, nRows, xRow0, float32(0)), r.elementwise(k/a.Block()*nRows), bufs...)
	}
	return acts
}

// RMSNormForIntDot is RMSNorm (without LoRA) of rows rows of n values of x, times w, rounded
// at once as QuantizeForIntDot rounds them, in one dispatch: the same floats as RMSNorm, then
// QuantizeForIntDot, give (GPUs; the normalised f32 rows are not written).
func (r *Recorder) RMSNormForIntDot(x, w *Buffer, n, rows int, eps float32, a ActQuant, out, sums *Buffer) Acts {
	return r.quantizeFused(a, x, rows, n, out, sums, eps, []string{"NORM"}, w)
}

// GLUForIntDot is GLU of nTokens rows of gu (the fused gate|up rows, 2n wide) rounded at once
// as QuantizeForIntDot rounds them, in one dispatch (GPUs; the f32 rows are not written).
func (r *Recorder) GLUForIntDot(gu *Buffer, n, nTokens int, gelu bool, a ActQuant, out, sums *Buffer) Acts {
	defs := []string{"GLU"}
	if gelu {
		defs = append(defs, "GLU_GELU")
	}
	return r.quantizeFused(a, gu, nTokens, n, out, sums, 0, defs)
}

// quantizeFused is QuantizeForIntDot of rows of k values that act_quant computes from x as
// inputs says (NORM: with the norm's weight in extra), from row 0.
func (r *Recorder) quantizeFused(a ActQuant, x *Buffer, nRows, k int, out, sums *Buffer, eps float32, inputs []string, extra ...*Buffer) Acts {
	acts := Acts{X: out, Packed: a}
	if r.d.BarrierFree || a != ActQ8_0 && a != ActQ8_1 && a != ActQ8_K || k%a.Block() != 0 {
		r.fail("gpu: fused integer-dot activations as %d of rows of %d on this adapter", a, k)
		return acts
	}
	defs, bind, bufs := append(a.defines(), "PACKED", "COOP"), []Access{ReadOnly, ReadWrite}, []*Buffer{x, out}
	if a == ActQ8_1 {
		bind, bufs, acts.Sums = append(bind, ReadWrite), append(bufs, sums), sums
	}
	for _, b := range extra {
		bind, bufs = append(bind, ReadOnly), append(bufs, b)
	}
	if p := r.kernel("act_quant", bind, actQuantSpan, append(defs, inputs...)...); p != nil {
		r.Dispatch(p, Params(k, nRows, 0, eps), r.grid((k+actQuantSpan-1)/actQuantSpan*nRows), bufs...)
	}
	return acts
}

// GroupedIntDotRows is the row count to ask IntDotFor about for the grouped experts' products
// (MatMulID over MoEGroup's plan), which take matmul_q8's tiles as a prompt's products do.
const GroupedIntDotRows = matvecMaxTokens + 1

// matMulQ8 is MatMulAt on GPUs with integer dot products for more tokens than the
// matrix-vector kernel takes: matmul_q8.wgsl's 64 x 64 tiles, from x's packed rows (and
// Q8_1's block sums for Q4_1 and Q5_1).
func (r *Recorder) matMulQ8(w Weight, x Acts, nTokens int, extra []string, params func(WeightChunk) []uint32, y *Buffer) {
	bind, extra := sumsVariant(w.Type, x.Sums != nil, extra)
	defs := append(append(extra, "IDOT"), x.Packed.packedDefines()...)
	if sup := superLanes(w.Type); sup != nil {
		defs = append(append(defs, "SUPER_TYPE"), sup[1:]...) // SUP_COEF where the type has it
	}
	p := r.kernel("matmul_q8", bind, 256, weightDefines(w.Type, defs...)...)
	if p == nil {
		return
	}
	for _, c := range w.Chunks {
		r.Dispatch(p, params(c), [3]uint32{uint32((c.Rows + matmulTile - 1) / matmulTile), uint32((nTokens + matmulTile - 1) / matmulTile), 1}, withSums(x.Sums, c.Buf, x.X, y)...)
	}
}
