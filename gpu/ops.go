package gpu

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/shaders"
)

// WeightType is the storage format of a weight matrix on the device.
type WeightType uint8

// Weight formats the kernels read directly.
const (
	F32 WeightType = iota
	F16            // IEEE half, two per u32 word; row length must be even
)

func (t WeightType) String() string {
	if t == F16 {
		return "f16"
	}
	return "f32"
}

// Weight is a row-major matrix (ggml layout: Rows rows of Cols contiguous elements) on the device.
type Weight struct {
	Buf  *Buffer
	Type WeightType
	Rows int
	Cols int
}

// matvecMaxTokens is the largest batch the matrix-vector kernel handles (its MAXT); larger
// batches use the tiled matrix-matrix kernel.
const matvecMaxTokens = 8

// kernel returns the cached pipeline for a family and its defines, recording any error.
func (r *Recorder) kernel(family string, bindings []Access, wgSize uint32, defines ...string) *Pipeline {
	if r.err != nil {
		return nil
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

func weightDefines(t WeightType, extra ...string) []string {
	if t == F16 {
		return append([]string{"W_F16"}, extra...)
	}
	return extra
}

// Binding signatures shared by the kernels (after the parameter block).
var (
	bindRRRW = []Access{ReadOnly, ReadOnly, ReadWrite}
	bindRWR  = []Access{ReadWrite, ReadOnly}
	bindAttn = []Access{ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadWrite}
)

// GetRows writes the embedding rows of the token ids (u32) into out (nTokens x w.Cols f32).
func (r *Recorder) GetRows(w Weight, ids, out *Buffer, nTokens int) {
	p := r.kernel("get_rows", bindRRRW, 64, weightDefines(w.Type)...)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(w.Cols, nTokens), r.elementwise(w.Cols*nTokens), w.Buf, ids, out)
}

// RMSNorm normalises each of rows rows of n values of x and multiplies by w, into out.
func (r *Recorder) RMSNorm(x, w, out *Buffer, n, rows int, eps float32) {
	p := r.kernel("rms_norm", bindRRRW, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n, rows, eps), r.grid(rows), x, w, out)
}

// MatMul computes y[t, :] = W x[xRow0+t, :] for nTokens rows of x, or adds it to y when
// accumulate is set (the residual add fused into the projection). Few tokens take the
// matrix-vector kernel, which reads each weight once; more take the tiled kernel.
func (r *Recorder) MatMul(w Weight, x *Buffer, xRow0, nTokens int, y *Buffer, accumulate bool) {
	var extra []string
	if accumulate {
		extra = append(extra, "ADD")
	}
	if w.Cols%2 != 0 {
		r.fail("gpu: matmul needs an even row length, got %d", w.Cols)
		return
	}
	if r.d.BarrierFree {
		// CPU adapters run barrier-free code fastest: whole rows per invocation, the weights
		// read once per group of up to matvecMaxTokens tokens.
		p := r.kernel("matvec", bindRRRW, 64, weightDefines(w.Type, append(extra, "ROW_PER_THREAD")...)...)
		if p == nil {
			return
		}
		for t0 := 0; t0 < nTokens; t0 += matvecMaxTokens {
			nt := min(matvecMaxTokens, nTokens-t0)
			r.Dispatch(p, Params(w.Cols, w.Rows, nt, xRow0+t0, t0), r.elementwise(w.Rows), w.Buf, x, y)
		}
		return
	}
	params := Params(w.Cols, w.Rows, nTokens, xRow0, 0)
	if nTokens <= matvecMaxTokens {
		p := r.kernel("matvec", bindRRRW, 64, weightDefines(w.Type, extra...)...)
		if p == nil {
			return
		}
		r.Dispatch(p, params, r.grid(w.Rows), w.Buf, x, y)
		return
	}
	p := r.kernel("matmul", bindRRRW, 256, weightDefines(w.Type, extra...)...)
	if p == nil {
		return
	}
	r.Dispatch(p, params, [3]uint32{uint32((w.Rows + 15) / 16), uint32((nTokens + 15) / 16), 1}, w.Buf, x, y)
}

// RoPE rotates x (nTokens x nHeads x headDim) in place by the positions in pos (u32).
func (r *Recorder) RoPE(x, pos *Buffer, nTokens, nHeads, headDim, nRot int, freqBase float32) {
	p := r.kernel("rope", bindRWR, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(nTokens, nHeads, headDim, nRot, freqBase), r.elementwise(nTokens*nHeads*headDim/2), x, pos)
}

// RoPEToCache rotates src and writes the rows into cache at row pos[t] (keys into the KV cache).
func (r *Recorder) RoPEToCache(src, pos, cache *Buffer, nTokens, nHeads, headDim, nRot int, freqBase float32) {
	p := r.kernel("rope", bindRRRW, 64, "TO_CACHE")
	if p == nil {
		return
	}
	r.Dispatch(p, Params(nTokens, nHeads, headDim, nRot, freqBase), r.elementwise(nTokens*nHeads*headDim/2), src, pos, cache)
}

// SetRows copies row t of src (width f32) to row pos[t] of dst (values into the KV cache).
func (r *Recorder) SetRows(src, pos, dst *Buffer, width, nTokens int) {
	p := r.kernel("set_rows", bindRRRW, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(width, nTokens), r.elementwise(width*nTokens), src, pos, dst)
}

// Attention computes causal grouped-query attention of q against the cache rows 0..pos[t].
func (r *Recorder) Attention(q, kCache, vCache, pos, out *Buffer, nTokens, nHead, nKVHead, headDim int, scale float32) {
	if headDim > 256 || nKVHead == 0 || nHead%nKVHead != 0 {
		r.fail("gpu: attention: head_dim %d (max 256), %d heads over %d kv heads unsupported", headDim, nHead, nKVHead)
		return
	}
	p := r.kernel("attention", bindAttn, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(nTokens, nHead, nKVHead, headDim, scale), [3]uint32{uint32(nHead), uint32(nTokens), 1}, q, kCache, vCache, pos, out)
}

// SiLUMul computes gate = silu(gate) * up over n elements.
func (r *Recorder) SiLUMul(gate, up *Buffer, n int) {
	p := r.kernel("glu", bindRWR, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n), r.elementwise(n), gate, up)
}

// Add computes a += b over n elements.
func (r *Recorder) Add(a, b *Buffer, n int) {
	p := r.kernel("add", bindRWR, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n), r.elementwise(n), a, b)
}
