package engine

import (
	"slices"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// The GPU candidate readback: when no sampler of any generation in a batch needs a whole
// logits row — each chain starts (in effect) with top_k, or is greedy — the model reduces
// every row to its best candidates on the GPU and only those are read back and sampled. The
// chain then sees exactly the candidates it would have kept from the full row, in the same
// order with the same logits, so it draws the same tokens from the same seeds; n_probs come
// from the row's log-sum-exp.

// Readback says what a forward pass reads back for sampling (Config.Readback).
type Readback int

const (
	// ReadbackAuto reads back candidates where the samplers allow on GPU adapters, and whole
	// rows on CPU adapters (lavapipe), where the top-k kernel costs more than the copy and the
	// host-side search it saves.
	ReadbackAuto Readback = iota
	// ReadbackFullRows always reads back whole logits rows.
	ReadbackFullRows
	// ReadbackCandidates reads back candidates where the samplers allow, on any adapter.
	ReadbackCandidates
)

// candidates reports whether an engine on dev reads back candidates where it can.
func (r Readback) candidates(dev *gpu.Device) bool {
	return r == ReadbackCandidates || (r == ReadbackAuto && !dev.BarrierFree)
}

// logitsRow is one batch row's output as a generation samples it: the full logits, or the
// GPU's best candidates of the row.
type logitsRow struct {
	full []float32
	top  *model.Candidates
}

// candidatesNeeded is how many of a row's best candidates (by logit, then id) the sampler
// needs to choose, and report n_probs, exactly as it would from the whole row; 0 when it
// needs the whole row: with logit bias (any token can rise), Mirostat, a chain that does not
// begin with top_k in 1..gpu.MaxTopK once inactive samplers are skipped, or, greedy, a
// sampler that could drop the top token (penalties, DRY, typical, XTC).
func (s *sampler) candidatesNeeded() int {
	p := s.p
	if len(p.LogitBias) > 0 || p.Mirostat != 0 {
		return 0
	}
	need := max(p.NProbs, 1)
	if s.greedy() {
		// A greedy chain skips top_n_sigma, top_k, top_p and min_p; temperature keeps the top.
		for _, k := range s.chain {
			switch k {
			case samplerPenalties, samplerDRY, samplerTypicalP, samplerXTC:
				if s.acts(k) {
					return 0
				}
			}
		}
		return fitsTopK(need)
	}
	for _, k := range s.chain {
		if k == samplerTopK {
			if p.TopK < 1 {
				return 0
			}
			return fitsTopK(max(need, p.TopK))
		}
		if s.acts(k) {
			return 0
		}
	}
	return 0
}

func fitsTopK(k int) int {
	if k > gpu.MaxTopK {
		return 0
	}
	return k
}

// acts reports whether sampler k can change the candidates of a non-greedy chain (temperature
// always counts: it reorders ties and dynamic temperature reads every candidate).
func (s *sampler) acts(k samplerKind) bool {
	p := s.p
	switch k {
	case samplerPenalties:
		return s.penaltiesOn()
	case samplerDRY:
		return s.dryOn()
	case samplerTopNSigma:
		return p.TopNSigma > 0
	case samplerTypicalP:
		return p.TypicalP < 1
	case samplerTopP:
		return p.TopP < 1
	case samplerMinP:
		return p.MinP > 0
	case samplerXTC:
		return s.xtcOn()
	case samplerTemperature:
		return true
	}
	return false // infill has no effect here
}

// candidatesNeeded is the generation's need (see sampler.candidatesNeeded); a grammar may
// reject every candidate and resample from the whole row, so it needs the row, as does a
// reasoning budget, whose forced token need not be among the best (and may start forcing
// within a batch of draft tokens).
func (g *generation) candidatesNeeded() int {
	if g.gram != nil || g.budget != nil {
		return 0
	}
	return g.smp.candidatesNeeded()
}

// batchTopK is how many candidates per logits row the next batch reads back: the most any
// generation needs, or 0 (whole rows) when one needs its whole row or Config.Readback rules
// candidates out.
func (e *Engine) batchTopK() int {
	if !e.candidates {
		return 0
	}
	k := 0
	for _, s := range e.slots {
		if s.gen == nil {
			continue
		}
		n := s.gen.candidatesNeeded()
		if n == 0 {
			return 0
		}
		k = max(k, n)
	}
	if k > e.model.MaxTopK() {
		return 0
	}
	return k
}

// run runs a batch and returns its logits rows: the GPU's candidates when batchTopK allows,
// else the full rows.
func (e *Engine) run(b model.Batch) ([]logitsRow, error) {
	if k := e.batchTopK(); k > 0 && len(b.Logits) > 0 {
		cands, err := e.model.ForwardTopK(e.kv, b, k)
		if err != nil {
			return nil, err
		}
		e.candidatePasses.Add(1)
		rows := make([]logitsRow, len(cands))
		for i := range cands {
			rows[i].top = &cands[i]
		}
		return rows, nil
	}
	full, err := e.model.ForwardBatch(e.kv, b)
	if err != nil {
		return nil, err
	}
	rows := make([]logitsRow, len(full))
	for i, l := range full {
		rows[i].full = l
	}
	return rows, nil
}

// CandidatePasses is how many forward passes so far read back each row's best candidates
// instead of its logits; safe for concurrent use.
func (e *Engine) CandidatePasses() int64 { return e.candidatePasses.Load() }

// sampleRow runs the chain over a row and draws a token.
func (s *sampler) sampleRow(r logitsRow) int32 {
	if r.top != nil {
		return s.sampleTop(r.top)
	}
	return s.sample(r.full)
}

// sampleTop is sample on a row's best candidates (candidatesNeeded of them at least): the
// chain starts from the candidates sorted as top_k leaves them.
func (s *sampler) sampleTop(c *model.Candidates) int32 {
	s.last, s.top, s.probsOK = nil, c, false
	if s.fastGreedy() {
		s.picked = c.IDs[0]
		return s.picked
	}
	cand := s.cand[:0]
	for i, id := range c.IDs {
		cand = append(cand, candidate{id: id, logit: c.Logits[i]})
	}
	s.cand, s.sorted, s.idOrder = cand, false, false
	s.sort()
	return s.runChain(len(c.IDs))
}

// topProbs is the candidates of the last sampleTop with their full-softmax probabilities,
// most likely first.
func (s *sampler) topProbs() []candidate {
	c := make([]candidate, len(s.top.IDs))
	for i, id := range s.top.IDs {
		c[i] = candidate{id: id, logit: s.top.Logits[i], p: float32(s.top.Prob(i))}
	}
	slices.SortFunc(c, byLogit) // already in this order, from the GPU
	return c
}
