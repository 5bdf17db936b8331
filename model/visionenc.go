package model

import (
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

// VisionEncoder is a multimodal projector (an mmproj GGUF) on the GPU: the gemma3 projector's
// SigLIP-style ViT and its pooling, norm and projection, turning preprocessed pixels
// (vision.Preprocess) into the text model's input embeddings. model/reference.EncodeImage is
// its plain-Go specification.
type VisionEncoder struct {
	// H are the projector's hyperparameters.
	H vision.Hparams

	dev           *gpu.Device
	l             *loader // owns the weights
	patch         gpu.Weight
	patchB, pos   *gpu.Buffer
	layers        []visionLayer
	postW, postB  *gpu.Buffer
	softNorm      *gpu.Buffer
	proj          gpu.Weight // input_projection transposed: ProjDim rows of NEmbd
	s             visionScratch
	headDim, nTok int
}

// visionLayer is one pre-norm ViT block.
type visionLayer struct {
	ln1W, ln1B, ln2W, ln2B *gpu.Buffer
	qkv                    []proj      // q, k, v side by side
	qkvB                   *gpu.Buffer // their biases, end to end
	out, up, down          gpu.Weight
	outB, upB, downB       *gpu.Buffer
}

// visionScratch are one encoding's buffers.
type visionScratch struct {
	pix, x, xn, qkv, k, v, attn, ffn, pooled, normed, out, pos, state *gpu.Buffer
}

// LoadVisionEncoder uploads a projector file's encoder; f may be closed afterwards.
func LoadVisionEncoder(dev *gpu.Device, f *gguf.File) (*VisionEncoder, error) {
	h, err := vision.ReadHparams(f)
	if err != nil {
		return nil, err
	}
	e := &VisionEncoder{H: h, dev: dev, l: &loader{f: f, dev: dev}, headDim: h.NEmbd / h.NHead, nTok: h.Patches()}
	if err := e.load(); err != nil {
		e.l.release()
		return nil, err
	}
	if err := e.alloc(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *VisionEncoder) load() error {
	l, h := e.l, e.H
	d, P, n := h.NEmbd, h.PatchSize, h.Patches()
	var err error
	// The convolution's kernel (ggml ne [P, P, 3, d]) is a d x 3PP matrix over im2col rows,
	// in f16 as ggml's im2col makes it whatever the file's type.
	pt, kernel, err := l.floats("v.patch_embd.weight", P, P, 3, d)
	if err != nil {
		return err
	}
	halves := make([]uint16, len(kernel))
	for i, v := range kernel {
		halves[i] = gguf.F32ToF16(v)
	}
	if e.patch, err = e.dev.UploadWeight(pt.Name, gpu.F16, d, 3*P*P, gpu.Bytes(halves)); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	l.weights = append(l.weights, e.patch)
	l.progressed(pt)
	if e.patchB, err = l.vector("v.patch_embd.bias", d); err != nil {
		return err
	}
	pe, pos, err := l.floats("v.position_embd.weight", d, n)
	if err != nil {
		return err
	}
	if e.pos, err = l.upload(pe, gpu.Bytes(pos)); err != nil {
		return err
	}
	e.layers = make([]visionLayer, h.NLayer)
	for i := range e.layers {
		ly, p := &e.layers[i], fmt.Sprintf("v.blk.%d.", i)
		if ly.qkv, err = l.fused([]string{p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"}, []int{d, d, d}, d); err != nil {
			return err
		}
		if ly.qkvB, err = l.concatVectors([]string{p + "attn_q.bias", p + "attn_k.bias", p + "attn_v.bias"}, []int{d, d, d}); err != nil {
			return err
		}
		up, down := p+"ffn_up", p+"ffn_down"
		if t, ok := l.f.Tensor(down + ".weight"); ok && len(t.Shape) == 2 && t.Shape[0] == uint64(d) && d != h.NFF {
			up, down = down, up // as llama.cpp: a file with the two exchanged
		}
		for _, m := range []struct {
			name       string
			rows, cols int
			dst        *gpu.Weight
		}{{p + "attn_out.weight", d, d, &ly.out}, {up + ".weight", h.NFF, d, &ly.up}, {down + ".weight", d, h.NFF, &ly.down}} {
			if *m.dst, err = l.matrix(m.name, m.rows, m.cols); err != nil {
				return err
			}
		}
		for _, v := range []struct {
			name string
			n    int
			dst  **gpu.Buffer
		}{
			{p + "ln1.weight", d, &ly.ln1W}, {p + "ln1.bias", d, &ly.ln1B}, {p + "ln2.weight", d, &ly.ln2W}, {p + "ln2.bias", d, &ly.ln2B},
			{p + "attn_out.bias", d, &ly.outB}, {up + ".bias", h.NFF, &ly.upB}, {down + ".bias", d, &ly.downB},
		} {
			if *v.dst, err = l.vector(v.name, v.n); err != nil {
				return err
			}
		}
	}
	for _, v := range []struct {
		name string
		dst  **gpu.Buffer
	}{{"v.post_ln.weight", &e.postW}, {"v.post_ln.bias", &e.postB}, {"mm.soft_emb_norm.weight", &e.softNorm}} {
		if *v.dst, err = l.vector(v.name, d); err != nil {
			return err
		}
	}
	// input_projection is applied as x @ W (ggml ne [ProjDim, d]: d rows of ProjDim), the other
	// way round from every other matrix: transposed here into ProjDim rows of d.
	pj, vals, err := l.floats("mm.input_projection.weight", h.ProjDim, d)
	if err != nil {
		return err
	}
	tr := make([]float32, len(vals))
	for i := range d {
		for j := range h.ProjDim {
			tr[j*d+i] = vals[i*h.ProjDim+j]
		}
	}
	if e.proj, err = e.dev.UploadWeight(pj.Name, gpu.F32, h.ProjDim, d, gpu.Bytes(tr)); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	l.weights = append(l.weights, e.proj)
	l.progressed(pj)
	return nil
}

func (e *VisionEncoder) alloc() error {
	h, n := e.H, e.nTok
	d, s := h.NEmbd, &e.s
	state := 1
	if e.dev.BarrierFree {
		state = gpu.AttentionStateSize(n, h.NHead, e.headDim)
	}
	for _, b := range []struct {
		name string
		n    int
		dst  **gpu.Buffer
	}{
		{"pixels", n * 3 * h.PatchSize * h.PatchSize, &s.pix}, {"x", n * d, &s.x}, {"xn", n * d, &s.xn},
		{"qkv", n * 3 * d, &s.qkv}, {"k", n * d, &s.k}, {"v", n * d, &s.v}, {"attn", n * d, &s.attn},
		{"ffn", n * h.NFF, &s.ffn}, {"pooled", h.Tokens() * d, &s.pooled}, {"normed", h.Tokens() * d, &s.normed},
		{"out", h.Tokens() * h.ProjDim, &s.out}, {"pos", 2 * n, &s.pos}, {"attn_state", state, &s.state},
	} {
		buf, err := e.dev.NewBuffer("vision_"+b.name, uint64(4*b.n))
		if err != nil {
			return fmt.Errorf("model: vision scratch %s: %w", b.name, err)
		}
		*b.dst = buf
	}
	pos := make([]int32, 2*n) // positions 0..n-1, then each patch's cache base 0
	for i := range n {
		pos[i] = int32(i)
	}
	return e.dev.Write(s.pos, 0, gpu.Bytes(pos))
}

// Encode runs one preprocessed image ([3][S][S] floats) through the encoder in one pass and
// returns its Tokens() embeddings of ProjDim values, one after another.
func (e *VisionEncoder) Encode(pixels []float32) ([]float32, error) {
	h, n, s := e.H, e.nTok, &e.s
	S, d := h.ImageSize, h.NEmbd
	if len(pixels) != 3*S*S {
		return nil, fmt.Errorf("model: %d pixel values, want 3x%dx%d", len(pixels), S, S)
	}
	// Each value rounded to f16, as ggml's im2col stores it.
	patches := vision.Patches(pixels, h)
	for i, v := range patches {
		patches[i] = gguf.F16ToF32(gguf.F32ToF16(v))
	}
	if err := e.dev.Write(s.pix, 0, gpu.Bytes(patches)); err != nil {
		return nil, err
	}
	r, err := e.dev.Begin()
	if err != nil {
		return nil, err
	}
	r.MatMul(e.patch, s.pix, 0, n, s.x, false)
	r.BiasAct(s.x, e.patchB, d, n, false)
	r.Add(s.x, e.pos, n*d)
	// Every patch sees every patch: the cache holds the n rows at base 0 (AllKeys).
	ap := gpu.AttnParams{Scale: float32(1 / math.Sqrt(float64(e.headDim))), AllKeys: n, MaxKeys: n, Sequences: 1, State: s.state}
	for i := range e.layers {
		ly := &e.layers[i]
		r.LayerNorm(s.x, ly.ln1W, ly.ln1B, s.xn, d, n, h.Eps)
		for _, p := range ly.qkv {
			r.MatMulAt(p.w, gpu.Acts{X: s.xn}, n, s.qkv, 3*d, p.col, false)
		}
		r.RoPEKV(s.qkv, s.pos, s.k, s.v, ly.qkvB, false, n, h.NHead, h.NHead, e.headDim, gpu.Rope{FreqBase: 1})
		r.Attention(s.qkv, s.k, s.v, s.pos, s.attn, false, 3*d, n, h.NHead, h.NHead, e.headDim, ap)
		r.MatMul(ly.out, s.attn, 0, n, s.x, true)
		r.BiasAct(s.x, ly.outB, d, n, false)
		r.LayerNorm(s.x, ly.ln2W, ly.ln2B, s.xn, d, n, h.Eps)
		r.MatMul(ly.up, s.xn, 0, n, s.ffn, false)
		r.BiasGELUF16(s.ffn, ly.upB, h.NFF, n) // as llama.cpp's CPU backend, through halves
		r.MatMul(ly.down, s.ffn, 0, n, s.x, true)
		r.BiasAct(s.x, ly.downB, d, n, false)
	}
	r.LayerNorm(s.x, e.postW, e.postB, s.xn, d, n, h.Eps)
	r.AvgPool(s.xn, s.pooled, d, S/h.PatchSize, h.ScaleFactor)
	r.RMSNorm(s.pooled, e.softNorm, s.normed, d, h.Tokens(), h.Eps)
	r.MatMul(e.proj, s.normed, 0, h.Tokens(), s.out, false)
	out, err := r.SubmitAndRead(s.out, 0, uint64(4*h.Tokens()*h.ProjDim))
	if err != nil {
		return nil, err
	}
	return gpu.Float32s(out), nil
}

// Close releases the encoder's device memory.
func (e *VisionEncoder) Close() {
	e.l.release()
	s := &e.s
	for _, b := range []*gpu.Buffer{s.pix, s.x, s.xn, s.qkv, s.k, s.v, s.attn, s.ffn, s.pooled, s.normed, s.out, s.pos, s.state} {
		if b != nil {
			b.Release()
		}
	}
}
