package gpu

import (
	"fmt"
	"slices"
)

// inLaneOrder reports whether a product of w with x takes matvec_lanes.wgsl, llama.cpp's own
// CPU order (integer lane sums for Q8_0, Q5_0, Q4_1 and Q5_1 and the superblock types x86
// does not repack, ggml_vec_dot_f32's or tinyBLAS's lanes for F32, fused multiply-adds, their
// horizontal sums): on CPU adapters reproducing llama.cpp's arithmetic (CPUMath), those
// weights with packed Q8_0 (Q8_1 with its block sums, Q8_K) activations (QuantizeActivations
// packs them there for any token count), F32 with f32 ones.
func (r *Recorder) inLaneOrder(w Weight, x Acts) bool {
	if !r.d.BarrierFree || !r.d.CPUMath {
		return false
	}
	switch w.Type {
	case Q8_0, Q5_0:
		return x.Packed == ActQ8_0
	case Q4_1, Q5_1:
		return x.Packed == ActQ8_1 && x.Sums != nil
	case F32:
		return x.Packed == ActNone && x.Sums == nil
	}
	switch {
	case repacked8(w):
		return x.Packed == ActFor(w.Type) && x.Sums == nil
	case superLanes(w.Type) != nil:
		return x.Packed == ActQ8_K
	}
	return false
}

// repacked8 reports whether llama.cpp's x86 build repacks w eight rows to a block (Q4_0,
// IQ4_NL, MXFP4 and Q4_K weights whose row count, per expert, is a multiple of 8), so that
// its products take the repacked gemv and gemm (matvec_lanes.wgsl's REPACK8).
func repacked8(w Weight) bool {
	switch w.Type {
	case Q4_0, IQ4_NL, MXFP4, Q4_K:
		return (w.Rows/max(w.Experts, 1))%8 == 0
	}
	return false
}

// laneVariant is matvec_lanes.wgsl's defines for w's type: SUPER or REPACK8 (with the integer
// dot helpers, IDOT, and GEMV_ONLY where llama.cpp's gemv takes every token: mul_mat_id, and
// the last block's few output rows).
func laneVariant(w Weight, gemvOnly bool) []string {
	if !repacked8(w) {
		return superLanes(w.Type)
	}
	if gemvOnly {
		return []string{"REPACK8", "IDOT", "GEMV_ONLY"}
	}
	return []string{"REPACK8", "IDOT"}
}

// superLanes are matvec_lanes.wgsl's defines for the superblock types it sums as llama.cpp's
// x86 AVX2 vec_dots do (SUPER; SUP_COEF for those with terms on Q8_K's block sums: minimums,
// Q6_K's offset, IQ1_S's deltas; SUP_SCALE_MIN for Q4_K's and Q5_K's shared header); nil for
// other types. (x86 repacks Q4_K of a row count that is a multiple of 8: repacked8 comes
// first.)
func superLanes(t WeightType) []string {
	switch t {
	case Q4_K, Q5_K:
		return []string{"SUPER", "SUP_COEF", "SUP_SCALE_MIN"}
	case Q2_K, Q6_K, IQ1_S:
		return []string{"SUPER", "SUP_COEF"}
	case Q3_K, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_XS:
		return []string{"SUPER"}
	}
	return nil
}

// vecDotOrder is matvec_lanes.wgsl's VDOT define when an F32 product of nTokens tokens with
// w sums as ggml_vec_dot_f32: for one token, and for shapes llamafile's tinyBLAS refuses (rows
// of a length not a multiple of 8, or a weight of a row count not a multiple of 4); mul_mat_id
// always does (matMulIDLanes).
func vecDotOrder(w Weight, nTokens int) []string {
	if w.Type == F32 && (nTokens < 2 || w.Cols%8 != 0 || w.Rows%4 != 0) {
		return []string{"VDOT"}
	}
	return nil
}

// laneDefine is matvec_lanes.wgsl's define for the tokens an invocation takes (1, 2, 4 or 8).
func laneDefine(lanes int) string { return fmt.Sprintf("LANES=%d", lanes) }

// matMulLanes is MatMulAt in lane order (inLaneOrder): one row an invocation, tokens in groups
// of up to 4 in the grid's z.
func (r *Recorder) matMulLanes(w Weight, x Acts, nTokens int, extra []string, lora bool, params func(WeightChunk) []uint32, bufs func(WeightChunk) []*Buffer) {
	bind, extra := sumsVariant(w.Type, x.Sums != nil, extra)
	if lora {
		bind = append(slices.Clone(bind), ReadOnly, ReadOnly)
	}
	lanes := 4 // token lanes: as few as the batch needs, at most 4
	if nTokens < 3 {
		lanes = nTokens
	}
	orderTokens := nTokens
	if r.orderTokens > 0 {
		orderTokens = r.orderTokens
	}
	defs := append(append(append(slices.Clip(extra), laneDefine(lanes)), x.Packed.packedDefines()...), vecDotOrder(w, orderTokens)...)
	defs = append(defs, laneVariant(w, orderTokens < 4)...)
	p := r.kernel("matvec_lanes", bind, rowsWorkgroup, weightDefines(w.Type, defs...)...)
	if p == nil {
		return
	}
	for _, c := range w.Chunks {
		groups := r.grid((c.Rows + rowsWorkgroup - 1) / rowsWorkgroup)
		groups[2] = uint32((nTokens + lanes - 1) / lanes)
		r.Dispatch(p, params(c), groups, bufs(c)...)
	}
}

// matMulIDLanes is MatMulID in lane order: per assignment (grid z) for few tokens, per tile of
// the plan (up to 8 assignments of one expert) for batches.
func (r *Recorder) matMulIDLanes(w Weight, x Acts, grouped bool, zSlices uint32, defs []string, bind []Access, params func(WeightChunk) []uint32, bufs func(WeightChunk) []*Buffer) {
	lanes := 1
	if grouped {
		lanes, defs = 8, append(defs, "ID_TILE")
	}
	defs = append(append(append(defs, laneDefine(lanes)), x.Packed.packedDefines()...), laneVariant(w, true)...)
	if w.Type == F32 {
		defs = append(defs, "VDOT") // ggml's mul_mat_id takes vec_dot for every token
	}
	p := r.kernel("matvec_lanes", bind, rowsWorkgroup, weightDefines(w.Type, defs...)...)
	if p == nil {
		return
	}
	rowsPer := w.Rows / w.Experts
	for _, c := range w.Chunks {
		groups := r.grid((rowsPer + rowsWorkgroup - 1) / rowsWorkgroup)
		groups[2] = zSlices
		r.Dispatch(p, params(c), groups, bufs(c)...)
	}
}
