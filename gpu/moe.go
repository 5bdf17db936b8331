package gpu

import (
	"fmt"
	"slices"
)

// Mixture-of-Experts feed-forward operations, as llama.cpp's build_moe_ffn (src/llama-graph.cpp)
// computes them: route each token to k of the experts (MoERoute), group the assignments by
// expert for batches (MoEGroup), multiply each assignment's input by its expert's weights
// (MatMulID, ggml's mul_mat_id), add per-expert biases (AddID, ggml's add_id), gate (GLU,
// GLUOAI) and sum the experts' outputs weighted (MoECombine). An assignment is a token's slot:
// assignment a = token·k + slot, the order of ggml's [n_expert_used, n_tokens] tensors.

// MoEGating is how MoERoute turns a token's router logits into expert probabilities:
// llama.cpp's llama_expert_gating_func_type, with its numbering (0 is taken as GateSoftmax).
type MoEGating int

// Gating functions.
const (
	// GateSoftmax: probabilities softmax(logits) over every expert, the k largest chosen and
	// weighted by them (Mixtral, Qwen2/3-MoE).
	GateSoftmax MoEGating = 1
	// GateSigmoid: probabilities sigmoid(logits), chosen and weighted as softmax's (DeepSeek V3).
	GateSigmoid MoEGating = 2
	// GateSoftmaxWeight: the k largest raw logits chosen, weighted by the softmax over those k
	// alone (gpt-oss).
	GateSoftmaxWeight MoEGating = 3
	// GateSqrtSoftplus: probabilities sqrt(softplus(logits)), softplus(x) = x above 20.
	GateSqrtSoftplus MoEGating = 4
)

// MoERouting are MoERoute's options beyond the shapes.
type MoERouting struct {
	Gating MoEGating
	// Bias, when not nil, holds nExperts f32 added to the probabilities for choosing the
	// experts only (DeepSeek V3's exp_probs_b); the weights come from the unbiased ones.
	Bias *Buffer
	// LogitBias, when not nil, holds nExperts f32 added to the logits first: the router's bias
	// (gpt-oss's ffn_gate_inp.bias), in the routing's own dispatch.
	LogitBias *Buffer
	// Norm divides the chosen weights by their sum, clamped below at MoEWeightSumMin.
	Norm bool
	// Scale multiplies the weights (expert_weights_scale) unless it is 0 or 1.
	Scale float32
}

// MoEWeightSumMin is the floor under the sum that normalised expert weights are divided by:
// the smallest normal f16, build_moe_ffn's ggml_clamp before its ggml_div.
const MoEWeightSumMin = 6.103515625e-5

// Limits of the MoE kernels: MoERoute takes at most MoEMaxExperts experts and MoEMaxUsed
// chosen per token (its loops, (k + 2)·E, stay far below loopBudget); MoEGroup takes at most
// MoEMaxAssignments assignments (tokens·k) per call (its loops are about that many).
const (
	MoEMaxExperts     = 512
	MoEMaxUsed        = 32
	MoEMaxAssignments = 16384
)

// MoERoute computes, for each of nTokens rows of router logits (f32, nExperts wide, rows
// packed), the k experts the token goes to and their weights: probabilities by opts.Gating,
// the k largest of them (plus opts.Bias, for choosing only) in descending order, ties to the
// lower expert, then (GateSoftmaxWeight) the softmax over the chosen logits, (opts.Norm) the
// division by their sum clamped below at MoEWeightSumMin, and the multiplication by
// opts.Scale. ids (u32) and weights (f32) receive nTokens·k values: slot j of token t at
// t·k + j, in llama.cpp's order (the order MoECombine sums the expert outputs in).
func (r *Recorder) MoERoute(logits *Buffer, nTokens, nExperts, k int, opts MoERouting, ids, weights *Buffer) {
	if nTokens < 1 || nExperts < 1 || nExperts > MoEMaxExperts || k < 1 || k > min(nExperts, MoEMaxUsed) {
		r.fail("gpu: moe route: %d of %d experts for %d tokens (at most %d of %d)", k, nExperts, nTokens, MoEMaxUsed, MoEMaxExperts)
		return
	}
	gating := opts.Gating
	if gating == 0 {
		gating = GateSoftmax
	}
	if gating < GateSoftmax || gating > GateSqrtSoftplus {
		r.fail("gpu: moe route: gating %d unknown", gating)
		return
	}
	scale := opts.Scale
	if scale == 0 {
		scale = 1
	}
	norm := 0
	if opts.Norm {
		norm = 1
	}
	var defs []string
	bind, bufs := []Access{ReadOnly, ReadWrite, ReadWrite}, []*Buffer{logits, ids, weights}
	if opts.Bias != nil {
		defs, bind, bufs = append(defs, "BIAS"), append(bind, ReadOnly), append(bufs, opts.Bias)
	}
	if opts.LogitBias != nil {
		defs, bind, bufs = append(defs, "LOGIT_BIAS"), append(bind, ReadOnly), append(bufs, opts.LogitBias)
	}
	p := r.kernel("moe_route", bind, 64, defs...)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(nTokens, nExperts, k, int(gating), norm, scale, float32(MoEWeightSumMin)), r.elementwise(nTokens), bufs...)
}

// MoEBatch is a batch's routing as MatMulID reads it: Tokens tokens, each sent to K of
// Experts experts. IDs holds the chosen experts (u32, Tokens·K, MoERoute's ids); Plan, for
// batches the grouped kernels take (Device.MoEGrouped), MoEGroup's grouping of the
// assignments by expert (MoEPlanSize(Tokens·K, Experts) u32 words), else it may be nil.
type MoEBatch struct {
	IDs, Plan          *Buffer
	Tokens, K, Experts int
}

// assignments is the batch's token slots.
func (b MoEBatch) assignments() int { return b.Tokens * b.K }

// MoEGrouped reports whether MatMulID takes the grouped (tiled) kernels, which read
// MoEGroup's plan, for nTokens tokens each sent to k of experts experts: above 4 tokens on
// CPU adapters, above MatVecMaxTokens on GPUs (as MatMulAt leaves its matrix-vector kernels),
// and only where the experts average at least 1.5 assignments, so that tiles hold more than
// one. Otherwise a matrix-vector kernel per assignment reads only the chosen experts' rows:
// on lavapipe, 128 experts of 768 x 2048 Q4_K rows, k 8, it takes 16 tokens (an assignment an
// expert) in 74 ms against the grouped kernel's 133, where 32 tokens take 140 against 84.
func (d *Device) MoEGrouped(nTokens, k, experts int) bool {
	if 2*nTokens*k < 3*experts {
		return false
	}
	if d.BarrierFree {
		return nTokens > 4
	}
	return nTokens > matvecMaxTokens
}

// grouped is MoEGrouped for the batch.
func (b MoEBatch) grouped(d *Device) bool { return d.MoEGrouped(b.Tokens, b.K, b.Experts) }

// moeTile is the plan's tile width on this device: the token width of the grouped kernel
// (matmul_rows' 8 tokens a grid slice on CPU adapters, matmul's 64-token tiles on GPUs).
func (d *Device) moeTile() int {
	if d.BarrierFree {
		return 8
	}
	return matmulTile
}

// moeMaxTiles bounds a plan's tiles of width tile: every expert's count rounded up.
func moeMaxTiles(nAssign, experts, tile int) int {
	return (nAssign+tile-1)/tile + min(experts, nAssign)
}

// moePlanLayout is the plan's word offsets: the tile table (after a 4-word header and the
// experts' counts), the slot table and the assignment list, sized for the narrowest tile (8)
// so they do not depend on the device.
func moePlanLayout(nAssign, experts int) (tiles, slots, list int) {
	maxTiles := moeMaxTiles(nAssign, experts, 8)
	tiles = 4 + experts
	slots = tiles + 3*maxTiles
	return tiles, slots, slots + maxTiles
}

// MoEPlanSize is the size in u32 words of the plan MoEGroup writes for nAssign assignments
// (tokens·k) over experts experts: a header (the tile count, the tile width, nAssign,
// experts), each expert's count, a table of up to nAssign/8 + min(experts, nAssign) tiles
// (expert, first place in the list, count: 3 words each), a slot table as long (the tile
// each slice of the grouped kernels' grid takes, the tiles spread evenly over the grid, or
// 0xFFFFFFFF), and the nAssign assignments grouped by expert (ascending within an expert).
func MoEPlanSize(nAssign, experts int) int {
	_, _, list := moePlanLayout(nAssign, experts)
	return list + nAssign
}

// MoEGroup records, for a batch MatMulID takes the grouped kernels for (Device.MoEGrouped),
// the grouping of its assignments by expert into b.Plan: two passes of one invocation per
// expert (moe_plan.wgsl). For other batches it records nothing. The plan serves every
// MatMulID of the batch's routing (gate, up and down).
func (r *Recorder) MoEGroup(b MoEBatch) {
	if !b.grouped(r.d) {
		return
	}
	n := b.assignments()
	if b.K < 1 || b.Experts < 1 || n > MoEMaxAssignments {
		r.fail("gpu: moe group: %d tokens of %d slots over %d experts (at most %d assignments)", b.Tokens, b.K, b.Experts, MoEMaxAssignments)
		return
	}
	if b.Plan == nil || b.Plan.Size() < uint64(MoEPlanSize(n, b.Experts))*4 {
		r.fail("gpu: moe group: the plan needs %d words", MoEPlanSize(n, b.Experts))
		return
	}
	tiles, slots, list := moePlanLayout(n, b.Experts)
	params := Params(n, b.Experts, r.d.moeTile(), tiles, list, moeMaxTiles(n, b.Experts, r.d.moeTile()), slots)
	bind := []Access{ReadOnly, ReadWrite}
	count, place := r.kernel("moe_plan", bind, 64), r.kernel("moe_plan", bind, 64, "PLACE")
	if count == nil || place == nil {
		return
	}
	r.Dispatch(count, params, r.elementwise(b.Experts), b.IDs, b.Plan)
	r.Dispatch(place, params, r.elementwise(b.Experts), b.IDs, b.Plan)
}

// MatMulID is ggml's mul_mat_id: for each assignment a < b.Tokens·b.K, y[a, yCol ..] (+)=
// W_e · x[row], e = b.IDs[a] and W_e expert e's Rows/Experts rows of w (an UploadExperts
// weight); the input row is token a / K's (x.Row0 + a/K) when perAssign is false (the gate and
// up products: a token's row feeds its K experts), assignment a's own (x.Row0 + a) when true
// (the down product). y has rows of yStride floats, one per assignment; accumulate adds.
// Activations are rounded as for MatMulAt (QuantizeActivations, packed on CPU adapters; Q8_1
// block sums for Q4_1 and Q5_1), and every type MatMulAt takes works. On GPUs, rows packed by
// QuantizeForIntDot take integer dot products (grouped: with Device.IntDotTiles).
//
// Few tokens (Device.MoEGrouped false) take a matrix-vector kernel per assignment (grid z),
// reading only the chosen experts' rows: matvec's row-per-thread kernel on CPU adapters, its
// cooperative one on GPUs. Batches take the grouped kernels over MoEGroup's plan (which must
// have been recorded for b before): per tile of up to 8 (CPU adapters, matmul_rows) or 64
// (GPUs, the tiled matmul) assignments of one expert, whose rows are read once for the tile.
// Their grids cover the most tiles a batch can have, the plan's tiles spread over them and
// the empty slices returning at once, so nothing is read back.
func (r *Recorder) MatMulID(w Weight, x Acts, b MoEBatch, perAssign bool, y *Buffer, yStride, yCol int, accumulate bool) {
	r.matMulID(w, x, b, perAssign, y, yStride, yCol, accumulate, 1)
}

// MatMulIDScaledAdd is MatMulID adding scale times the products into y: an adapter's term on
// the experts, scale·B·(A·x) added as llama.cpp's build_lora_mm_id adds it.
func (r *Recorder) MatMulIDScaledAdd(w Weight, x Acts, b MoEBatch, perAssign bool, y *Buffer, yStride, yCol int, scale float32) {
	r.matMulID(w, x, b, perAssign, y, yStride, yCol, true, scale)
}

func (r *Recorder) matMulID(w Weight, x Acts, b MoEBatch, perAssign bool, y *Buffer, yStride, yCol int, accumulate bool, scale float32) {
	n := b.assignments()
	switch {
	case w.Experts < 1 || w.Rows%w.Experts != 0 || w.Experts != b.Experts:
		r.fail("gpu: mul_mat_id: a weight of %d experts (%d rows) for a batch routed over %d", w.Experts, w.Rows, b.Experts)
		return
	case w.Cols%4 != 0:
		r.fail("gpu: mul_mat_id needs a row length that is a multiple of 4, got %d", w.Cols)
		return
	case b.Tokens < 1 || b.K < 1 || b.IDs == nil:
		r.fail("gpu: mul_mat_id: %d tokens of %d slots", b.Tokens, b.K)
		return
	case yCol+w.Rows/w.Experts > yStride:
		r.fail("gpu: mul_mat_id: columns %d..%d of rows of %d", yCol, yCol+w.Rows/w.Experts, yStride)
		return
	}
	grouped := b.grouped(r.d)
	// GPUs' integer dot products take one assignment at a time (the matrix-vector kernel) or
	// the plan's tiles (matmul_q8, as for a prompt: GroupedIntDotRows).
	intDotRows := 1
	if grouped {
		intDotRows = GroupedIntDotRows
	}
	intDot, fits := r.packedFit(w.Type, x, intDotRows)
	if !fits {
		r.fail("gpu: activations packed as %d do not fit a %s weight on this adapter", x.Packed, w.Type)
		return
	}
	rowsPer := w.Rows / w.Experts
	xPer := b.K
	if perAssign {
		xPer = 1
	}
	if grouped && (n > MoEMaxAssignments || b.Plan == nil || b.Plan.Size() < uint64(MoEPlanSize(n, b.Experts))*4) {
		r.fail("gpu: mul_mat_id: %d assignments need MoEGroup's plan of %d words", n, MoEPlanSize(n, b.Experts))
		return
	}
	tiles, slots, list := moePlanLayout(n, b.Experts)
	// params is the kernels' parameters for a chunk of whole experts (matmul_io.inc's ID).
	params := func(c WeightChunk) []uint32 {
		return Params(w.Cols, rowsPer, 1, x.Row0, 0, yStride, yCol, scale, 0, 0, 0, float32(0),
			c.Row0/rowsPer, c.Rows/rowsPer, xPer, n, tiles, list, slots)
	}
	defs := []string{"ID"}
	if accumulate {
		defs = append(defs, "ADD")
	}
	if scale != 1 {
		defs = append(defs, "SCALED")
	}
	route := b.IDs
	if grouped {
		route = b.Plan
	}
	// bindings and buffers of the matrix-vector and matmul_rows kernels: weight, activations,
	// output, the block sums when given, then the routing.
	bind, defs := sumsVariant(w.Type, x.Sums != nil, defs)
	bind = append(slices.Clone(bind), ReadOnly)
	bufs := func(c WeightChunk) []*Buffer { return append(withSums(x.Sums, c.Buf, x.X, y), route) }
	switch {
	case r.inLaneOrder(w, x):
		zSlices := uint32(n)
		if grouped {
			zSlices = uint32(moeMaxTiles(n, b.Experts, r.d.moeTile()))
		}
		r.matMulIDLanes(w, x, grouped, zSlices, defs, bind, params, bufs)
	case r.d.BarrierFree && !grouped:
		defs = append(append(defs, "ROW_PER_THREAD"), x.Packed.packedDefines()...)
		if w.Type == Q4_K || w.Type == Q6_K {
			defs = append(defs, "BLOCK_DOT") // one token a lane: the hand-ordered block loops
		}
		for _, c := range w.Chunks {
			rows := r.d.RowsPerInvocation
			if rowsDefines[rows] == nil {
				rows = rowsPerInvocation(rowsPer, n)
			}
			p := r.kernel("matvec", bind, rowsWorkgroup, weightDefines(w.Type, append(slices.Clip(defs), rowsDefines[rows]...)...)...)
			if p == nil {
				return
			}
			groups := r.grid((rowsPer + rowsWorkgroup*rows - 1) / (rowsWorkgroup * rows))
			groups[2] = uint32(n)
			r.Dispatch(p, params(c), groups, bufs(c)...)
		}
	case !grouped:
		defs = append(defs, "ONE")
		if r.d.SubgroupMath {
			defs = append(defs, "SUBGROUPS")
		}
		defs = append(defs, cooperativeDefines(w.Type, x, intDot)...)
		p := r.kernel("matvec", bind, 64, weightDefines(w.Type, defs...)...)
		if p == nil {
			return
		}
		for _, c := range w.Chunks {
			groups := r.grid((rowsPer + matvecRows - 1) / matvecRows)
			groups[2] = uint32(n)
			r.Dispatch(p, params(c), groups, bufs(c)...)
		}
	case r.d.BarrierFree:
		p := r.kernel("matmul_rows", bind, rowsWorkgroup, weightDefines(w.Type, append(defs, x.Packed.packedDefines()...)...)...)
		if p == nil {
			return
		}
		for _, c := range w.Chunks {
			groups := r.grid((rowsPer + 4*rowsWorkgroup - 1) / (4 * rowsWorkgroup))
			groups[2] = uint32(moeMaxTiles(n, b.Experts, r.d.moeTile()))
			r.Dispatch(p, params(c), groups, bufs(c)...)
		}
	case intDot:
		defs = append(append(defs, "IDOT"), x.Packed.packedDefines()...)
		if sup := superLanes(w.Type); sup != nil {
			defs = append(append(defs, "SUPER_TYPE"), sup[1:]...)
		}
		p := r.kernel("matmul_q8", bind, 256, weightDefines(w.Type, defs...)...)
		if p == nil {
			return
		}
		for _, c := range w.Chunks {
			r.Dispatch(p, params(c), [3]uint32{uint32((rowsPer + matmulTile - 1) / matmulTile), uint32(moeMaxTiles(n, b.Experts, matmulTile)), 1}, bufs(c)...)
		}
	default:
		// The tiled kernel reads f32 activations and no block sums (as MatMulAt's).
		defs = slices.DeleteFunc(defs, func(s string) bool { return s == "XSUM" })
		if r.d.F16Math {
			defs = append(defs, "F16_MATH")
		}
		p := r.kernel("matmul", []Access{ReadOnly, ReadOnly, ReadWrite, ReadOnly}, 256, weightDefines(w.Type, defs...)...)
		if p == nil {
			return
		}
		for _, c := range w.Chunks {
			r.Dispatch(p, params(c), [3]uint32{uint32((rowsPer + matmulTile - 1) / matmulTile), uint32(moeMaxTiles(n, b.Experts, matmulTile)), 1},
				c.Buf, x.X, y, b.Plan)
		}
	}
}

// AddID is ggml's add_id: y[a, yCol + i] += bias[ids[a]·width + i] for nAssign rows of y
// (yStride floats each) and i < width: each assignment's expert's bias (gpt-oss's expert
// biases; bias holds experts rows of width f32, ids nAssign u32).
func (r *Recorder) AddID(y, bias, ids *Buffer, nAssign, width, yStride, yCol int) {
	if yCol+width > yStride || nAssign < 1 || width < 1 {
		r.fail("gpu: add_id: columns %d..%d of rows of %d", yCol, yCol+width, yStride)
		return
	}
	p := r.kernel("moe_combine", []Access{ReadWrite, ReadOnly, ReadOnly}, 64, "ADD_ID")
	if p == nil {
		return
	}
	r.Dispatch(p, Params(nAssign, 1, width, yStride, yCol), r.elementwise(nAssign*width), y, bias, ids)
}

// GLUOAI is GLU with ggml's swiglu_oai (gpt-oss's experts) as llama.cpp's CPU backend computes
// it: over rows fused gate|up rows of gu (2n wide), out[t, i] = g·sigmoid(alpha·g)·(u + 1)
// with g = min(gate, limit) and u = clamp(up, -limit, limit) (gpt-oss: alpha 1.702, limit 7).
func (r *Recorder) GLUOAI(gu, out *Buffer, n, rows int, alpha, limit float32) {
	p := r.kernel("glu", []Access{ReadOnly, ReadWrite}, 64, "OAI")
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n, rows, alpha, limit), r.elementwise(n*rows), gu, out)
}

// MoECombine sums each token's expert outputs weighted: out[t, i] = Σ_j weights[t·k + j] ·
// y[t·k + j, i] over its k slots in slot order, each product rounded before it is added
// (build_moe_ffn's ggml_mul, then its adds of the k views: (w0·y0 + w1·y1) + w2·y2 ...), or
// with accumulate out[t, i] + that sum (the residual add, which llama.cpp makes after the sum).
// y holds nTokens·k rows of width floats, weights nTokens·k f32 (MoERoute's), out nTokens rows
// of width.
func (r *Recorder) MoECombine(y, weights *Buffer, nTokens, k, width int, out *Buffer, accumulate bool) {
	if nTokens < 1 || k < 1 || width < 1 {
		r.fail("gpu: moe combine: %d tokens of %d slots of %d", nTokens, k, width)
		return
	}
	var defs []string
	if accumulate {
		defs = append(defs, "ADD")
	}
	p := r.kernel("moe_combine", []Access{ReadOnly, ReadOnly, ReadWrite}, 64, defs...)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(nTokens, k, width, width, 0), r.elementwise(nTokens*width), y, weights, out)
}

// UploadExperts uploads a 3-D GGUF tensor of experts matrices of rows x cols (ggml's [cols,
// rows, experts], data its blocks of type t) as one Weight of experts·rows rows, expert e's
// rows e·rows onward, with Experts set: MatMulID's weight. Chunks (at the binding limit) hold
// whole experts; an expert larger than a binding is an error.
func (d *Device) UploadExperts(label string, t WeightType, experts, rows, cols int, data []byte) (Weight, error) {
	return d.UploadExpertsFused(label, t, experts, []int{rows}, cols, [][]byte{data})
}

// UploadExpertsFused uploads several expert tensors of type t and row length cols (datas[i]
// holding experts matrices of rowsEach[i] rows) as one Weight whose expert e is their expert
// e's rows one after the other: for gate and up, expert e's rows are [gate_e; up_e], so one
// MatMulID writes each assignment's fused gate|up row (GLU's input). Chunks hold whole experts.
func (d *Device) UploadExpertsFused(label string, t WeightType, experts int, rowsEach []int, cols int, datas [][]byte) (Weight, error) {
	if t >= numWeightTypes {
		return Weight{}, fmt.Errorf("gpu: weight %q: unknown type %d", label, t)
	}
	info := weightTypes[t]
	if experts < 1 || len(rowsEach) == 0 || len(rowsEach) != len(datas) || cols <= 0 || cols%info.blockSize != 0 {
		return Weight{}, fmt.Errorf("gpu: weight %q: %d experts of %v rows of %d %s: want experts, one row count per tensor, a row length a multiple of %d",
			label, experts, rowsEach, cols, info.name, info.blockSize)
	}
	rawRow := cols / info.blockSize * info.blockBytes // a row's bytes in GGUF
	rowsPer := 0
	for i, rows := range rowsEach {
		if rows <= 0 || len(datas[i]) != experts*rows*rawRow {
			return Weight{}, fmt.Errorf("gpu: weight %q: tensor %d: %d bytes for %d experts of %d x %d %s, want %d",
				label, i, len(datas[i]), experts, rows, cols, info.name, experts*rows*rawRow)
		}
		rowsPer += rows
	}
	expertBytes := uint64(rowsPer * cols / info.blockSize * info.words * 4)
	// Every chunk's buffer ends with what Pack adds after the blocks (the IQ types' grid).
	extra, err := Pack(t, nil)
	if err != nil {
		return Weight{}, fmt.Errorf("gpu: weight %q: %w", label, err)
	}
	perChunk := 0
	if room := d.MaxBinding; room > uint64(len(extra)) {
		perChunk = int((room - uint64(len(extra))) / expertBytes)
	}
	if perChunk == 0 {
		return Weight{}, fmt.Errorf("gpu: weight %q: one expert of %d bytes exceeds the binding limit %d", label, expertBytes, d.MaxBinding)
	}
	w := Weight{Type: t, Rows: experts * rowsPer, Cols: cols, Experts: experts}
	for e0 := 0; e0 < experts; e0 += perChunk {
		n := min(perChunk, experts-e0)
		var raw []byte
		if len(datas) == 1 {
			raw = datas[0][e0*rowsPer*rawRow : (e0+n)*rowsPer*rawRow]
		} else {
			raw = make([]byte, 0, n*rowsPer*rawRow)
			for e := e0; e < e0+n; e++ {
				for i, rows := range rowsEach {
					raw = append(raw, datas[i][e*rows*rawRow:(e+1)*rows*rawRow]...)
				}
			}
		}
		packed, err := Pack(t, raw)
		if err != nil {
			w.Release()
			return Weight{}, fmt.Errorf("gpu: weight %q: %w", label, err)
		}
		name := label
		if n < experts {
			name = fmt.Sprintf("%s[experts %d:%d]", label, e0, e0+n)
		}
		buf, err := d.Upload(name, packed)
		if err != nil {
			w.Release()
			return Weight{}, err
		}
		w.Chunks = append(w.Chunks, WeightChunk{Buf: buf, Row0: e0 * rowsPer, Rows: n * rowsPer})
	}
	return w, nil
}
