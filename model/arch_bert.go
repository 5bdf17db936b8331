package model

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// bert: BERT-style encoders (embedding and reranking models): post-norm blocks with biases
// everywhere, a non-gated GELU FFN, learned position and token-type embeddings, attention to
// the whole sequence (or causal with attention.causal), and a pooled output, as llama.cpp's
// src/models/bert.cpp.
func init() {
	register(&arch{name: "bert", hparams: bertHparams, load: (*Model).loadEncoder})
}

// bertHparams reads an encoder's keys: its LayerNorm epsilon and causal flag; it has no RoPE.
func bertHparams(k keys, c *Config) error {
	c.Encoder, c.NRot = true, 0
	c.NormEps = 1e-12
	k.float("attention.layer_norm_epsilon", &c.NormEps)
	k.bool("attention.causal", &c.Causal)
	return nil
}

// encoder holds what BERT adds to the shared layer weights.
type encoder struct {
	posEmbd          gpu.Weight  // learned absolute positions (n_ctx_train rows)
	typeRow          *gpu.Buffer // token type 0's embedding, added to every token (nil: none)
	embNormW, embNrB *gpu.Buffer
	layers           []encoderLayer
	head             *rankHead // a reranker's classification head, or nil
}

// rankHead is a reranker's classification head (llama.cpp's cls and cls.output tensors, as
// build_pooling applies them for rank pooling): out(tanh(dense x + denseB)) + outB of the first
// token's output; without cls.output the tanh layer's outputs are the result.
type rankHead struct {
	dense  gpu.Weight
	denseB *gpu.Buffer
	out    gpu.Weight // zero Rows when the file has no cls.output
	outB   *gpu.Buffer
	nOut   int // values per sequence: cls.output's rows, else n_embd
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
		if err := loadAttention(l, &m.Config, ly, i); err != nil {
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
		ly.gateUp, ly.ffnDown = []proj{{w: up}}, []proj{{w: down}}
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
	if e.head, err = loadRankHead(l, c.NEmbd); err != nil {
		return err
	}
	m.enc = e
	return nil
}

// loadRankHead loads the classification head when the file has one (cls.weight): a dense
// n_embd x n_embd layer with its bias and, optionally, cls.output with its bias.
func loadRankHead(l *loader, nEmbd int) (*rankHead, error) {
	if _, ok := l.f.Tensor("cls.weight"); !ok {
		return nil, nil
	}
	h := &rankHead{nOut: nEmbd}
	var err error
	if h.dense, err = l.matrix("cls.weight", nEmbd, nEmbd); err != nil {
		return nil, err
	}
	if h.denseB, err = l.vector("cls.bias", nEmbd); err != nil {
		return nil, err
	}
	t, ok := l.f.Tensor("cls.output.weight")
	if !ok {
		return h, nil
	}
	if len(t.Shape) < 1 || len(t.Shape) > 2 || t.Shape[0] != uint64(nEmbd) {
		return nil, fmt.Errorf("model: tensor \"cls.output.weight\" has shape %v, want [%d, outputs]", t.Shape, nEmbd)
	}
	h.nOut = 1
	if len(t.Shape) == 2 {
		h.nOut = int(t.Shape[1])
	}
	if h.out, err = l.matrix("cls.output.weight", h.nOut, nEmbd); err != nil {
		return nil, err
	}
	if h.outB, err = l.vector("cls.output.bias", h.nOut); err != nil {
		return nil, err
	}
	return h, nil
}

// recordEncoder uploads the batch and records the encoder over it, leaving the final hidden
// states in the scratch's x. A token attends to every token of its own sequence (the batch's
// tokens with its Base), or with attention.causal to those up to its position: the attention
// kernel's causal limit is given, per token, the last position of its sequence.
func (m *Model) recordEncoder(kv *KVCache, b Batch) (*gpu.Recorder, error) {
	c, s, e, n := m.Config, &m.scratch, m.enc, len(b.Tokens)
	if err := m.dev.Write(s.ids, 0, gpu.Bytes(b.Tokens)); err != nil {
		return nil, err
	}
	posBase := append(append(make([]int32, 0, 2*n), b.Pos...), b.Base...)
	if err := m.dev.Write(s.pos, 0, gpu.Bytes(posBase)); err != nil {
		return nil, err
	}
	keyEnds := s.pos
	if !c.Causal {
		last := map[int32]int32{}
		for i, base := range b.Base {
			last[base] = max(last[base], b.Pos[i])
		}
		ends := make([]int32, 2*n)
		for i, base := range b.Base {
			ends[i] = last[base]
		}
		copy(ends[n:], b.Base)
		if err := m.dev.Write(s.keyEnds, 0, gpu.Bytes(ends)); err != nil {
			return nil, err
		}
		keyEnds = s.keyEnds
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
	ap := gpu.AttnParams{Scale: c.AttnScale, State: s.attnState}
	for _, p := range b.Pos {
		ap.MaxKeys = max(ap.MaxKeys, int(p)+1) // a sequence's tokens see its positions 0..last
	}
	for i := range m.layers {
		ly, el := &m.layers[i], &e.layers[i]
		m.project(r, ly.qkv, s.x, 0, n, c.NEmbd, s.qkv, qkvW, false)
		r.RoPEKV(s.qkv, s.pos, kv.k[i], kv.v[i], ly.qkvBias, m.kvF16, n, c.NHead, c.NKVHead, c.HeadDim, gpu.Rope{FreqBase: 1})
		r.Attention(s.qkv, kv.k[i], kv.v[i], keyEnds, s.attn, m.kvF16, qkvW, n, c.NHead, c.NKVHead, c.HeadDim, ap)
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
	return r, nil
}

// recordRankHead records the classification head over the hidden states of the k batch rows
// listed in s.outRows (gathered from s.x) and returns the buffer that will hold the k x nOut
// outputs.
func (m *Model) recordRankHead(r *gpu.Recorder, n, k int) *gpu.Buffer {
	c, s, h := m.Config, &m.scratch, m.enc.head
	hidden := gpu.Weight{Type: gpu.F32, Rows: n, Cols: c.NEmbd, Chunks: []gpu.WeightChunk{{Buf: s.x, Rows: n}}}
	r.GetRows(hidden, s.outRows, s.tmp, k)
	m.project(r, []proj{{w: h.dense}}, s.tmp, 0, k, c.NEmbd, s.xn, c.NEmbd, false)
	r.BiasAct(s.xn, h.denseB, c.NEmbd, k, false)
	r.SoftCap(s.xn, k*c.NEmbd, 1) // tanh
	if h.out.Rows == 0 {
		return s.xn
	}
	m.project(r, []proj{{w: h.out}}, s.xn, 0, k, c.NEmbd, s.logits, h.nOut, false)
	r.BiasAct(s.logits, h.outB, h.nOut, k, false)
	return s.logits
}
