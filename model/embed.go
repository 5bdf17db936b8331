package model

import (
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// ForwardEmbed runs one batch (at most MaxBatch tokens of one or more sequences, laid out as
// for ForwardBatch; b.Logits is ignored) and returns the final hidden states of all its
// tokens, len(b.Tokens) rows of NEmbd: after the output norm for a decoder (llama.cpp's
// t_embd), after the last LayerNorm for an encoder. A decoder's tokens attend causally, as in
// generation, and leave their keys and values in the cache; an encoder's attend to every token
// of their sequence, which must therefore be whole in the batch (positions 0 up, below the
// training context's learned positions).
func (m *Model) ForwardEmbed(kv *KVCache, b Batch) ([]float32, error) {
	c, s, n := m.Config, &m.scratch, len(b.Tokens)
	if err := m.checkEmbedBatch(kv, b); err != nil {
		return nil, err
	}
	var (
		r   *gpu.Recorder
		out *gpu.Buffer
		err error
	)
	if m.enc != nil {
		r, err = m.recordEncoder(kv, b)
		out = s.x
	} else if r, err = m.begin(kv, b); err == nil {
		t := m.last()
		r.RMSNorm(t.scratch.x, t.outputNorm, t.scratch.xn, c.NEmbd, n, c.RMSEps)
		out = t.scratch.xn
	}
	if err != nil {
		return nil, err
	}
	raw, err := r.SubmitAndRead(out, 0, uint64(n*c.NEmbd)*4)
	if err != nil {
		return nil, err
	}
	return gpu.Float32s(raw), nil
}

// CanRank reports whether the model has a reranker's classification head (cls.weight), which
// rank pooling needs.
func (m *Model) CanRank() bool { return m.enc != nil && m.enc.head != nil }

// RankOutputs is the number of values the classification head gives per sequence (llama.cpp's
// n_cls_out; a reranker's relevance score is the first), 0 without a head.
func (m *Model) RankOutputs() int {
	if !m.CanRank() {
		return 0
	}
	return m.enc.head.nOut
}

// ForwardRank runs one batch of an encoder with a classification head, as ForwardEmbed, and
// returns the head's RankOutputs values for each batch row in rows (each sequence's first
// token, where llama.cpp's rank pooling reads), in that order.
func (m *Model) ForwardRank(kv *KVCache, b Batch, rows []int) ([][]float32, error) {
	n, k := len(b.Tokens), len(rows)
	if !m.CanRank() {
		return nil, fmt.Errorf("model: %s has no classification head (cls.weight): it cannot rank", m.Config.Arch)
	}
	if err := m.checkEmbedBatch(kv, b); err != nil {
		return nil, err
	}
	nOut := m.enc.head.nOut
	if k == 0 || k > m.maxOutputs || (m.enc.head.out.Rows > 0 && k*nOut > m.maxOutputs*m.Config.NVocab) {
		return nil, fmt.Errorf("model: %d rows to rank; the limit is %d", k, m.maxOutputs)
	}
	ids := make([]int32, k)
	for i, row := range rows {
		if row < 0 || row >= n {
			return nil, fmt.Errorf("model: rank of batch row %d requested of %d", row, n)
		}
		ids[i] = int32(row)
	}
	if err := m.dev.Write(m.scratch.outRows, 0, gpu.Bytes(ids)); err != nil {
		return nil, err
	}
	r, err := m.recordEncoder(kv, b)
	if err != nil {
		return nil, err
	}
	out := m.recordRankHead(r, n, k)
	raw, err := r.SubmitAndRead(out, 0, uint64(k*nOut)*4)
	if err != nil {
		return nil, err
	}
	all := gpu.Float32s(raw)
	res := make([][]float32, k)
	for i := range res {
		res[i] = all[i*nOut : (i+1)*nOut]
	}
	return res, nil
}

// checkEmbedBatch is checkBatch plus an encoder's limit: positions index its learned position
// embeddings.
func (m *Model) checkEmbedBatch(kv *KVCache, b Batch) error {
	if err := m.checkBatch(kv, b); err != nil {
		return err
	}
	if m.enc == nil {
		return nil
	}
	for i, p := range b.Pos {
		if int(p) >= m.Config.NCtxTrain {
			return fmt.Errorf("model: token %d at position %d; %s has %d learned positions", i, p, m.Config.Arch, m.Config.NCtxTrain)
		}
	}
	return nil
}

// Embed runs tokens (one sequence, at most MaxBatch) through the model and returns its pooled
// embedding, L2-normalised as llama-server returns it: pooled as the file's pooling_type says,
// by the mean when it names no single-vector pooling (none, rank, or no key).
func (m *Model) Embed(kv *KVCache, tokens []int32) ([]float32, error) {
	n := len(tokens)
	if n == 0 || n > m.maxBatch {
		return nil, fmt.Errorf("model: %d tokens to embed; the limit is %d", n, m.maxBatch)
	}
	b := Batch{Tokens: tokens, Pos: make([]int32, n), Base: make([]int32, n)}
	for i := range b.Pos {
		b.Pos[i] = int32(i)
	}
	hidden, err := m.ForwardEmbed(kv, b)
	if err != nil {
		return nil, err
	}
	p := m.Config.Pooling
	if p != PoolCLS && p != PoolLast {
		p = PoolMean
	}
	return Normalize(Pool(hidden, m.Config.NEmbd, p), NormEuclidean), nil
}

// Pool reduces per-token hidden states (rows of n) to one vector as pooling says: the mean of
// the rows, the first row (cls) or the last row; other poolings take the mean.
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
	return out
}

// Normalizations for Normalize, llama.cpp's embd_normalize values; any other positive p is the
// p-norm.
const (
	NormNone      = -1 // leave the vector as it is
	NormMaxAbs    = 0  // scale the largest magnitude to 32760 (an int16 range)
	NormTaxicab   = 1  // divide by the sum of magnitudes
	NormEuclidean = 2  // divide by the Euclidean length (llama-server's default)
)

// Normalize returns v normalised as llama.cpp's common_embd_normalize does for norm: none (-1),
// max absolute to an int16 range (0), or the p-norm for p = norm >= 1 (2: Euclidean). A zero
// vector stays zero.
func Normalize(v []float32, norm int) []float32 {
	var sum float64
	switch {
	case norm < 0:
		sum = 1
	case norm == NormMaxAbs:
		for _, x := range v {
			sum = max(sum, math.Abs(float64(x)))
		}
		sum /= 32760
	case norm == NormEuclidean:
		for _, x := range v {
			sum += float64(x) * float64(x)
		}
		sum = math.Sqrt(sum)
	default:
		for _, x := range v {
			sum += math.Pow(math.Abs(float64(x)), float64(norm))
		}
		sum = math.Pow(sum, 1/float64(norm))
	}
	scale := float32(0)
	if sum > 0 {
		scale = float32(1 / sum)
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = x * scale
	}
	return out
}
