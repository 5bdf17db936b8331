package model

import (
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model/tokenizer"
)

// layer holds one transformer block's weights on the device.
type layer struct {
	attnNorm, ffnNorm       *gpu.Buffer
	wq, wk, wv, wo          gpu.Weight
	ffnGate, ffnUp, ffnDown gpu.Weight
}

// Model is a loaded llama-architecture model: weights on the GPU plus the tokenizer.
type Model struct {
	Config    Config
	Tokenizer *tokenizer.Tokenizer

	dev        *gpu.Device
	tokEmbd    gpu.Weight
	outputNorm *gpu.Buffer
	output     gpu.Weight
	layers     []layer
	weights    []*gpu.Buffer

	maxBatch int
	scratch  scratch
}

// scratch holds the activations of one forward pass, sized for maxBatch tokens.
type scratch struct {
	x, xn, q, k, v, attn, gate, up, logits, ids, pos *gpu.Buffer
}

// Options tune loading.
type Options struct {
	// MaxBatch is the most tokens one forward pass processes (llama.cpp's -ub); longer
	// prompts are split into several passes. Default 512.
	MaxBatch int
	// Progress, when set, is called after each tensor upload with bytes done and total.
	Progress func(done, total uint64)
}

// Load reads a GGUF model's hyperparameters, tokenizer and weights and uploads the weights.
// The file may be closed once Load returns.
func Load(dev *gpu.Device, f *gguf.File, opts Options) (*Model, error) {
	cfg, err := ReadConfig(f)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if cfg.NVocab == 0 {
		cfg.NVocab = tok.NVocab()
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 512
	}
	m := &Model{Config: cfg, Tokenizer: tok, dev: dev, maxBatch: opts.MaxBatch}
	l := &loader{f: f, dev: dev, progress: opts.Progress, total: cfg.TensorSize}
	if err := m.loadWeights(l); err != nil {
		l.release()
		return nil, err
	}
	m.weights = l.bufs
	if err := m.allocScratch(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

func (m *Model) loadWeights(l *loader) error {
	c := m.Config
	qDim, kvDim := c.NHead*c.HeadDim, c.NKVHead*c.HeadDim
	var err error
	if m.tokEmbd, err = l.matrix("token_embd.weight", c.NVocab, c.NEmbd); err != nil {
		return err
	}
	if m.outputNorm, err = l.vector("output_norm.weight", c.NEmbd); err != nil {
		return err
	}
	if _, ok := l.f.Tensor("output.weight"); ok {
		if m.output, err = l.matrix("output.weight", c.NVocab, c.NEmbd); err != nil {
			return err
		}
	} else {
		m.output = m.tokEmbd // tied embeddings
	}
	m.layers = make([]layer, c.NLayer)
	for i := range m.layers {
		ly := &m.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		for _, v := range []struct {
			name string
			n    int
			dst  **gpu.Buffer
		}{{"attn_norm", c.NEmbd, &ly.attnNorm}, {"ffn_norm", c.NEmbd, &ly.ffnNorm}} {
			if *v.dst, err = l.vector(p+v.name+".weight", v.n); err != nil {
				return err
			}
		}
		for _, w := range []struct {
			name       string
			rows, cols int
			dst        *gpu.Weight
		}{
			{"attn_q", qDim, c.NEmbd, &ly.wq},
			{"attn_k", kvDim, c.NEmbd, &ly.wk},
			{"attn_v", kvDim, c.NEmbd, &ly.wv},
			{"attn_output", c.NEmbd, qDim, &ly.wo},
			{"ffn_gate", c.NFF, c.NEmbd, &ly.ffnGate},
			{"ffn_up", c.NFF, c.NEmbd, &ly.ffnUp},
			{"ffn_down", c.NEmbd, c.NFF, &ly.ffnDown},
		} {
			if *w.dst, err = l.matrix(p+w.name+".weight", w.rows, w.cols); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *Model) allocScratch() error {
	c, t := m.Config, m.maxBatch
	alloc := func(name string, n int) (*gpu.Buffer, error) { return m.dev.NewBuffer(name, uint64(n)*4) }
	var err error
	for _, s := range []struct {
		name string
		n    int
		dst  **gpu.Buffer
	}{
		{"x", t * c.NEmbd, &m.scratch.x},
		{"xn", t * c.NEmbd, &m.scratch.xn},
		{"q", t * c.NHead * c.HeadDim, &m.scratch.q},
		{"k", t * c.NKVHead * c.HeadDim, &m.scratch.k},
		{"v", t * c.NKVHead * c.HeadDim, &m.scratch.v},
		{"attn", t * c.NHead * c.HeadDim, &m.scratch.attn},
		{"gate", t * c.NFF, &m.scratch.gate},
		{"up", t * c.NFF, &m.scratch.up},
		{"logits", c.NVocab, &m.scratch.logits},
		{"ids", t, &m.scratch.ids},
		{"pos", t, &m.scratch.pos},
	} {
		if *s.dst, err = alloc(s.name, s.n); err != nil {
			return fmt.Errorf("model: scratch %s: %w", s.name, err)
		}
	}
	return nil
}

// Close releases the model's device memory.
func (m *Model) Close() {
	for _, b := range m.weights {
		b.Release()
	}
	s := &m.scratch
	for _, b := range []*gpu.Buffer{s.x, s.xn, s.q, s.k, s.v, s.attn, s.gate, s.up, s.logits, s.ids, s.pos} {
		b.Release()
	}
	m.weights = nil
}

// KVCache is one sequence's keys and values for every layer, resident on the GPU.
type KVCache struct {
	NCtx int
	k, v []*gpu.Buffer
}

// NewKVCache allocates a cache of nCtx positions.
func (m *Model) NewKVCache(nCtx int) (*KVCache, error) {
	c := m.Config
	row := uint64(c.NKVHead * c.HeadDim * 4)
	kv := &KVCache{NCtx: nCtx}
	for i := 0; i < c.NLayer; i++ {
		k, err := m.dev.NewBuffer(fmt.Sprintf("cache_k_l%d", i), uint64(nCtx)*row)
		if err != nil {
			kv.Release()
			return nil, fmt.Errorf("model: KV cache of %d tokens: %w", nCtx, err)
		}
		kv.k = append(kv.k, k)
		v, err := m.dev.NewBuffer(fmt.Sprintf("cache_v_l%d", i), uint64(nCtx)*row)
		if err != nil {
			kv.Release()
			return nil, fmt.Errorf("model: KV cache of %d tokens: %w", nCtx, err)
		}
		kv.v = append(kv.v, v)
	}
	return kv, nil
}

// Release frees the cache's device memory.
func (kv *KVCache) Release() {
	for _, b := range append(kv.k, kv.v...) {
		b.Release()
	}
	kv.k, kv.v = nil, nil
}

// Forward runs tokens at positions pos0, pos0+1, ... through the model, writing their keys and
// values into the cache, and returns the logits of the last token. Each chunk of up to
// MaxBatch tokens is one command buffer and one submit; only the last reads anything back.
func (m *Model) Forward(kv *KVCache, tokens []int32, pos0 int) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("model: forward of zero tokens")
	}
	if pos0 < 0 || pos0+len(tokens) > kv.NCtx {
		return nil, fmt.Errorf("model: positions %d..%d exceed the context of %d", pos0, pos0+len(tokens)-1, kv.NCtx)
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= m.Config.NVocab {
			return nil, fmt.Errorf("model: token id %d out of range (vocabulary %d)", id, m.Config.NVocab)
		}
	}
	for start := 0; start < len(tokens); start += m.maxBatch {
		end := min(start+m.maxBatch, len(tokens))
		logits, err := m.pass(kv, tokens[start:end], pos0+start, end == len(tokens))
		if err != nil || end == len(tokens) {
			return logits, err
		}
	}
	return nil, nil // unreachable
}

// pass records and submits one forward pass of at most maxBatch tokens.
func (m *Model) pass(kv *KVCache, tokens []int32, pos0 int, wantLogits bool) ([]float32, error) {
	c, s, n := m.Config, &m.scratch, len(tokens)
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(pos0 + i)
	}
	if err := m.dev.Write(s.ids, 0, gpu.Bytes(tokens)); err != nil {
		return nil, err
	}
	if err := m.dev.Write(s.pos, 0, gpu.Bytes(pos)); err != nil {
		return nil, err
	}
	r, err := m.dev.Begin()
	if err != nil {
		return nil, err
	}
	scale := float32(1 / math.Sqrt(float64(c.HeadDim)))
	r.GetRows(m.tokEmbd, s.ids, s.x, n)
	for i := range m.layers {
		ly := &m.layers[i]
		r.RMSNorm(s.x, ly.attnNorm, s.xn, c.NEmbd, n, c.RMSEps)
		r.MatMul(ly.wq, s.xn, 0, n, s.q, false)
		r.MatMul(ly.wk, s.xn, 0, n, s.k, false)
		r.MatMul(ly.wv, s.xn, 0, n, s.v, false)
		r.RoPE(s.q, s.pos, n, c.NHead, c.HeadDim, c.NRot, c.RopeBase)
		r.RoPEToCache(s.k, s.pos, kv.k[i], n, c.NKVHead, c.HeadDim, c.NRot, c.RopeBase)
		r.SetRows(s.v, s.pos, kv.v[i], c.NKVHead*c.HeadDim, n)
		r.Attention(s.q, kv.k[i], kv.v[i], s.pos, s.attn, n, c.NHead, c.NKVHead, c.HeadDim, scale)
		r.MatMul(ly.wo, s.attn, 0, n, s.x, true)
		r.RMSNorm(s.x, ly.ffnNorm, s.xn, c.NEmbd, n, c.RMSEps)
		r.MatMul(ly.ffnGate, s.xn, 0, n, s.gate, false)
		r.MatMul(ly.ffnUp, s.xn, 0, n, s.up, false)
		r.SiLUMul(s.gate, s.up, n*c.NFF)
		r.MatMul(ly.ffnDown, s.gate, 0, n, s.x, true)
	}
	if !wantLogits {
		return nil, r.Submit()
	}
	// Only the last token needs logits: normalise its row and project it alone.
	r.RMSNorm(s.x, m.outputNorm, s.xn, c.NEmbd, n, c.RMSEps)
	r.MatMul(m.output, s.xn, n-1, 1, s.logits, false)
	b, err := r.SubmitAndRead(s.logits, 0, uint64(c.NVocab)*4)
	if err != nil {
		return nil, err
	}
	return gpu.Float32s(b), nil
}
