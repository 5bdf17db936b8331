package model

import (
	"fmt"
	"math"
	"slices"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

// qwenVision is the Qwen2-VL and Qwen2.5-VL encoder (llama.cpp's models/qwen2vl.cpp): inputs
// of any size (whole merged patches), a patch embedding through the two frames' kernels of a
// 3D convolution (an image is both frames), no position embeddings but 2D rotary ones (each
// patch's row and column, ggml's vision M-RoPE), pre-norm blocks (LayerNorms and a GELU
// feed-forward; Qwen2.5-VL: RMS norms, a SiLU-gated one and windowed attention), a post-norm,
// and the merger: each 2 x 2 block of patches, end to end, through a two-layer GELU MLP.
// The patches are taken in window order (vision.WindowOrder), so a block's four rows and a
// window's rows lie end to end; the merged tokens are put back in row order on readback.
type qwenVision struct {
	h              vision.Hparams
	dev            *gpu.Device
	patch0, patch1 gpu.Weight
	layers         []qwenLayer
	postW, postB   *gpu.Buffer // postB nil with RMS norms
	mm0, mm2       gpu.Weight
	mm0B, mm2B     *gpu.Buffer
	s              qwenScratch
	capacity       int // patches the scratch holds
	headDim        int
}

type qwenLayer struct {
	ln1W, ln1B, ln2W, ln2B *gpu.Buffer // biases nil with RMS norms
	qkv                    []proj
	qkvB                   *gpu.Buffer
	out, down              gpu.Weight
	up                     []proj      // ffn_up, or ffn_gate and ffn_up side by side (SiLU)
	outB, upB, downB       *gpu.Buffer // upB: the gate's bias then the up's when gated
}

type qwenScratch struct {
	pix, x, xn, qkv, k, v, attn, gu, ffn, hidden, out, pos, winPos, mpos, state *gpu.Buffer
}

func (q *qwenVision) load(l *loader) error {
	h, d := q.h, q.h.NEmbd
	var err error
	if q.patch0, err = l.patchKernel("v.patch_embd.weight", h.PatchSize, d); err != nil {
		return err
	}
	if q.patch1, err = l.patchKernel("v.patch_embd.weight.1", h.PatchSize, d); err != nil {
		return err
	}
	norm := func(name string) (w, b *gpu.Buffer, err error) {
		if w, err = l.vector(name+".weight", d); err != nil || h.RMSNorm {
			return w, nil, err
		}
		b, err = l.vector(name+".bias", d)
		return w, b, err
	}
	q.layers = make([]qwenLayer, h.NLayer)
	for i := range q.layers {
		ly, p := &q.layers[i], fmt.Sprintf("v.blk.%d.", i)
		if ly.ln1W, ly.ln1B, err = norm(p + "ln1"); err != nil {
			return err
		}
		if ly.ln2W, ly.ln2B, err = norm(p + "ln2"); err != nil {
			return err
		}
		if ly.qkv, err = l.fused([]string{p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"}, []int{d, d, d}, d); err != nil {
			return err
		}
		if ly.qkvB, err = l.concatVectors([]string{p + "attn_q.bias", p + "attn_k.bias", p + "attn_v.bias"}, []int{d, d, d}); err != nil {
			return err
		}
		if ly.out, err = l.matrix(p+"attn_out.weight", d, d); err != nil {
			return err
		}
		if ly.outB, err = l.vector(p+"attn_out.bias", d); err != nil {
			return err
		}
		up, down := l.visionFFNNames(p, d, h.NFF)
		ups := []string{up}
		if h.Act == vision.ActSiLU {
			ups = []string{p + "ffn_gate", up}
		}
		names, rows, biases := make([]string, len(ups)), make([]int, len(ups)), make([]string, len(ups))
		for j, u := range ups {
			names[j], rows[j], biases[j] = u+".weight", h.NFF, u+".bias"
		}
		if ly.up, err = l.fused(names, rows, d); err != nil {
			return err
		}
		if ly.upB, err = l.concatVectors(biases, rows); err != nil {
			return err
		}
		if ly.down, err = l.matrix(down+".weight", d, h.NFF); err != nil {
			return err
		}
		if ly.downB, err = l.vector(down+".bias", d); err != nil {
			return err
		}
	}
	if q.postW, q.postB, err = norm("v.post_ln"); err != nil {
		return err
	}
	if q.mm0, err = l.matrix("mm.0.weight", 4*d, 4*d); err != nil {
		return err
	}
	if q.mm0B, err = l.vector("mm.0.bias", 4*d); err != nil {
		return err
	}
	if q.mm2, err = l.matrix("mm.2.weight", h.ProjDim, 4*d); err != nil {
		return err
	}
	q.mm2B, err = l.vector("mm.2.bias", h.ProjDim)
	return err
}

// patchKernel uploads a patch convolution's kernel (ggml ne [P, P, 3, d]) as a d x 3PP
// matrix over im2col rows, in f16 as ggml's im2col makes it whatever the file's type.
func (l *loader) patchKernel(name string, P, d int) (gpu.Weight, error) {
	t, kernel, err := l.floats(name, P, P, 3, d)
	if err != nil {
		return gpu.Weight{}, err
	}
	halves := make([]uint16, len(kernel))
	for i, v := range kernel {
		halves[i] = gguf.F32ToF16(v)
	}
	w, err := l.dev.UploadWeight(t.Name, gpu.F16, d, 3*P*P, gpu.Bytes(halves))
	if err != nil {
		return gpu.Weight{}, fmt.Errorf("model: %w", err)
	}
	l.weights = append(l.weights, w)
	l.progressed(t)
	return w, nil
}

// ensure grows the scratch to n patches.
func (q *qwenVision) ensure(n int) error {
	if n <= q.capacity {
		return nil
	}
	q.release()
	h, d, s := q.h, q.h.NEmbd, &q.s
	state := 1
	if q.dev.BarrierFree {
		state = gpu.AttentionStateSize(n, h.NHead, q.headDim)
	}
	ff := h.NFF
	if h.Act == vision.ActSiLU {
		ff *= 2
	}
	for _, b := range []struct {
		name string
		n    int
		dst  **gpu.Buffer
	}{
		{"pixels", n * 3 * h.PatchSize * h.PatchSize, &s.pix}, {"x", n * d, &s.x}, {"xn", n * d, &s.xn},
		{"qkv", n * 3 * d, &s.qkv}, {"k", n * d, &s.k}, {"v", n * d, &s.v}, {"attn", n * d, &s.attn},
		{"gate_up", n * ff, &s.gu}, {"ffn", n * h.NFF, &s.ffn}, {"hidden", n * d, &s.hidden},
		{"out", n / 4 * h.ProjDim, &s.out}, {"pos", 2 * n, &s.pos}, {"win_pos", 2 * n, &s.winPos}, {"mpos", 4 * n, &s.mpos},
		{"attn_state", state, &s.state},
	} {
		buf, err := q.dev.NewBuffer("vision_"+b.name, uint64(4*b.n))
		if err != nil {
			q.release()
			return fmt.Errorf("model: vision scratch %s: %w", b.name, err)
		}
		*b.dst = buf
	}
	q.capacity = n
	return nil
}

func (q *qwenVision) release() {
	s := &q.s
	for _, b := range []*gpu.Buffer{s.pix, s.x, s.xn, s.qkv, s.k, s.v, s.attn, s.gu, s.ffn, s.hidden, s.out, s.pos, s.winPos, s.mpos, s.state} {
		if b != nil {
			b.Release()
		}
	}
	q.s, q.capacity = qwenScratch{}, 0
}

// encode runs one input (whole merged patches on each side) and returns its merged tokens'
// embeddings in row order.
func (q *qwenVision) encode(in vision.Input) ([]float32, error) {
	h, d, s := q.h, q.h.NEmbd, &q.s
	r, x, tokens, err := q.trunk(in, len(q.layers))
	if err != nil {
		return nil, err
	}
	n := 4 * len(tokens)
	// each token's four patches are end to end: x is n/4 rows of 4d
	r.MatMul(q.mm0, x, 0, n/4, s.hidden, false)
	r.BiasGELUF16(s.hidden, q.mm0B, 4*d, n/4)
	r.MatMul(q.mm2, s.hidden, 0, n/4, s.out, false)
	r.BiasAct(s.out, q.mm2B, h.ProjDim, n/4, false)
	raw, err := r.SubmitAndRead(s.out, 0, uint64(4*n/4*h.ProjDim))
	if err != nil {
		return nil, err
	}
	seq := gpu.Float32s(raw)
	out := make([]float32, len(seq))
	for k, t := range tokens {
		copy(out[t*h.ProjDim:(t+1)*h.ProjDim], seq[k*h.ProjDim:(k+1)*h.ProjDim])
	}
	return out, nil
}

// trunk records the ViT on one input up to the output of layer layers-1 (and the post-norm
// after the last layer) and returns the recorder, the buffer of its rows in sequence order,
// and the raster index of the token at each sequence place (vision.WindowOrder).
func (q *qwenVision) trunk(in vision.Input, layers int) (*gpu.Recorder, *gpu.Buffer, []int, error) {
	h, d, P := q.h, q.h.NEmbd, q.h.PatchSize
	if in.W%(2*P) != 0 || in.H%(2*P) != 0 || len(in.Pix) != 3*in.W*in.H || in.W == 0 || in.H == 0 {
		return nil, nil, nil, fmt.Errorf("model: a %dx%d input of %d values: its sides must be whole merged patches of %d", in.W, in.H, len(in.Pix), 2*P)
	}
	gw, gh := in.W/P, in.H/P
	n := gw * gh
	if err := q.ensure(n); err != nil {
		return nil, nil, nil, err
	}
	win := 0
	if h.WindowPattern > 0 {
		win = h.WindowTokens()
	}
	order, tokens, windows := vision.WindowOrder(gw, gh, win)
	s := &q.s
	if err := q.writeInputs(in, order, windows, gw, gh); err != nil {
		return nil, nil, nil, err
	}
	r, err := q.dev.Begin()
	if err != nil {
		return nil, nil, nil, err
	}
	x, xn := s.x, s.xn
	r.MatMul(q.patch0, s.pix, 0, n, x, false)
	r.MatMul(q.patch1, s.pix, 0, n, x, true)
	hd := q.headDim
	rope := gpu.Rope{NRot: hd, FreqBase: 10000, NeoX: true, MPos: s.mpos, Sections: [4]int{hd / 4, hd / 4, hd / 4, hd / 4}, Vision: true}
	scale := float32(1 / math.Sqrt(float64(hd)))
	full := gpu.AttnParams{Scale: scale, AllKeys: n, MaxKeys: n, Sequences: 1, State: s.state}
	windowed := gpu.AttnParams{Scale: scale, MaxKeys: 4 * slices.Max(windows), Sequences: len(windows), State: s.state}
	norm := func(x, w, b, out *gpu.Buffer) {
		if h.RMSNorm {
			r.RMSNorm(x, w, out, d, n, h.Eps)
		} else {
			r.LayerNorm(x, w, b, out, d, n, h.Eps)
		}
	}
	for i := range layers {
		ly := &q.layers[i]
		norm(x, ly.ln1W, ly.ln1B, xn)
		for _, p := range ly.qkv {
			r.MatMulAt(p.w, gpu.Acts{X: xn}, n, s.qkv, 3*d, p.col, false)
		}
		r.RoPEKV(s.qkv, s.pos, s.k, s.v, ly.qkvB, false, n, h.NHead, h.NHead, hd, rope)
		if h.WindowPattern > 0 && (i+1)%h.WindowPattern != 0 {
			r.Attention(s.qkv, s.k, s.v, s.winPos, s.attn, false, 3*d, n, h.NHead, h.NHead, hd, windowed)
		} else {
			r.Attention(s.qkv, s.k, s.v, s.pos, s.attn, false, 3*d, n, h.NHead, h.NHead, hd, full)
		}
		r.MatMul(ly.out, s.attn, 0, n, x, true)
		r.BiasAct(x, ly.outB, d, n, false)
		norm(x, ly.ln2W, ly.ln2B, xn)
		switch h.Act {
		case vision.ActSiLU:
			for _, p := range ly.up {
				r.MatMulAt(p.w, gpu.Acts{X: xn}, n, s.gu, 2*h.NFF, p.col, false)
			}
			r.BiasAct(s.gu, ly.upB, 2*h.NFF, n, false)
			r.GLU(s.gu, s.ffn, h.NFF, n, false)
		case vision.ActGELU:
			r.MatMul(ly.up[0].w, xn, 0, n, s.ffn, false)
			r.BiasGELUF16(s.ffn, ly.upB, h.NFF, n)
		default:
			r.MatMul(ly.up[0].w, xn, 0, n, s.ffn, false)
			r.BiasGELUQuickF16(s.ffn, ly.upB, h.NFF, n)
		}
		r.MatMul(ly.down, s.ffn, 0, n, x, true)
		r.BiasAct(x, ly.downB, d, n, false)
	}
	if layers == len(q.layers) {
		norm(x, q.postW, q.postB, xn)
		x = xn
	}
	return r, x, tokens, nil
}

// writeInputs uploads an input's patches in sequence order, each patch's rotary position
// (row and column of the patch grid, as llama.cpp's [rows | cols | rows | cols]), the cache
// rows (0..n-1 from base 0) and the windows' attention limits: each patch sees its window's
// rows, its window a sequence of its own.
func (q *qwenVision) writeInputs(in vision.Input, order, windows []int, gw, gh int) error {
	s, n := &q.s, gw*gh
	patches := vision.Patches(in, q.h.PatchSize, order)
	for i, v := range patches {
		patches[i] = gguf.F16ToF32(gguf.F32ToF16(v)) // as ggml's im2col stores them
	}
	mpos := make([]int32, 4*n)
	for y := range gh {
		for x := range gw {
			i := order[y*gw+x]
			mpos[4*i], mpos[4*i+1], mpos[4*i+2], mpos[4*i+3] = int32(y), int32(x), int32(y), int32(x)
		}
	}
	pos, win := make([]int32, 2*n), make([]int32, 2*n)
	row := 0
	for _, w := range windows {
		start := row
		for range 4 * w {
			pos[row], win[row], win[n+row] = int32(row), int32(4*w-1), int32(start)
			row++
		}
	}
	for _, b := range []struct {
		buf  *gpu.Buffer
		data []byte
	}{{s.pix, gpu.Bytes(patches)}, {s.mpos, gpu.Bytes(mpos)}, {s.pos, gpu.Bytes(pos)}, {s.winPos, gpu.Bytes(win)}} {
		if err := q.dev.Write(b.buf, 0, b.data); err != nil {
			return err
		}
	}
	return nil
}
