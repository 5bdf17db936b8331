package reference

// BERT, the encoder: the same plain-Go kernels, taken from llama.cpp's llm_build_bert
// (src/models/bert.cpp), its BERT hyperparameters (load_hparams: layer_norm_epsilon and
// attention.causal required, pooling_type optional) and tensors (create_tensors), its pooling
// (llm_graph_context::build_pooling) and llama-server's embedding output (L2-normalised,
// embd_normalize 2):
//
//	x = layernorm(token_embd[t] + token_types[0] + position_embd[pos]) * token_embd_norm + bias
//	for each layer (post-norm):
//	    q, k, v = x @ attn_q + b, x @ attn_k + b, x @ attn_v + b    (no RoPE)
//	    o = attention(q, k, v) @ attn_output + b     (every token sees every token: non-causal)
//	    x = layernorm(x + o) * attn_output_norm + bias
//	    f = gelu(x @ ffn_up + b) @ ffn_down + b      (GELU's tanh approximation; no gate)
//	    x = layernorm(x + f) * layer_output_norm + bias
//	embedding = pool(x) / ||pool(x)||                (pool: mean, first token, or last token)
//
// The token type is always 0 (llama.cpp hardcodes sentence A) and token_types is optional, as
// in llama.cpp. Attention scales by 1/sqrt(head_dim) and follows attention.causal: false in
// every BERT file, but a file that says true gets llama.cpp's causal mask.

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
)

// Encoders lists the architectures Embed runs: encoders, whose output is an embedding
// rather than logits.
var Encoders = []string{"bert"}

// Pooling types, in llama.cpp's numbering (enum llama_pooling_type): how an encoder's per-token
// outputs become one embedding.
const (
	PoolMean = 1 // the mean of every token's output
	PoolCLS  = 2 // the first token's ([CLS] in BERT's vocabulary)
	PoolLast = 3 // the last token's
	PoolRank = 4 // a reranker's classification head on the first token's (see Rank)
)

// bertHparams are an encoder's hyperparameters, from the "bert.*" metadata keys.
type bertHparams struct {
	nEmbd, nLayer, nFF int // embedding_length, block_count, feed_forward_length
	nHead, nKVHead     int // attention.head_count, head_count_kv (default head_count)
	headDim            int // attention.key_length (default nEmbd/nHead)
	nVocab             int // rows of token_embd
	nCtxTrain          int // context_length: the rows of position_embd
	eps                float32
	causal             bool
	pooling            int
}

// Embed runs tokens (one sequence, at positions 0..len(tokens)-1) through an encoder and
// returns its embedding: the final hidden states pooled as the file's pooling_type says (mean
// when it says nothing; see readBert) and L2-normalised, as llama-server returns it. Tensors
// of any type gguf.Dequantize decodes are used as their float32 values.
func Embed(f *gguf.File, tokens []int32) ([]float32, error) {
	hp, err := readBert(f)
	if err != nil {
		return nil, err
	}
	if hp.pooling == PoolRank {
		return nil, fmt.Errorf("reference: pooling_type 4 (rank) scores a query and document: use Rank")
	}
	hidden, err := encode(f, hp, tokens)
	if err != nil {
		return nil, err
	}
	return pool(hidden, hp.nEmbd, hp.pooling), nil
}

// Rank runs tokens (a reranker's prompt: query and document) through an encoder with a
// classification head and returns the head's outputs for the first token, as llama.cpp's rank
// pooling computes them (llm_graph_context::build_pooling):
//
//	h = tanh(cls.weight @ x[0] + cls.bias)
//	out = cls.output.weight @ h + cls.output.bias   (h itself when the file has no cls.output)
//
// The relevance score llama-server reports is out[0]. The file's pooling_type does not matter.
func Rank(f *gguf.File, tokens []int32) ([]float32, error) {
	hp, err := readBert(f)
	if err != nil {
		return nil, err
	}
	if _, ok := f.Tensor("cls.weight"); !ok {
		return nil, fmt.Errorf("reference: no classification head (cls.weight): not a reranker")
	}
	hidden, err := encode(f, hp, tokens)
	if err != nil {
		return nil, err
	}
	d := hp.nEmbd
	w := loader{f}
	dense, err := w.tensor("cls.weight", d, d)
	if err != nil {
		return nil, err
	}
	denseB, err := w.tensor("cls.bias", d)
	if err != nil {
		return nil, err
	}
	h := linear(dense, denseB, d, d, hidden[:d], 1)
	for i, v := range h {
		h[i] = float32(math.Tanh(float64(v)))
	}
	ti, ok := f.Tensor("cls.output.weight")
	if !ok {
		return h, nil
	}
	nOut := 1
	if len(ti.Shape) == 2 {
		nOut = int(ti.Shape[1])
	}
	out, err := w.tensor("cls.output.weight", d, nOut)
	if err != nil {
		return nil, err
	}
	outB, err := w.tensor("cls.output.bias", nOut)
	if err != nil {
		return nil, err
	}
	return linear(out, outB, nOut, d, h, 1), nil
}

// encode returns the final hidden states, len(tokens) rows of nEmbd.
func encode(f *gguf.File, hp bertHparams, tokens []int32) ([]float32, error) {
	n := len(tokens)
	switch {
	case n == 0:
		return nil, fmt.Errorf("reference: no tokens")
	case n > hp.nCtxTrain:
		return nil, fmt.Errorf("reference: %d tokens exceed the %d learned positions (context_length)", n, hp.nCtxTrain)
	}
	for _, t := range tokens {
		if t < 0 || int(t) >= hp.nVocab {
			return nil, fmt.Errorf("reference: token %d outside the vocabulary of %d", t, hp.nVocab)
		}
	}
	w := loader{f}
	d := hp.nEmbd
	var err error
	get := w.getter(&err)
	embd := get("token_embd.weight", d, hp.nVocab)
	posEmbd := get("position_embd.weight", d, hp.nCtxTrain)
	normW, normB := get("token_embd_norm.weight", d), get("token_embd_norm.bias", d)
	if err != nil {
		return nil, err
	}
	var typeRow []float32 // token type 0's row, when the file has token types
	if ti, ok := f.Tensor("token_types.weight"); ok {
		if len(ti.Shape) != 2 || ti.Shape[0] != uint64(d) || ti.Shape[1] == 0 {
			return nil, fmt.Errorf("reference: tensor token_types.weight has shape %v, want [%d, types]", ti.Shape, d)
		}
		types := get("token_types.weight", d, int(ti.Shape[1]))
		if err != nil {
			return nil, err
		}
		typeRow = types[:d]
	}

	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(i)
	}
	x := cpuref.GetRows(embd, d, tokens)
	if typeRow != nil {
		for t := range n {
			for i := range d {
				x[t*d+i] += typeRow[i]
			}
		}
	}
	x = cpuref.Add(x, cpuref.GetRows(posEmbd, d, pos))
	x = cpuref.LayerNorm(x, normW, normB, d, hp.eps)

	// cpuref.AttentionOpts lets the token at position p see rows 0..p: the true positions
	// give the causal mask, and n-1 for every token lets each see all n.
	seen := pos
	if !hp.causal {
		seen = make([]int32, n)
		for i := range seen {
			seen[i] = int32(n - 1)
		}
	}
	qDim, kvDim := hp.nHead*hp.headDim, hp.nKVHead*hp.headDim
	scale := float32(1 / math.Sqrt(float64(hp.headDim)))
	for il := range hp.nLayer {
		p := fmt.Sprintf("blk.%d.", il)
		wq, bq := get(p+"attn_q.weight", d, qDim), get(p+"attn_q.bias", qDim)
		wk, bk := get(p+"attn_k.weight", d, kvDim), get(p+"attn_k.bias", kvDim)
		wv, bv := get(p+"attn_v.weight", d, kvDim), get(p+"attn_v.bias", kvDim)
		wo, bo := get(p+"attn_output.weight", qDim, d), get(p+"attn_output.bias", d)
		attnNormW, attnNormB := get(p+"attn_output_norm.weight", d), get(p+"attn_output_norm.bias", d)
		up, bUp := get(p+"ffn_up.weight", d, hp.nFF), get(p+"ffn_up.bias", hp.nFF)
		down, bDown := get(p+"ffn_down.weight", hp.nFF, d), get(p+"ffn_down.bias", d)
		outNormW, outNormB := get(p+"layer_output_norm.weight", d), get(p+"layer_output_norm.bias", d)
		if err != nil {
			return nil, err
		}
		q := linear(wq, bq, qDim, d, x, n)
		k := linear(wk, bk, kvDim, d, x, n)
		v := linear(wv, bv, kvDim, d, x, n)
		att := cpuref.AttentionOpts(q, k, v, seen, hp.nHead, hp.nKVHead, hp.headDim, scale, 0, 0)
		x = cpuref.LayerNorm(cpuref.Add(x, linear(wo, bo, d, qDim, att, n)), attnNormW, attnNormB, d, hp.eps)
		h := cpuref.GELU(linear(up, bUp, hp.nFF, d, x, n))
		x = cpuref.LayerNorm(cpuref.Add(x, linear(down, bDown, d, hp.nFF, h, n)), outNormW, outNormB, d, hp.eps)
	}
	return x, nil
}

// pool reduces hidden states (rows of n) to one vector as pooling says and divides it by its
// Euclidean norm (leaving a zero vector as it is), as llama-server's default embd_normalize 2.
func pool(hidden []float32, n, pooling int) []float32 {
	rows := len(hidden) / n
	out := make([]float32, n)
	switch pooling {
	case PoolCLS:
		copy(out, hidden[:n])
	case PoolLast:
		copy(out, hidden[(rows-1)*n:])
	default: // PoolMean
		for i := range out {
			var s float64
			for r := range rows {
				s += float64(hidden[r*n+i])
			}
			out[i] = float32(s / float64(rows))
		}
	}
	var ss float64
	for _, v := range out {
		ss += float64(v) * float64(v)
	}
	if ss > 0 {
		inv := 1 / math.Sqrt(ss)
		for i, v := range out {
			out[i] = float32(float64(v) * inv)
		}
	}
	return out
}

// readBert reads an encoder's hyperparameters as llama.cpp's load_hparams does:
// attention.layer_norm_epsilon and attention.causal are required (llama.cpp refuses a BERT
// file without them). pooling_type is optional; llama.cpp's default when it is absent is no
// pooling (one vector per token, which llama-server's OpenAI-style endpoint refuses), and an
// embedding of one vector then falls back to the mean, as this project's GPU side does
// (model.Embed). Rank (4) is read for Rank and refused by Embed; none (0) is refused.
func readBert(f *gguf.File) (bertHparams, error) {
	arch := f.Architecture()
	if !slices.Contains(Encoders, arch) {
		if slices.Contains(Supported, arch) {
			return bertHparams{}, fmt.Errorf("reference: %s is a decoder, whose output is logits: use Forward (Embed runs %s)", arch, strings.Join(Encoders, ", "))
		}
		return bertHparams{}, fmt.Errorf("reference: architecture %q not supported by Embed (supported: %s)", arch, strings.Join(Encoders, ", "))
	}
	var hp bertHparams
	for _, r := range []struct {
		key string
		dst *int
	}{{"embedding_length", &hp.nEmbd}, {"block_count", &hp.nLayer}, {"feed_forward_length", &hp.nFF},
		{"attention.head_count", &hp.nHead}, {"context_length", &hp.nCtxTrain}} {
		v, ok := f.Uint(arch + "." + r.key)
		if !ok || v == 0 || v > 1<<24 {
			return bertHparams{}, fmt.Errorf("reference: metadata %s.%s missing or invalid", arch, r.key)
		}
		*r.dst = int(v)
	}
	optional := func(key string, dst *int, def int) {
		*dst = def
		if v, ok := f.Uint(arch + "." + key); ok && v > 0 && v <= 1<<24 {
			*dst = int(v)
		}
	}
	optional("attention.head_count_kv", &hp.nKVHead, hp.nHead)
	optional("attention.key_length", &hp.headDim, hp.nEmbd/hp.nHead)
	if v, ok := f.Uint(arch + ".attention.value_length"); ok && int(v) != hp.headDim {
		return bertHparams{}, fmt.Errorf("reference: value_length %d differs from key_length %d", v, hp.headDim)
	}
	if hp.headDim == 0 || hp.nHead%hp.nKVHead != 0 {
		return bertHparams{}, fmt.Errorf("reference: %d heads of %d values with %d key/value heads", hp.nHead, hp.headDim, hp.nKVHead)
	}
	eps, ok := f.Float(arch + ".attention.layer_norm_epsilon")
	if !ok {
		return bertHparams{}, fmt.Errorf("reference: metadata %s.attention.layer_norm_epsilon missing", arch)
	}
	hp.eps = float32(eps)
	if hp.causal, ok = f.Bool(arch + ".attention.causal"); !ok {
		return bertHparams{}, fmt.Errorf("reference: metadata %s.attention.causal missing or not a bool", arch)
	}
	hp.pooling = PoolMean
	if v, ok := f.Uint(arch + ".pooling_type"); ok {
		hp.pooling = int(v)
	}
	if hp.pooling != PoolMean && hp.pooling != PoolCLS && hp.pooling != PoolLast && hp.pooling != PoolRank {
		return bertHparams{}, fmt.Errorf("reference: %s.pooling_type %d not supported (supported: 1 mean, 2 cls, 3 last, 4 rank)", arch, hp.pooling)
	}
	embd, ok := f.Tensor("token_embd.weight")
	if !ok || len(embd.Shape) != 2 {
		return bertHparams{}, fmt.Errorf("reference: token_embd.weight missing or not a matrix")
	}
	hp.nVocab = int(embd.Shape[1])
	return hp, nil
}
