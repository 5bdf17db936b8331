package gpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/wgpu-llama/wgpu-llama/shaders"
)

// matvecRows is how many rows one workgroup of the cooperative matrix-vector kernel computes.
const matvecRows = 4

// matvecMaxTokens is the largest batch the matrix-vector kernel handles (its MAXT); larger
// batches use the tiled matrix-matrix kernel.
const matvecMaxTokens = 8

// boundLoops are the kernel families compiled with wgpu's loop bounding even in unchecked
// modules: llvmpipe runs attention_lanes' nested loops over small heads a third slower
// without it (stories260K pp128: 9.9 ms against 6.4 ms a pass), while larger models' kernels
// gain from dropping it.
var boundLoops = map[string]bool{"attention_lanes": true}

// kernel returns the cached pipeline for a family and its defines, recording any error.
func (r *Recorder) kernel(family string, bindings []Access, wgSize uint32, defines ...string) *Pipeline {
	if r.err != nil {
		return nil
	}
	if r.d.CPUMath {
		defines = append(slices.Clip(defines), "CPU_MATH")
	}
	variant := ""
	for i, d := range defines {
		if i > 0 {
			variant += ","
		}
		variant += d
	}
	p, err := r.d.Pipeline(PipelineKey{Kernel: family, Variant: variant}, PipelineSpec{
		Source:        func() (string, error) { return shaders.Source(family, defines...) },
		Entry:         "main",
		Bindings:      bindings,
		WorkgroupSize: wgSize,
		BoundLoops:    boundLoops[family],
	})
	if err != nil {
		r.err = err
	}
	return p
}

// grid spreads n workgroups over x and y so no dimension exceeds the adapter's limit; kernels
// recover the linear index as x + y * num_workgroups.x.
func (r *Recorder) grid(n int) [3]uint32 {
	maxX := int(r.d.Limits.MaxComputeWorkgroupsPerDimension)
	if n <= maxX {
		return [3]uint32{uint32(max(n, 1)), 1, 1}
	}
	return [3]uint32{uint32(maxX), uint32((n + maxX - 1) / maxX), 1}
}

// elementwise sizes a 64-wide kernel with one invocation per element.
func (r *Recorder) elementwise(n int) [3]uint32 { return r.grid((n + 63) / 64) }

func (r *Recorder) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

// weightDefines selects a weight type's block decoder (and the K-quant scale unpacker, and
// for the IQ types with a lookup grid the size of the grid at the end of the weight buffer).
func weightDefines(t WeightType, extra ...string) []string {
	defs := []string{t.define()}
	if t == Q4_K || t == Q5_K {
		defs = append(defs, "K_SCALES")
	}
	if t == Q4_K || t == Q5_K || t == Q6_K {
		defs = append(defs, "HDR") // dequant.inc's block header: Hdr, hdr, sb_params_of
	}
	if g := len(gridWords(t)); g > 0 {
		defs = append(defs, "GRID", fmt.Sprintf("GRID_WORDS=%d", g)) // dequant.inc's grid_at
	}
	return append(defs, extra...)
}

// Binding signatures shared by the kernels (after the parameter block).
var (
	bindRRRW = []Access{ReadOnly, ReadOnly, ReadWrite}
	bindRWR  = []Access{ReadWrite, ReadOnly}
	bindAttn = []Access{ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadWrite}
)

// GetRows writes the embedding rows of the token ids (u32) into out (nTokens x w.Cols f32).
func (r *Recorder) GetRows(w Weight, ids, out *Buffer, nTokens int) {
	r.GetRowsScaled(w, ids, out, nTokens, 1)
}

// GetRowsScaled is GetRows with the rows multiplied by scale (Gemma's embedding scale).
func (r *Recorder) GetRowsScaled(w Weight, ids, out *Buffer, nTokens int, scale float32) {
	if w.Cols%4 != 0 {
		r.fail("gpu: get_rows needs a row length that is a multiple of 4, got %d", w.Cols)
		return
	}
	p := r.kernel("get_rows", bindRRRW, 64, weightDefines(w.Type)...)
	if p == nil {
		return
	}
	for _, c := range w.Chunks {
		r.Dispatch(p, Params(w.Cols, nTokens, c.Row0, c.Rows, scale), r.elementwise(w.Cols/4*nTokens), c.Buf, ids, out)
	}
}

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

// RMSNorm normalises each of rows rows of n values of x and multiplies by w, into out.
func (r *Recorder) RMSNorm(x, w, out *Buffer, n, rows int, eps float32) {
	r.rmsNorm(x, w, out, n, rows, eps, nil, nil)
}

// LoRAInput is a LoRA group's A (Rank rows, f32) and the buffer its products go to, for a
// kernel that computes them on its way (RMSNormLoRA).
type LoRAInput struct {
	A, T *Buffer
	Rank int
	Act  ActQuant // the adapter's type's activation rounding (ActNone, ActF16, ActBF16)
}

// LoRAResidual is a residual projection's adapter term left for the RMS norm that reads the
// residual stream next: Scale·B·(A·In) added into columns Col .. Col+Width-1 of its rows (A
// Rank rows of K, B Width rows of Rank, f32), In the projection's input (K wide).
type LoRAResidual struct {
	In, A, B            *Buffer
	K, Rank, Col, Width int
	Scale               float32
	Act                 ActQuant
}

// RMSNormLoRA is RMSNorm with LoRA work on its way: with res, first adding the previous
// projection's adapter term into x in place; with in, also writing each row's products for
// the projection that reads out, T[r, j] = A[j, :]·out[r, :] (MatMulLoRA's epilogue). Either
// saves the adapter a dispatch of its own.
func (r *Recorder) RMSNormLoRA(x, w, out *Buffer, n, rows int, eps float32, in *LoRAInput, res *LoRAResidual) {
	r.rmsNorm(x, w, out, n, rows, eps, in, res)
}

func (r *Recorder) rmsNorm(x, w, out *Buffer, n, rows int, eps float32, lora *LoRAInput, res *LoRAResidual) {
	wg := uint32(256) // GPUs: a row's loads in fewer rounds of memory latency
	if r.d.BarrierFree {
		wg = 64 // a barrier switches every invocation on CPU adapters
	}
	defs, bind, bufs := []string{fmt.Sprintf("WG=%d", wg)}, slices.Clone(bindRRRW), []*Buffer{x, w, out}
	rank := 0
	var rp LoRAResidual
	if lora != nil {
		defs = append(defs, append([]string{"LORA_A"}, actDefines(lora.Act)...)...)
		bind, bufs, rank = append(bind, ReadOnly, ReadWrite), append(bufs, lora.A, lora.T), lora.Rank
	}
	if res != nil {
		if res.Rank > LoRAMaxRank || res.Col+res.Width > n {
			r.fail("gpu: rms_norm: a residual LoRA of rank %d over columns %d..%d of %d", res.Rank, res.Col, res.Col+res.Width, n)
			return
		}
		defs = append(defs, "LORA_RES")
		switch res.Act {
		case ActF16:
			defs = append(defs, "RES_F16")
		case ActBF16:
			defs = append(defs, "RES_BF16")
		}
		bind[0] = ReadWrite
		bind, bufs, rp = append(bind, ReadOnly, ReadOnly, ReadOnly), append(bufs, res.In, res.A, res.B), *res
	}
	p := r.kernel("rms_norm", bind, wg, defs...)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n, rows, eps, rank, rp.K, rp.Rank, rp.Col, rp.Width, rp.Scale, 0), r.grid(rows), bufs...)
}

// actDefines are a LoRA kernel's defines for an adapter type's activation rounding.
func actDefines(a ActQuant) []string {
	switch a {
	case ActF16:
		return []string{"ACT_F16"}
	case ActBF16:
		return []string{"ACT_BF16"}
	}
	return nil
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

// kvDefines selects the KV cache format.
func kvDefines(f16 bool) []string {
	if f16 {
		return []string{"KV_F16"}
	}
	return nil
}

// Rope describes rotary position embedding: nRot dimensions of each head rotate by
// pos * FreqBase^(-2i/nRot), pairing adjacent elements (llama) or, with NeoX, element i with
// i + nRot/2 (GPT-NeoX, Qwen, Phi-3).
type Rope struct {
	NRot      int     // rotated dimensions per head: even, at most head_dim (a multiple of 4 with NeoX)
	FreqBase  float32 // theta base, llama.cpp's rope.freq_base (e.g. 10000)
	FreqScale float32 // linear scaling: positions are multiplied by it (0 means 1)
	NeoX      bool    // pair i with i + NRot/2 instead of adjacent elements
	// Factors, when set, divides pair i's angle by Factors[i] (NRot/2 f32; Llama 3.1).
	Factors *Buffer
	// YaRN, when ExtFactor > 0, blends interpolated (FreqScale) and extrapolated angles over
	// the pair range CorrLo..CorrHi and scales by AttnFactor, as ggml's rope_yarn.
	YaRN YaRN
	// PageBits says how pos addresses the cache (see RoPEKV); it is the KV cache's, carried
	// here because RoPEKV writes the cache.
	PageBits int
	// MPos, when set, makes this ggml's multi-section RoPE (M-RoPE, Qwen2-VL; NeoX pairs):
	// it holds four position components per token (t, h, w, e), and pair i turns by the one
	// its section names: i modulo the Sections' total falls in section 0 (t), 1 (h), 2 (w)
	// or 3 (e). The token's position in pos still names its cache row.
	MPos     *Buffer
	Sections [4]int
	// Vision is ggml's vision mode of M-RoPE (a ViT's 2D RoPE): each section's frequencies
	// restart at its first pair and spread over NRot/2 dimensions.
	Vision bool
	// Interleaved is ggml's interleaved M-RoPE (GGML_ROPE_TYPE_IMROPE: Qwen3-VL, qwen35;
	// with MPos, not Vision): the components take turns instead of spans, pair i turning by
	// the component of its sector s = i modulo the Sections' total: h when s%3 == 1 and s <
	// 3·Sections[1], w when s%3 == 2 and s < 3·Sections[2], t when s%3 == 0 and s <
	// 3·Sections[0], e otherwise.
	Interleaved bool
	// Table, when set, holds the cos and sin of every pair at positions 0 .. TableRows-1 as
	// llama.cpp's CPU rope takes them (Device.RoPETable); a CPU adapter reproducing llama.cpp
	// (CPUMath) turns by it.
	Table     *Buffer
	TableRows int
}

// YaRN holds ggml's YaRN RoPE parameters; see YaRNCorrDims for the range.
type YaRN struct {
	// ExtFactor weighs extrapolation at the ramp's low end (0: plain RoPE, no YaRN);
	// AttnFactor scales the rotated values (0 means 1); CorrLo..CorrHi is the pair range
	// over which the blend ramps from extrapolated to interpolated angles.
	ExtFactor, AttnFactor, CorrLo, CorrHi float32
}

// YaRNCorrDims is ggml's ggml_rope_yarn_corr_dims: the rotated dimensions (of nRot) whose
// wavelengths fall between betaFast and betaSlow rotations over the original context.
func YaRNCorrDims(nRot, nCtxOrig int, freqBase, betaFast, betaSlow float64) (lo, hi float32) {
	dim := func(rot float64) float64 {
		return float64(nRot) * math.Log(float64(nCtxOrig)/(rot*2*math.Pi)) / (2 * math.Log(freqBase))
	}
	return float32(max(0, math.Floor(dim(betaFast)))), float32(min(float64(nRot-1), math.Ceil(dim(betaSlow))))
}

// RoPEKV takes the fused qkv rows of nTokens tokens (nHead query heads, then nKVHead key and
// value heads), adds the projection bias when bias is not nil, rotates q in place, and writes
// rotated k and plain v into the caches, in f16 when kvF16. pos holds each token's position,
// then one u32 per token saying where its sequence lives in the cache: with rope.PageBits 0,
// the sequence's first cache row (token t goes to row base[t] + pos[t]); otherwise the index in
// pos of the sequence's page table, which lists the cache pages (2^PageBits rows each) holding
// its positions in order. Either way sequences of one batch keep apart in one cache.
func (r *Recorder) RoPEKV(qkv, pos, kCache, vCache, bias *Buffer, kvF16 bool, nTokens, nHead, nKVHead, headDim int, rope Rope) {
	if headDim%2 != 0 || rope.NRot > headDim || rope.NRot%2 != 0 || (rope.NeoX && rope.NRot%4 != 0) {
		r.fail("gpu: rope: head_dim %d, n_rot %d (neox %v) unsupported", headDim, rope.NRot, rope.NeoX)
		return
	}
	defs := kvDefines(kvF16)
	bind := []Access{ReadWrite, ReadOnly, ReadWrite, ReadWrite}
	bufs := []*Buffer{qkv, pos, kCache, vCache}
	if rope.NeoX {
		defs = append(defs, "NEOX")
	}
	switch {
	case bias != nil && rope.Factors != nil, rope.MPos != nil && rope.Factors != nil:
		r.fail("gpu: rope: frequency factors with a projection bias or M-RoPE are not supported")
		return
	case bias != nil:
		defs, bind, bufs = append(defs, "BIAS"), append(bind, ReadOnly), append(bufs, bias)
	case rope.Factors != nil:
		defs, bind, bufs = append(defs, "FACTORS"), append(bind, ReadOnly), append(bufs, rope.Factors)
	}
	sect := rope.Sections
	if rope.MPos != nil {
		if !rope.NeoX || sect[0]+sect[1]+sect[2]+sect[3] == 0 {
			r.fail("gpu: rope: M-RoPE takes NeoX pairs and sections, not %v", sect)
			return
		}
		defs, bind, bufs = append(defs, "MROPE"), append(bind, ReadOnly), append(bufs, rope.MPos)
		if rope.Interleaved {
			defs = append(defs, "IMROPE")
		}
	}
	if rope.Interleaved && (rope.MPos == nil || rope.Vision) {
		r.fail("gpu: rope: interleaved M-RoPE takes MPos and not the vision mode")
		return
	}
	if rope.Table != nil && r.d.CPUMath {
		// The table has the frequency factors in it: it takes their binding's place.
		if i := slices.Index(defs, "FACTORS"); i >= 0 {
			defs, bind, bufs = slices.Delete(defs, i, i+1), slices.Delete(bind, 4, 5), slices.Delete(bufs, 4, 5)
		}
		defs, bind, bufs = append(defs, "ROPE_TABLE"), append(bind, ReadOnly), append(bufs, rope.Table)
	}
	p := r.kernel("rope_kv", bind, 64, defs...)
	if p == nil {
		return
	}
	pairs := nTokens * (nHead + 2*nKVHead) * headDim / 2
	scale, attn := rope.scales()
	y := rope.YaRN
	vision := 0
	if rope.Vision {
		vision = 1
	}
	r.Dispatch(p, Params(nTokens, nHead, nKVHead, headDim, rope.NRot, rope.FreqBase, scale, y.ExtFactor, attn, y.CorrLo, y.CorrHi, rope.PageBits,
		sect[0], sect[1], sect[2], sect[3], vision, rope.thetaScale(), rope.TableRows), r.elementwise(pairs), bufs...)
}

// scales is the RoPE's linear position scale and YaRN magnitude factor, 1 where unset.
func (rope Rope) scales() (freqScale, attnFactor float32) {
	freqScale, attnFactor = rope.FreqScale, rope.YaRN.AttnFactor
	if freqScale == 0 {
		freqScale = 1
	}
	if attnFactor == 0 {
		attnFactor = 1
	}
	return freqScale, attnFactor
}

// thetaScale is ggml's factor between neighbouring pairs' angles, powf(freq_base, -2.0f/n_rot)
// from the C library as ggml takes it (CPU_MATH's rope_turn, RoPETable).
func (rope Rope) thetaScale() float32 {
	return powf(rope.FreqBase, float32(-2)/float32(rope.NRot))
}

// HeadNorm RMS-normalises every query and key head vector of the fused qkv rows in place,
// multiplying by qNorm or kNorm (headDim values each): QK-norm. With vNorm the value heads are
// normalised too, with no weight (Gemma 4).
func (r *Recorder) HeadNorm(qkv, qNorm, kNorm *Buffer, nTokens, nHead, nKVHead, headDim int, eps float32, vNorm bool) {
	p := r.kernel("head_norm", []Access{ReadWrite, ReadOnly, ReadOnly}, 64)
	if p == nil {
		return
	}
	vHeads := 0
	if vNorm {
		vHeads = nKVHead
	}
	r.Dispatch(p, Params(nTokens, nHead, nKVHead, headDim, eps, 0, vHeads), r.elementwise(nTokens*(nHead+nKVHead+vHeads)), qkv, qNorm, kNorm)
}

// AttnParams are attention's options beyond its shapes.
type AttnParams struct {
	Scale   float32 // multiplies q.k, usually 1/sqrt(head_dim)
	SoftCap float32 // > 0: scores pass through SoftCap * tanh(score / SoftCap) (Gemma 2)
	Window  int     // > 0: each token sees only the last Window positions (sliding window)
	AllKeys int     // > 0: not causal, every token sees cache rows 0..AllKeys-1 (BERT)
	// PageBits says how pos addresses the cache, as Rope.PageBits does for RoPEKV.
	PageBits int
	// MaxKeys is the most keys any token of the batch attends to (0: not known, taken as
	// few). On CPU adapters a long range runs in chunks that carry their running softmax in
	// State (AttentionStateSize floats), which the caller must then provide.
	MaxKeys int
	// Sequences is how many sequences the batch's tokens belong to (0: not known, taken as
	// one per token). CPU adapters' token-lane kernel reads each sequence's keys in its own
	// pass, so this bounds its loops.
	Sequences int
	State     *Buffer // chunked attention's running softmax; nil unless AttentionChunked
	// Scores, on CPU adapters, is scratch for decoding at long contexts
	// (AttentionScoresSize floats): each key's score is computed once for all of a head's
	// invocations instead of once per four output dimensions. nil: they are recomputed.
	Scores *Buffer
	// Sinks holds one f32 per query head (n_head): attention sinks (gpt-oss), a virtual key
	// per head whose score is that value, counted in the softmax's sum but contributing no
	// value. nil: none (the kernels without them run, unchanged).
	Sinks *Buffer
}

// withSinks adds a.Sinks, when set, to a kernel's defines (SINKS), bindings (one more
// read-only binding after bind's) and buffers; without sinks all three are returned as given.
func (a AttnParams) withSinks(defs []string, bind []Access, bufs ...*Buffer) ([]string, []Access, []*Buffer) {
	if a.Sinks == nil {
		return defs, bind, bufs
	}
	return append(slices.Clip(defs), "SINKS"), append(slices.Clip(bind), ReadOnly), append(bufs, a.Sinks)
}

// sinksOK reports, recording the failure, whether a.Sinks (when set) holds nHead floats.
func (r *Recorder) sinksOK(a AttnParams, nHead int) bool {
	if a.Sinks != nil && a.Sinks.Size() < uint64(nHead)*4 {
		r.fail("gpu: attention sinks: %d bytes for %d heads", a.Sinks.Size(), nHead)
		return false
	}
	return true
}

func (a AttnParams) params(base ...any) []uint32 {
	return a.chunkParams(0, math.MaxUint32, 1, base...)
}

func (a AttnParams) chunkParams(lo, hi uint32, last int, base ...any) []uint32 {
	return Params(append(base, a.SoftCap, a.Window, a.AllKeys, a.PageBits, lo, hi, last, a.scoreStride(), 0)...)
}

// AttentionStateSize is the State (in floats) Attention needs for nTokens tokens.
func AttentionStateSize(nTokens, nHead, headDim int) int {
	return nTokens * nHead * attnGroups(headDim) * 6
}

// attnGroups is how many invocations the barrier-free kernel gives each head: one per 4
// dimensions, the last taking 2 when headDim is not a multiple of 4.
func attnGroups(headDim int) int { return (headDim + 3) / 4 }

// matmulTile is the rows and the tokens of the tiled kernel's output tile.
const matmulTile = 64

// attnLanesBlock is the token-lane attention kernel's workgroup: tokens of one head
// (attention_lanes.wgsl's RWG). Batches with fewer tokens per sequence take it only for heads
// of at least attnLanesHeadDim: on lavapipe, stories260K (head 8) decoding after 1000 tokens
// runs at 315 tokens/s head-major against 160 token-lane; the 134M model (head 64) after 512
// at 6.9 against 9.9.
const attnLanesBlock, attnLanesHeadDim = 8, 64

// attnLanes reports whether barrier-free attention takes the token-lane kernel: for a batch
// of whole blocks of tokens per sequence, or heads wide enough, and only where its loops stay
// within loopBudget (per sequence in a block a pass over its keys and over the block's
// tokens, and the scans that find each pass's sequence: at most a block's tokens per token).
func attnLanes(nTokens, headDim int, ap AttnParams) bool {
	seqs := ap.Sequences
	if seqs <= 0 {
		seqs = nTokens
	}
	if nTokens < attnLanesBlock*seqs && headDim < attnLanesHeadDim {
		return false
	}
	keys := max(ap.MaxKeys, ap.AllKeys, 1)
	return min(seqs, attnLanesBlock)*(keys+attnLanesBlock)+attnLanesBlock*attnLanesBlock <= loopBudget
}

// AttentionChunked reports whether Attention on this device needs AttnParams.State for
// maxKeys keys of headDim: the barrier-free kernel loops over the keys and, for each, over
// half the head, and llvmpipe allows an invocation loopBudget iterations.
func (d *Device) AttentionChunked(maxKeys, headDim int) bool {
	return d.BarrierFree && maxKeys > attnChunkKeys(headDim)
}

// attnChunkKeys is how many keys one chunk of the barrier-free kernel takes.
func attnChunkKeys(headDim int) int { return loopBudget / (headDim/2 + 1) }

// Attention computes causal grouped-query attention of q (rows of qStride floats, heads first)
// against its sequence's cache rows up to its position, writing nTokens x nHead x headDim to
// out; pos is laid out as for RoPEKV (positions, then where each sequence lives in the cache).
func (r *Recorder) Attention(q, kCache, vCache, pos, out *Buffer, kvF16 bool, qStride, nTokens, nHead, nKVHead, headDim int, ap AttnParams) {
	if headDim > 256 || headDim%2 != 0 || nKVHead == 0 || nHead%nKVHead != 0 {
		r.fail("gpu: attention: head_dim %d (max 256), %d heads over %d kv heads unsupported", headDim, nHead, nKVHead)
		return
	}
	if !r.sinksOK(ap, nHead) {
		return
	}
	// CPU adapters always take a barrier-free kernel, decode included (they round as
	// llama.cpp's CPU flash attention), whatever the head size: the cooperative kernel's
	// loops would run past llvmpipe's limit beyond about 16k keys (see loopBudget).
	if r.prescored(nTokens, nHead, ap) {
		r.attentionPrescored(q, kCache, vCache, pos, out, kvF16, qStride, nTokens, nHead, nKVHead, headDim, ap)
		return
	}
	if r.d.BarrierFree && r.d.TokenLanes && attnLanes(nTokens, headDim, ap) {
		// Invocations take neighbouring tokens of one head, so the keys and values a
		// workgroup reads have shared addresses (attention_lanes.wgsl).
		defs, bind, bufs := ap.withSinks(append(kvDefines(kvF16), fmt.Sprintf("HEAD_DIM=%d", headDim)), bindAttn, q, kCache, vCache, pos, out)
		p := r.kernel("attention_lanes", bind, attnLanesBlock, defs...)
		if p != nil {
			r.Dispatch(p, ap.params(nTokens, nHead, nKVHead, headDim, ap.Scale, qStride),
				[3]uint32{uint32((nTokens + attnLanesBlock - 1) / attnLanesBlock), uint32(nHead), 1}, bufs...)
		}
		return
	}
	if r.d.AttentionChunked(ap.MaxKeys, headDim) {
		r.attentionChunks(q, kCache, vCache, pos, out, kvF16, qStride, nTokens, nHead, nKVHead, headDim, ap)
		return
	}
	if r.d.BarrierFree {
		groups := attnGroups(headDim)
		defs, bind, bufs := ap.withSinks(append(kvDefines(kvF16), "ROW_PER_THREAD"), bindAttn, q, kCache, vCache, pos, out)
		p := r.kernel("attention", bind, 64, defs...)
		if p != nil {
			r.Dispatch(p, ap.params(nTokens, nHead, nKVHead, headDim, ap.Scale, qStride), r.elementwise(nTokens*nHead*groups), bufs...)
		}
		return
	}
	if nTokens >= flashMinTokens && headDim <= flashMaxHeadDim {
		// A prompt: flash attention reads each key and value tile once per block of queries.
		defs, bind, bufs := ap.withSinks(kvDefines(kvF16), bindAttn, q, kCache, vCache, pos, out)
		p := r.kernel("attention_flash", bind, 256, defs...)
		if p != nil {
			r.Dispatch(p, ap.params(nTokens, nHead, nKVHead, headDim, ap.Scale, qStride),
				[3]uint32{uint32(nHead), uint32((nTokens + flashBlock - 1) / flashBlock), 1}, bufs...)
		}
		return
	}
	defs, bind, bufs := ap.withSinks(kvDefines(kvF16), bindAttn, q, kCache, vCache, pos, out)
	p := r.kernel("attention", bind, 64, defs...)
	if p == nil {
		return
	}
	r.Dispatch(p, ap.params(nTokens, nHead, nKVHead, headDim, ap.Scale, qStride), [3]uint32{uint32(nHead), uint32(nTokens), 1}, bufs...)
}

// Flash attention (GPU prompts): queries per workgroup, the largest head it takes, and the
// batch from which it replaces the one-workgroup-per-token kernel.
const (
	flashBlock      = 16
	flashMaxHeadDim = 128
	flashMinTokens  = 8
)

// attentionChunks runs the barrier-free kernel over ap.MaxKeys keys in chunks small enough for
// llvmpipe's loop limit, one dispatch each, the running softmax kept in ap.State.
func (r *Recorder) attentionChunks(q, kCache, vCache, pos, out *Buffer, kvF16 bool, qStride, nTokens, nHead, nKVHead, headDim int, ap AttnParams) {
	if ap.State == nil || ap.State.Size() < uint64(AttentionStateSize(nTokens, nHead, headDim))*4 {
		r.fail("gpu: attention over %d keys on a CPU adapter needs a state buffer of %d floats", ap.MaxKeys, AttentionStateSize(nTokens, nHead, headDim))
		return
	}
	// The sink, when given, is the binding after the state; only the last chunk applies it.
	defs, bind, bufs := ap.withSinks(append(kvDefines(kvF16), "ROW_PER_THREAD", "CHUNKED", "SINKS7"), append(slices.Clip(bindAttn), ReadWrite),
		q, kCache, vCache, pos, out, ap.State)
	p := r.kernel("attention", bind, 64, defs...)
	if p == nil {
		return
	}
	chunk := attnChunkKeys(headDim)
	for lo := 0; lo < ap.MaxKeys; lo += chunk {
		hi, last := lo+chunk, 0
		if hi >= ap.MaxKeys {
			hi, last = math.MaxUint32, 1 // the last chunk takes whatever keys remain
		}
		params := ap.chunkParams(uint32(lo), uint32(hi), last, nTokens, nHead, nKVHead, headDim, ap.Scale, qStride)
		r.Dispatch(p, params, r.elementwise(nTokens*nHead*attnGroups(headDim)), bufs...)
	}
}

// splitChunk is the keys per workgroup of split-K decode attention.
const splitChunk = 256

// AttentionSplitSize is the scratch AttentionSplit needs, in floats, for nTokens tokens at up
// to nKeys keys.
func AttentionSplitSize(nTokens, nHead, headDim, nKeys int) int {
	return nTokens * nHead * ((nKeys + splitChunk - 1) / splitChunk) * (headDim + 2)
}

// AttentionSplit is Attention for decoding at long contexts: the nKeys keys (at most, over
// the tokens) are split in 256-key ranges handled by separate workgroups, whose partial
// softmax results land in part (AttentionSplitSize floats) and are merged by a second kernel,
// which also adds ap.Sinks when given.
func (r *Recorder) AttentionSplit(q, kCache, vCache, pos, part, out *Buffer, kvF16 bool, qStride, nTokens, nHead, nKVHead, headDim, nKeys int, ap AttnParams) {
	if headDim > 256 || headDim%2 != 0 || nKVHead == 0 || nHead%nKVHead != 0 {
		r.fail("gpu: attention: head_dim %d (max 256), %d heads over %d kv heads unsupported", headDim, nHead, nKVHead)
		return
	}
	if !r.sinksOK(ap, nHead) {
		return
	}
	nSplit := (nKeys + splitChunk - 1) / splitChunk
	params := ap.params(nTokens, nHead, nKVHead, headDim, ap.Scale, qStride, nSplit, splitChunk)
	p := r.kernel("attention_split", bindAttn, 64, kvDefines(kvF16)...)
	mdefs, mbind, mbufs := ap.withSinks([]string{"MERGE"}, []Access{ReadOnly, ReadWrite}, part, out)
	merge := r.kernel("attention_split", mbind, 64, mdefs...)
	if p == nil || merge == nil {
		return
	}
	r.Dispatch(p, params, [3]uint32{uint32(nHead), uint32(nSplit), uint32(nTokens)}, q, kCache, vCache, pos, part)
	r.Dispatch(merge, params, [3]uint32{uint32(nHead), uint32(nTokens), 1}, mbufs...)
}

// GLU computes out[t, i] = act(gu[t, i]) * gu[t, n+i] over the fused gate|up rows, act SiLU,
// or ggml's tanh-approximated GELU when gelu is set.
func (r *Recorder) GLU(gu, out *Buffer, n, nTokens int, gelu bool) {
	var defs []string
	bind, bufs := []Access{ReadOnly, ReadWrite}, []*Buffer{gu, out}
	if gelu {
		defs = append(defs, "GELU")
		if r.d.CPUMath { // llama.cpp's own table of GELU values (GELUTable)
			t, err := r.d.geluTableBuffer()
			if err != nil {
				r.fail("gpu: glu: %v", err)
				return
			}
			defs, bind, bufs = append(defs, "GELU_TABLE"), append(bind, ReadOnly), append(bufs, t)
		}
	}
	p := r.kernel("glu", bind, 64, defs...)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n, nTokens), r.elementwise(n*nTokens), bufs...)
}

// LayerNorm normalises each of rows rows of n values of x to zero mean and unit variance (plus
// eps), then multiplies by w and adds b, into out.
func (r *Recorder) LayerNorm(x, w, b, out *Buffer, n, rows int, eps float32) {
	p := r.kernel("layer_norm", []Access{ReadOnly, ReadOnly, ReadOnly, ReadWrite}, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n, rows, eps), r.grid(rows), x, w, b, out)
}

// BiasAct adds bias b (n values) to every row of y (nRows x n) in place, then GELU when gelu.
func (r *Recorder) BiasAct(y, b *Buffer, n, nRows int, gelu bool) {
	var defs []string
	if gelu {
		defs = append(defs, "GELU")
	}
	p := r.kernel("bias_act", bindRWR, 64, defs...)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n, nRows), r.elementwise(n*nRows), y, b)
}

// BiasGELUF16 is BiasAct with GELU as llama.cpp's CPU backend computes it: through a table of
// halves (input rounded to f16, output an f16 value), as a vision encoder's FFN runs there.
func (r *Recorder) BiasGELUF16(y, b *Buffer, n, nRows int) {
	p := r.kernel("bias_act", bindRWR, 64, "GELU_F16")
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n, nRows), r.elementwise(n*nRows), y, b)
}

// BiasGELUQuickF16 is BiasAct with CLIP's quick GELU (x * sigmoid(1.702 x)) as llama.cpp's
// CPU backend computes it: through a table of halves.
func (r *Recorder) BiasGELUQuickF16(y, b *Buffer, n, nRows int) {
	p := r.kernel("bias_act", bindRWR, 64, "GELU_QUICK_F16")
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n, nRows), r.elementwise(n*nRows), y, b)
}

// SoftCap computes x = limit * tanh(x / limit) over n elements in place.
func (r *Recorder) SoftCap(x *Buffer, n int, limit float32) {
	p := r.kernel("softcap", []Access{ReadWrite}, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n, limit, 1/limit), r.elementwise(n), x)
}

// AvgPool averages s x s blocks of a g x g grid of rows of n values (x, row by row) into the
// (g/s) x (g/s) rows of out, row by row; g must be a multiple of s.
func (r *Recorder) AvgPool(x, out *Buffer, n, g, s int) {
	if s < 1 || g%s != 0 {
		r.fail("gpu: avg_pool: a %dx%d grid does not pool by %d", g, g, s)
		return
	}
	p := r.kernel("avg_pool", []Access{ReadOnly, ReadWrite}, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n, g, s), r.elementwise((g/s)*(g/s)*n), x, out)
}

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

// Add computes a += b over n elements.
func (r *Recorder) Add(a, b *Buffer, n int) {
	p := r.kernel("add", bindRWR, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n), r.elementwise(n), a, b)
}
