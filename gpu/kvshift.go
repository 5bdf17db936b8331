package gpu

import "math"

// ShiftKV moves n cached positions of one sequence from src0.. to dst0.. (dst0 < src0) in one
// layer's caches, turning the keys by the RoPE angle of the distance so that they read as if
// computed at their new positions; values are copied. pos addresses the sequence as for
// RoPEKV with a single token: pos[0] is unused and pos[1] is the sequence's first cache row
// (rope.PageBits 0) or the index in pos of its page table. Moves longer than the distance run
// as several dispatches of at most src0-dst0 rows, in order, so no dispatch reads a row that
// it overwrites.
func (r *Recorder) ShiftKV(pos, kCache, vCache *Buffer, kvF16 bool, nKVHead, headDim int, rope Rope, src0, dst0, n int) {
	if dst0 >= src0 || dst0 < 0 || n <= 0 {
		r.fail("gpu: kv shift of %d rows from %d to %d: only moves to earlier positions are supported", n, src0, dst0)
		return
	}
	if headDim%2 != 0 || rope.NRot > headDim || rope.NRot%2 != 0 || (rope.NeoX && rope.NRot%4 != 0) {
		r.fail("gpu: kv shift: head_dim %d, n_rot %d (neox %v) unsupported", headDim, rope.NRot, rope.NeoX)
		return
	}
	defs := kvDefines(kvF16)
	bind := []Access{ReadOnly, ReadWrite, ReadWrite}
	bufs := []*Buffer{pos, kCache, vCache}
	if rope.NeoX {
		defs = append(defs, "NEOX")
	}
	if rope.Factors != nil {
		defs, bind, bufs = append(defs, "FACTORS"), append(bind, ReadOnly), append(bufs, rope.Factors)
	}
	p := r.kernel("kv_shift", bind, 64, defs...)
	if p == nil {
		return
	}
	scale, y := rope.FreqScale, rope.YaRN
	if scale == 0 {
		scale = 1
	}
	// A pure turn: cancel the magnitude scale YaRN applies (it was applied once already).
	attn := float32(1)
	if y.ExtFactor != 0 {
		attn = float32(1 / (1 + 0.1*math.Log(1/float64(scale))))
	}
	delta := dst0 - src0
	for off := 0; off < n; off += -delta {
		rows := min(-delta, n-off)
		r.Dispatch(p, Params(1, nKVHead, headDim, rope.NRot, rope.FreqBase, scale, y.ExtFactor, attn, y.CorrLo, y.CorrHi,
			rope.PageBits, rows, src0+off, dst0+off, delta, rope.thetaScale()), r.elementwise(rows*nKVHead*headDim/2), bufs...)
	}
}

// CopyWithin copies n 4-byte words of b from word src to word dst; the ranges must not
// overlap. It runs as a dispatch, ordered with the others of the pass.
func (r *Recorder) CopyWithin(b *Buffer, src, dst, n int) {
	if n <= 0 || src < 0 || dst < 0 || uint64(max(src, dst)+n)*4 > b.Size() || (src < dst+n && dst < src+n) {
		r.fail("gpu: copy of %d words from %d to %d within a buffer of %d bytes: out of range or overlapping", n, src, dst, b.Size())
		return
	}
	p := r.kernel("copy_within", []Access{ReadWrite}, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(src, dst, n), r.elementwise(n), b)
}
