package gpu

import "slices"

// The matrix products' recorder ops: which kernel a product takes (matrix-vector, rows,
// tiles), its epilogues (accumulate, scale, a LoRA group's term) and the fused LoRA kernel.

// matvecRows is how many rows one workgroup of the cooperative matrix-vector kernel computes.
const matvecRows = 4

// matvecMaxTokens is the largest batch the matrix-vector kernel handles (its MAXT); larger
// batches use the tiled matrix-matrix kernel.
const matvecMaxTokens = 8

// matvecKernel returns the matrix-vector kernel for t, with block sums (XSUM) when given.
func (r *Recorder) matvecKernel(t WeightType, sums, lora bool, extra []string) *Pipeline {
	wg := uint32(64)
	if slices.Contains(extra, "ROW_PER_THREAD") {
		wg = rowsWorkgroup
	}
	bind, extra := sumsVariant(t, sums, extra)
	if lora {
		bind = append(slices.Clone(bind), ReadOnly, ReadOnly)
	}
	return r.kernel("matvec", bind, wg, weightDefines(t, extra...)...)
}

// sumsVariant is the matrix-vector kernels' bindings and defines for weights of type t: with
// the Q8_1 block sums bound (XSUM) for Q4_1 and Q5_1 when sums are given.
func sumsVariant(t WeightType, sums bool, extra []string) ([]Access, []string) {
	if sums && (t == Q4_1 || t == Q5_1) {
		return []Access{ReadOnly, ReadOnly, ReadWrite, ReadOnly}, append(extra, "XSUM")
	}
	return bindRRRW, extra
}

// withSums appends the block-sum binding when there is one.
func withSums(sums *Buffer, bufs ...*Buffer) []*Buffer {
	if sums != nil {
		return append(bufs, sums)
	}
	return bufs
}

// MatMul computes y[t, :] = W x[xRow0+t, :] for nTokens rows of x, or adds it to y when
// accumulate is set (the residual add fused into the projection). The weight is dequantized
// inside the kernel. CPU adapters take the barrier-free matrix-vector kernel for up to 4
// tokens, each invocation up to 4 rows and the tokens, and matmul_rows for more, each
// invocation 4 rows and 8 tokens (the grid's z holds the groups of tokens); GPUs take the
// cooperative matrix-vector kernel for few tokens and the tiled kernel for more.
func (r *Recorder) MatMul(w Weight, x *Buffer, xRow0, nTokens int, y *Buffer, accumulate bool) {
	r.MatMulAt(w, Acts{X: x, Row0: xRow0}, nTokens, y, w.Rows, 0, accumulate)
}

// MatMulAt is MatMul of nTokens rows of x writing into rows of yStride floats of y starting at
// column yCol, so several projections (q, k and v of different types) can fill one fused row.
// For Q4_1 and Q5_1 weights, x.Sums may hold the Q8_1 block sums (QuantizeActivations with
// ActQ8_1): the matrix-vector kernels then apply each block minimum to the rounded sum as
// llama.cpp does. Packed activations are read by CPU adapters' kernels, and on GPUs by the
// integer-dot products (QuantizeForIntDot, Device.IntDotFor).
func (r *Recorder) MatMulAt(w Weight, x Acts, nTokens int, y *Buffer, yStride, yCol int, accumulate bool) {
	r.matMulAt(w, x, nTokens, y, yStride, yCol, accumulate, 1, nil)
}

// MatMulScaledAdd is MatMulAt adding scale times the products into y (a LoRA pair's term,
// scale·B·(A·x), added to its projection's output in the product's own epilogue).
func (r *Recorder) MatMulScaledAdd(w Weight, x Acts, nTokens int, y *Buffer, yStride, yCol int, scale float32) {
	r.matMulAt(w, x, nTokens, y, yStride, yCol, true, scale, nil)
}

// LoRAEpilogue is a LoRA group's B (Width rows of Rank, f32) and its A·x for each token (T,
// RMSNormLoRA's), whose Scale·B·T a product adds over its output's columns Col ..
// Col+Width-1 as it stores them.
type LoRAEpilogue struct {
	B, T             *Buffer
	Rank, Col, Width int
	Scale            float32
}

// MatMulLoRA is MatMulAt with an adapter's term added in the epilogue: the whole LoRA of a
// projection without a dispatch of its own. The matrix-vector kernels take it: at most
// MatVecMaxTokens tokens on GPUs (CPU adapters' kernels take any count).
func (r *Recorder) MatMulLoRA(w Weight, x Acts, nTokens int, y *Buffer, yStride, yCol int, accumulate bool, lora LoRAEpilogue) {
	r.matMulAt(w, x, nTokens, y, yStride, yCol, accumulate, 1, &lora)
}

// MatVecMaxTokens is the most tokens GPUs' matrix-vector kernel takes (more go to the tiled
// kernel, which has no LoRA epilogue).
const MatVecMaxTokens = matvecMaxTokens

func (r *Recorder) matMulAt(w Weight, x Acts, nTokens int, y *Buffer, yStride, yCol int, accumulate bool, scale float32, lora *LoRAEpilogue) {
	if w.Cols%4 != 0 {
		r.fail("gpu: matmul needs a row length that is a multiple of 4, got %d", w.Cols)
		return
	}
	intDot, fits := r.packedFit(w.Type, x, nTokens)
	if !fits {
		r.fail("gpu: activations packed as %d do not fit a %s weight on this adapter", x.Packed, w.Type)
		return
	}
	extra := []string{}
	if accumulate {
		extra = append(extra, "ADD")
	}
	if scale != 1 {
		extra = append(extra, "SCALED")
	}
	var lr LoRAEpilogue
	if lora != nil {
		extra, lr = append(extra, "LORA_B"), *lora
	}
	// params is the kernels' parameters for a chunk of the weight.
	params := func(c WeightChunk) []uint32 {
		return Params(w.Cols, c.Rows, nTokens, x.Row0, 0, yStride, yCol+c.Row0, scale, lr.Rank, lr.Col, lr.Width, lr.Scale)
	}
	// bufs binds a chunk: weight, activations, output, then the block sums and the LoRA's.
	bufs := func(c WeightChunk) []*Buffer {
		b := withSums(x.Sums, c.Buf, x.X, y)
		if lora != nil {
			b = append(b, lr.B, lr.T)
		}
		return b
	}
	xSums := x.Sums
	switch {
	case r.inLaneOrder(w, x):
		r.matMulLanes(w, x, nTokens, extra, lora != nil, params, bufs)
	case r.d.BarrierFree && nTokens > 4:
		r.matMulRows(w, x, nTokens, extra, lora != nil, params, bufs)
	case r.d.BarrierFree:
		variant := append(append(extra, "ROW_PER_THREAD"), x.Packed.packedDefines()...)
		lanes := 1 // token lanes per invocation: as few as the batch needs, at most 4
		switch {
		case nTokens > 2:
			lanes, variant = 4, append(variant, "LANES2", "LANES4")
		case nTokens == 2:
			lanes, variant = 2, append(variant, "LANES2")
		case w.Type == Q4_K || w.Type == Q6_K:
			variant = append(variant, "BLOCK_DOT") // hand-ordered block loops for decode
		}
		tokenGroups := (nTokens + lanes - 1) / lanes
		for _, c := range w.Chunks {
			rows := r.d.RowsPerInvocation
			if rowsDefines[rows] == nil { // 0 (or not 1, 2, 4): by size
				rows = rowsPerInvocation(c.Rows, tokenGroups)
			}
			p := r.matvecKernel(w.Type, xSums != nil, lora != nil, append(variant, rowsDefines[rows]...))
			if p == nil {
				break
			}
			// One dispatch per chunk: groups of lanes tokens go in the grid's z.
			groups := r.grid((c.Rows + rowsWorkgroup*rows - 1) / (rowsWorkgroup * rows))
			groups[2] = uint32(tokenGroups)
			r.Dispatch(p, params(c), groups, bufs(c)...)
		}
	case nTokens <= matvecMaxTokens:
		if r.d.SubgroupMath {
			extra = append(extra, "SUBGROUPS")
		}
		if nTokens == 1 {
			extra = append(extra, "ONE")
		}
		extra = append(extra, cooperativeDefines(w.Type, x, intDot)...)
		p := r.matvecKernel(w.Type, xSums != nil, lora != nil, extra)
		for _, c := range w.Chunks {
			if p != nil {
				r.Dispatch(p, params(c), r.grid((c.Rows+matvecRows-1)/matvecRows), bufs(c)...)
			}
		}
	case lora != nil:
		r.fail("gpu: matmul: a LoRA epilogue takes at most %d tokens on this adapter, not %d", matvecMaxTokens, nTokens)
	case intDot:
		r.matMulQ8(w, x, nTokens, extra, params, y)
	default:
		if r.d.F16Math {
			extra = append(extra, "F16_MATH")
		}
		p := r.kernel("matmul", bindRRRW, 256, weightDefines(w.Type, extra...)...)
		for _, c := range w.Chunks {
			if p != nil {
				r.Dispatch(p, params(c),
					[3]uint32{uint32((c.Rows + matmulTile - 1) / matmulTile), uint32((nTokens + matmulTile - 1) / matmulTile), 1}, c.Buf, x.X, y)
			}
		}
	}
}

// matMulRows is MatMulAt on CPU adapters for batches of 5 tokens and more: matmul_rows.wgsl,
// each invocation 4 rows and 8 tokens (the grid's z holds the groups of tokens).
func (r *Recorder) matMulRows(w Weight, x Acts, nTokens int, extra []string, lora bool, params func(WeightChunk) []uint32, bufs func(WeightChunk) []*Buffer) {
	bind, extra := sumsVariant(w.Type, x.Sums != nil, extra)
	if lora {
		bind = append(slices.Clone(bind), ReadOnly, ReadOnly)
	}
	p := r.kernel("matmul_rows", bind, rowsWorkgroup, weightDefines(w.Type, append(extra, x.Packed.packedDefines()...)...)...)
	if p == nil {
		return
	}
	for _, c := range w.Chunks {
		groups := r.grid((c.Rows + 4*rowsWorkgroup - 1) / (4 * rowsWorkgroup))
		groups[2] = uint32((nTokens + 7) / 8)
		r.Dispatch(p, params(c), groups, bufs(c)...)
	}
}

// rowsDefines are the row-per-thread kernel's defines for 1, 2 or 4 rows per invocation.
var rowsDefines = map[int][]string{1: {}, 2: {"R2"}, 4: {"R2", "R4"}}

// cpuMinGroups is the fewest workgroups a row-per-thread dispatch is cut into: enough that
// every core of a CPU adapter has work and a slow one is not left alone with the last.
const cpuMinGroups = 4

// rowsWorkgroup is the workgroup size of the CPU adapters' matrix kernels (matvec.wgsl's
// row-per-thread RWG, matmul_rows.wgsl's RWG).
const rowsWorkgroup = 32

// rowsPerInvocation picks how many rows each invocation of the row-per-thread kernel takes:
// the most (4, 2 or 1) that still leave cpuMinGroups workgroups for rows rows and tokenGroups
// groups of token lanes. More rows share more activation loads.
func rowsPerInvocation(rows, tokenGroups int) int {
	for _, n := range []int{4, 2} {
		if (rows+rowsWorkgroup*n-1)/(rowsWorkgroup*n)*tokenGroups >= cpuMinGroups {
			return n
		}
	}
	return 1
}

// matmulTile is the rows and the tokens of the tiled kernel's output tile.
const matmulTile = 64

// LoRA limits: the fused kernel takes at most LoRAMaxTokens tokens and LoRAMaxRank rank.
const (
	LoRAMaxTokens = 8
	LoRAMaxRank   = 64
)

// LoRA adds a LoRA group's term for nTokens (at most LoRAMaxTokens) rows of x (k wide, from
// xRow0) into columns yCol .. yCol+out-1 of y's rows of yStride, in one dispatch: y +=
// scale·B·(A·x), A rank rows of k and B out rows of rank (at most LoRAMaxRank), both f32.
// act is the adapter's type's activation rounding (ActNone, ActF16 or ActBF16).
func (r *Recorder) LoRA(x *Buffer, xRow0, nTokens, k int, a, b *Buffer, rank, out int, y *Buffer, yStride, yCol int, scale float32, act ActQuant) {
	if nTokens > LoRAMaxTokens || rank > LoRAMaxRank || yCol+out > yStride {
		r.fail("gpu: lora: %d tokens, rank %d, columns %d..%d of %d: over the fused kernel's limits", nTokens, rank, yCol, yCol+out, yStride)
		return
	}
	defs := actDefines(act)
	groups := r.grid((out + 63) / 64)
	if r.d.BarrierFree {
		defs, groups = append(defs, "ONE_GROUP"), [3]uint32{1, 1, 1}
	}
	p := r.kernel("lora", []Access{ReadOnly, ReadOnly, ReadOnly, ReadWrite}, 64, defs...)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(k, rank, out, nTokens, xRow0, yStride, yCol, scale), groups, x, a, b, y)
}
