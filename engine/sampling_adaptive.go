package engine

import (
	"math"
	"slices"

	"github.com/wgpu-llama/wgpu-llama/engine/mt19937"
)

// adaptive-p's probability transform: logits peak at 5 where a token's probability equals
// the adapted target and fall off quadratically, then linearly, over a width of 0.3.
const (
	adaptiveWidth     float32 = 0.3
	adaptivePeak      float32 = 5
	adaptiveSharpness float32 = 10
)

// adaptiveState is llama.cpp's adaptive-p sampler: it keeps an exponential moving average of
// the original probabilities of the tokens it picked, and draws each token from a
// distribution reshaped to favour probabilities near a target adapted from that average.
type adaptiveState struct {
	target, decay            float32
	weightedSum, totalWeight float32
	orig                     []float32 // the candidates' probabilities before the transform
	pendingID                int32     // the token last picked, until accepted (-1: none)
	pendingIdx               int
}

func newAdaptiveState(target, decay float32) *adaptiveState {
	decay = min(max(decay, 0), 0.99)
	return &adaptiveState{
		target: target, decay: decay,
		weightedSum: target / (1 - decay), totalWeight: 1 / (1 - decay),
		pendingID: -1,
	}
}

// adaptiveOn reports whether the chain ends in adaptive-p instead of the dist draw.
func (s *sampler) adaptiveOn() bool { return slices.Contains(s.chain, samplerAdaptiveP) }

// adaptiveDraw is llama_sampler_adaptive_p_apply: the float softmax of the candidates in
// their order; with a negative target a std::discrete_distribution draw from it, else the
// transform and a draw from the softmax of the transformed logits.
func (s *sampler) adaptiveDraw() int32 {
	a := s.adaptive
	s.softmax(false)
	s.probsOK = true
	if a.target < 0 {
		return s.cand[s.discreteDraw()].id
	}
	a.orig = a.orig[:0]
	for _, x := range s.cand {
		a.orig = append(a.orig, x.p)
	}
	target := min(max(a.target, 0), 1)
	adapted := target
	if a.totalWeight != 0 {
		adapted = 2*target - a.weightedSum/a.totalWeight
	}
	adapted = min(max(adapted, 0), 1)
	inf := float32(math.Inf(-1))
	for i := range s.cand {
		if s.cand[i].logit == inf {
			continue
		}
		d := float32(math.Abs(float64((s.cand[i].p - adapted) * (1 / adaptiveWidth))))
		s.cand[i].logit = adaptivePeak - adaptiveSharpness*d*d/(1+d)
	}
	s.sorted = false
	s.softmax(false)
	i := s.discreteDraw()
	a.pendingID, a.pendingIdx = s.cand[i].id, i
	return s.cand[i].id
}

// accept moves the average when the accepted token is the one adaptive-p picked (a token
// forced or picked otherwise leaves it), as llama_sampler_adaptive_p_accept.
func (a *adaptiveState) accept(id int32) {
	if a.pendingID == id && a.pendingIdx < len(a.orig) {
		a.weightedSum = a.orig[a.pendingIdx] + a.decay*a.weightedSum
		a.totalWeight = 1 + a.decay*a.totalWeight
	}
	a.pendingID, a.pendingIdx = -1, -1
}

// discreteDraw draws a candidate index with std::discrete_distribution over their p.
func (s *sampler) discreteDraw() int {
	weights := make([]float32, len(s.cand))
	for i, x := range s.cand {
		weights[i] = x.p
	}
	return mt19937.Discrete(s.rng, weights)
}
