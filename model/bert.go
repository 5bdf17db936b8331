package model

import (
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// encoder holds what BERT adds to the shared layer weights.
type encoder struct {
	posEmbd          gpu.Weight  // learned absolute positions (n_ctx_train rows)
	typeRow          *gpu.Buffer // token type 0's embedding, added to every token (nil: none)
	embNormW, embNrB *gpu.Buffer
	layers           []encoderLayer
}

// encoderLayer holds a BERT block's biases and post-norms (its matrices are in layer).
type encoderLayer struct {
	outBias, upBias, downBias *gpu.Buffer
	attnNormW, attnNormB      *gpu.Buffer
	outNormW, outNormB        *gpu.Buffer
}

// loadEncoder loads a BERT model's weights: post-norm blocks with biases everywhere, a
// non-gated GELU FFN, and learned position and token-type embeddings.
func (m *Model) loadEncoder(l *loader) error {
	c := m.Config
	qDim := c.NHead * c.HeadDim
	e := &encoder{}
	var err error
	if m.tokEmbd, err = l.matrix("token_embd.weight", c.NVocab, c.NEmbd); err != nil {
		return err
	}
	if e.posEmbd, err = l.matrix("position_embd.weight", c.NCtxTrain, c.NEmbd); err != nil {
		return err
	}
	if _, ok := l.f.Tensor("token_types.weight"); ok {
		if e.typeRow, err = l.firstRow("token_types.weight", c.NEmbd); err != nil {
			return err
		}
	}
	if e.embNormW, err = l.vector("token_embd_norm.weight", c.NEmbd); err != nil {
		return err
	}
	if e.embNrB, err = l.vector("token_embd_norm.bias", c.NEmbd); err != nil {
		return err
	}
	m.layers = make([]layer, c.NLayer)
	e.layers = make([]encoderLayer, c.NLayer)
	for i := range m.layers {
		ly, el, p := &m.layers[i], &e.layers[i], fmt.Sprintf("blk.%d.", i)
		if err := m.loadAttention(l, ly, p); err != nil {
			return err
		}
		wo, err := l.matrix(p+"attn_output.weight", c.NEmbd, qDim)
		if err != nil {
			return err
		}
		up, err := l.matrix(p+"ffn_up.weight", c.NFF, c.NEmbd)
		if err != nil {
			return err
		}
		down, err := l.matrix(p+"ffn_down.weight", c.NEmbd, c.NFF)
		if err != nil {
			return err
		}
		ly.wo, ly.gateUp, ly.ffnDown = []proj{{w: wo}}, []proj{{w: up}}, []proj{{w: down}}
		for _, v := range []struct {
			name string
			n    int
			dst  **gpu.Buffer
		}{
			{"attn_output.bias", c.NEmbd, &el.outBias},
			{"ffn_up.bias", c.NFF, &el.upBias},
			{"ffn_down.bias", c.NEmbd, &el.downBias},
			{"attn_output_norm.weight", c.NEmbd, &el.attnNormW},
			{"attn_output_norm.bias", c.NEmbd, &el.attnNormB},
			{"layer_output_norm.weight", c.NEmbd, &el.outNormW},
			{"layer_output_norm.bias", c.NEmbd, &el.outNormB},
		} {
			if *v.dst, err = l.vector(p+v.name, v.n); err != nil {
				return err
			}
		}
		if ly.qkvBias == nil {
			return fmt.Errorf("model: %sattn_q.bias missing (BERT projections have biases)", p)
		}
	}
	m.enc = e
	return nil
}

// Embed runs tokens (one sequence, at most MaxBatch and the training context) through an
// encoder model and returns its pooled embedding, L2-normalised as llama-server returns it.
// The whole pass is one submit; the hidden states are the one readback.
func (m *Model) Embed(kv *KVCache, tokens []int32) ([]float32, error) {
	c, s, e, n := m.Config, &m.scratch, m.enc, len(tokens)
	if e == nil {
		return nil, fmt.Errorf("model: %s is not an embedding (encoder) model", c.Arch)
	}
	if n == 0 || n > m.maxBatch || n > c.NCtxTrain || n > kv.NCtx {
		return nil, fmt.Errorf("model: %d tokens to embed; the limit is %d", n, min(m.maxBatch, c.NCtxTrain, kv.NCtx))
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= c.NVocab {
			return nil, fmt.Errorf("model: token id %d out of range (vocabulary %d)", id, c.NVocab)
		}
	}
	pos := make([]int32, 2*n) // positions, then each token's first cache row (all 0)
	for i := range n {
		pos[i] = int32(i)
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
	// Embeddings: token + type 0 + position, then LayerNorm into the residual stream x.
	r.GetRows(m.tokEmbd, s.ids, s.tmp, n)
	if e.typeRow != nil {
		r.BiasAct(s.tmp, e.typeRow, c.NEmbd, n, false)
	}
	r.GetRows(e.posEmbd, s.pos, s.xn, n)
	r.Add(s.tmp, s.xn, n*c.NEmbd)
	r.LayerNorm(s.tmp, e.embNormW, e.embNrB, s.x, c.NEmbd, n, c.NormEps)
	qkvW := m.qkvWidth()
	ap := gpu.AttnParams{Scale: c.AttnScale, AllKeys: n}
	if c.Causal {
		ap.AllKeys = 0
	}
	for i := range m.layers {
		ly, el := &m.layers[i], &e.layers[i]
		m.project(r, ly.qkv, s.x, 0, n, c.NEmbd, s.qkv, qkvW, false)
		r.RoPEKV(s.qkv, s.pos, kv.k[i], kv.v[i], ly.qkvBias, m.kvF16, n, c.NHead, c.NKVHead, c.HeadDim, gpu.Rope{FreqBase: 1})
		r.Attention(s.qkv, kv.k[i], kv.v[i], s.pos, s.attn, m.kvF16, qkvW, n, c.NHead, c.NKVHead, c.HeadDim, ap)
		// Post-norm blocks: x = LN(x + Wo attn + bo); x = LN(x + down(gelu(up x + bu)) + bd).
		m.project(r, ly.wo, s.attn, 0, n, c.NHead*c.HeadDim, s.tmp, c.NEmbd, false)
		r.BiasAct(s.tmp, el.outBias, c.NEmbd, n, false)
		r.Add(s.tmp, s.x, n*c.NEmbd)
		r.LayerNorm(s.tmp, el.attnNormW, el.attnNormB, s.x, c.NEmbd, n, c.NormEps)
		m.project(r, ly.gateUp, s.x, 0, n, c.NEmbd, s.ffn, c.NFF, false)
		r.BiasAct(s.ffn, el.upBias, c.NFF, n, true)
		m.project(r, ly.ffnDown, s.ffn, 0, n, c.NFF, s.tmp, c.NEmbd, false)
		r.BiasAct(s.tmp, el.downBias, c.NEmbd, n, false)
		r.Add(s.tmp, s.x, n*c.NEmbd)
		r.LayerNorm(s.tmp, el.outNormW, el.outNormB, s.x, c.NEmbd, n, c.NormEps)
	}
	b, err := r.SubmitAndRead(s.x, 0, uint64(n*c.NEmbd)*4)
	if err != nil {
		return nil, err
	}
	return Pool(gpu.Float32s(b), c.NEmbd, c.Pooling), nil
}

// Pool reduces per-token hidden states (rows of n) to one embedding as pooling says and
// L2-normalises it.
func Pool(hidden []float32, n int, pooling Pooling) []float32 {
	rows := len(hidden) / n
	out := make([]float32, n)
	switch pooling {
	case PoolCLS:
		copy(out, hidden[:n])
	case PoolLast:
		copy(out, hidden[(rows-1)*n:])
	default: // mean
		for r := 0; r < rows; r++ {
			for i := range out {
				out[i] += hidden[r*n+i]
			}
		}
		for i := range out {
			out[i] /= float32(rows)
		}
	}
	var ss float64
	for _, v := range out {
		ss += float64(v) * float64(v)
	}
	if ss > 0 {
		inv := float32(1 / math.Sqrt(ss))
		for i := range out {
			out[i] *= inv
		}
	}
	return out
}
