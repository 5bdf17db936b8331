package gpu

import (
	"fmt"
	"slices"

	"github.com/wgpu-llama/wgpu-llama/shaders"
)

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

// RMSNorm normalises each of rows rows of n values of x and multiplies by w, into out.
func (r *Recorder) RMSNorm(x, w, out *Buffer, n, rows int, eps float32) {
	r.rmsNorm(x, w, out, n, rows, eps, nil, nil, false)
}

// RMSNormAdd is RMSNorm adding its result to out: a post-norm's output added to the residual
// stream in one dispatch, each normalised value rounded as RMSNorm rounds it, then added.
func (r *Recorder) RMSNormAdd(x, w, out *Buffer, n, rows int, eps float32) {
	r.rmsNorm(x, w, out, n, rows, eps, nil, nil, true)
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
	r.rmsNorm(x, w, out, n, rows, eps, in, res, false)
}

func (r *Recorder) rmsNorm(x, w, out *Buffer, n, rows int, eps float32, lora *LoRAInput, res *LoRAResidual, add bool) {
	wg := uint32(256) // GPUs: a row's loads in fewer rounds of memory latency
	if r.d.BarrierFree {
		wg = 64 // a barrier switches every invocation on CPU adapters
	}
	defs, bind, bufs := []string{fmt.Sprintf("WG=%d", wg)}, slices.Clone(bindRRRW), []*Buffer{x, w, out}
	if add {
		defs = append(defs, "ADD_OUT")
	}
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

// AddBiased computes a += b + bias over n elements, bias repeating every width: a
// projection's bias and the residual add in one dispatch, rounded as the two adds are.
func (r *Recorder) AddBiased(a, b, bias *Buffer, n, width int) {
	if width < 1 || n%width != 0 {
		r.fail("gpu: add: a bias of %d over %d elements", width, n)
		return
	}
	p := r.kernel("add", []Access{ReadWrite, ReadOnly, ReadOnly}, 64, "BIAS")
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n, width), r.elementwise(n), a, b, bias)
}

// Add computes a += b over n elements.
func (r *Recorder) Add(a, b *Buffer, n int) {
	p := r.kernel("add", bindRWR, 64)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(n), r.elementwise(n), a, b)
}
