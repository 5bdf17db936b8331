package model

import (
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// Candidates is one logits row reduced on the GPU to its best tokens: what a sampler whose
// first filter is top-k needs instead of the whole row.
type Candidates struct {
	// IDs and Logits are the K largest logits and their tokens (the whole row if it is
	// shorter), by descending logit and then ascending id, as a stable sort would order them.
	IDs    []int32
	Logits []float32 // Logits[i] is token IDs[i]'s raw logit
	// Max is the row's largest logit; LogSumExp is log sum_j exp(logit_j) over the whole row,
	// so a candidate's full-softmax probability is exp(logit - LogSumExp).
	Max       float32
	LogSumExp float64 // Max plus the log of the GPU's sum of exp(logit - Max)
}

// Prob is the full-softmax probability of the i-th candidate.
func (c *Candidates) Prob(i int) float64 {
	return math.Exp(float64(c.Logits[i]) - c.LogSumExp)
}

// candScratch holds ForwardTopK's device buffers, grown as needed.
type candScratch struct {
	out  *gpu.Buffer // per row: max, sum of exponentials, ids, logits
	part *gpu.Buffer // the barrier-free kernel's per-span candidates
}

func (c *candScratch) release() {
	c.out.Release()
	c.part.Release()
	c.out, c.part = nil, nil
}

// MaxTopK is the most candidates per row ForwardTopK can return on this model's device.
func (m *Model) MaxTopK() int { return m.last().dev.MaxTopKFor(m.Config.NVocab) }

// ForwardTopK runs one batch as ForwardBatch does (one command buffer, one submit) but
// returns, for each requested logits row, only its k best candidates (k in 1..MaxTopK())
// with the row's maximum and log-sum-exp, found on the GPU: the readback is 2k+2 words a row
// instead of the vocabulary.
func (m *Model) ForwardTopK(kv *KVCache, b Batch, k int) ([]Candidates, error) {
	if m.enc != nil {
		return nil, fmt.Errorf("model: %s is an embedding model: it does not generate text (use ForwardEmbed)", m.Config.Arch)
	}
	if k < 1 || k > m.MaxTopK() {
		return nil, fmt.Errorf("model: %d candidates per row requested; want 1..%d", k, m.MaxTopK())
	}
	if err := m.checkBatch(kv, b); err != nil {
		return nil, err
	}
	rows, nv := len(b.Logits), m.Config.NVocab
	stride := gpu.TopKStride(k)
	t := m.last() // the stage with the output
	if rows > 0 {
		if err := t.ensure(&t.cand.out, "topk_out", rows*stride); err != nil {
			return nil, err
		}
		if words := t.dev.TopKScratchWords(nv, rows, k); words > 0 {
			if err := t.ensure(&t.cand.part, "topk_part", words); err != nil {
				return nil, err
			}
		}
	}
	r, err := m.begin(kv, b)
	if err != nil {
		return nil, err
	}
	if rows == 0 {
		return nil, r.Submit()
	}
	t.recordLogits(r, len(b.Tokens), b.Logits)
	r.TopK(t.scratch.logits, t.cand.out, t.cand.part, nv, rows, k)
	raw, err := r.SubmitAndRead(t.cand.out, 0, uint64(rows*stride)*4)
	if err != nil {
		return nil, err
	}
	words := gpu.Float32s(raw)
	n := min(k, nv)
	out := make([]Candidates, rows)
	for i := range out {
		w := words[i*stride:]
		c := Candidates{IDs: make([]int32, n), Logits: make([]float32, n), Max: w[0]}
		c.LogSumExp = float64(w[0]) + math.Log(float64(w[1]))
		for j := range n {
			c.IDs[j] = int32(math.Float32bits(w[2+j]))
			c.Logits[j] = w[2+k+j]
		}
		out[i] = c
	}
	return out, nil
}
