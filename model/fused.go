package model

import "github.com/wgpu-llama/wgpu-llama/gpu"

// On GPUs whose integer dot products take a group's projections, the activations those
// projections read are rounded by the kernel that makes them: the RMS norm before the
// attention's and the feed-forward's projections, the gated unit before the down projection
// (gpu.Recorder.RMSNormForIntDot, GLUForIntDot). That is two dispatches fewer per layer of a
// decode step, with the same floats as the norm (or GLU) followed by its rounding. Only where
// no adapter term reads the f32 rows and the caller does not read them after.

// intDotRounding is the rounding that every projection of ps shares, when one does and the
// device multiplies them all with integer dot products over rows rows of k.
func (m *Model) intDotRounding(ps []proj, rows, k int) (gpu.ActQuant, bool) {
	if m.dev.BarrierFree || !m.actQuant || m.unfused || len(ps) == 0 {
		return gpu.ActNone, false
	}
	a := gpu.ActFor(ps[0].w.Type)
	if a != gpu.ActQ8_0 && a != gpu.ActQ8_1 && a != gpu.ActQ8_K || k%a.Block() != 0 {
		return gpu.ActNone, false
	}
	for _, p := range ps {
		if gpu.ActFor(p.w.Type) != a {
			return gpu.ActNone, false
		}
	}
	return a, m.allIntDot(ps, a, rows)
}

// anyActive reports whether an adapter term of the group runs in this pass.
func (m *Model) anyActive(terms []loraTerm) bool {
	for i := range terms {
		if m.loraScale(&terms[i]) != 0 {
			return true
		}
	}
	return false
}

// normProjectFused is normProject's case with no adapter terms (the group's, or the previous
// residual projection's left for the norm) on such a GPU: the norm rounded in one dispatch and
// the projections, s.xn not written. It reports whether it recorded them; if not, the caller
// records normProject.
func (m *Model) normProjectFused(r *gpu.Recorder, norm *gpu.Buffer, ps []proj, terms []loraTerm, n int, y *gpu.Buffer, yStride int) bool {
	c, s := m.Config, &m.scratch
	a, ok := m.intDotRounding(ps, n, c.NEmbd)
	if !ok || m.pending != nil || m.anyActive(terms) {
		return false
	}
	acts := r.RMSNormForIntDot(s.x, norm, c.NEmbd, n, c.RMSEps, a, s.xq, s.xsums)
	for _, p := range ps {
		r.MatMulAt(p.w, acts, n, y, yStride, p.col, false)
	}
	return true
}

// gluDownFused is the feed-forward's gated unit of s.gu and the down projection ps added to
// the residual stream, on such a GPU with no adapter terms on ps: the unit rounded in one
// dispatch (s.ffn not written). It reports whether it recorded them.
func (m *Model) gluDownFused(r *gpu.Recorder, ps []proj, terms []loraTerm, n int) bool {
	c, s := m.Config, &m.scratch
	a, ok := m.intDotRounding(ps, n, c.NFF)
	if !ok || m.anyActive(terms) {
		return false
	}
	acts := r.GLUForIntDot(s.gu, c.NFF, n, c.GELU, a, s.xq, s.xsums)
	for _, p := range ps {
		r.MatMulAt(p.w, acts, n, s.x, c.NEmbd, p.col, true)
	}
	return true
}
