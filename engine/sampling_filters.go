package engine

import (
	"container/heap"
	"math"
	"slices"

	"github.com/wgpu-llama/wgpu-llama/engine/mt19937"
)

// applyLogitBias adds Params.LogitBias to the logits (llama_sampler_logit_bias); a -Inf bias
// bans the token.
func (s *sampler) applyLogitBias() {
	if len(s.p.LogitBias) == 0 {
		return
	}
	for _, b := range s.p.LogitBias {
		if b.Token >= 0 && int(b.Token) < len(s.cand) {
			s.cand[b.Token].logit += b.Bias // still in id order: bias runs first
		}
	}
	s.dropBanned()
}

// applyTemp is llama.cpp's plain temperature: logits divided by t, or at t <= 0 only the first
// largest logit kept.
func (s *sampler) applyTemp(t float32) {
	if t > 0 {
		for i := range s.cand {
			s.cand[i].logit /= t
		}
		return
	}
	best := 0
	for i, x := range s.cand {
		if x.logit > s.cand[best].logit {
			best = i
		}
	}
	s.cand = append(s.cand[:0], s.cand[best])
	s.sorted, s.idOrder = true, false
}

// applyTempExt is llama.cpp's temp_ext: dynamic temperature when DynatempRange > 0, else plain.
// The dynamic temperature is min + (max-min) * (entropy/max_entropy)^exponent over
// [Temperature-Range (at least 0), Temperature+Range], computed in float; the probabilities
// after it are recomputed in double, as llama.cpp does.
func (s *sampler) applyTempExt() {
	delta := s.p.DynatempRange
	if delta <= 0 {
		s.applyTemp(s.p.Temperature)
		return
	}
	if len(s.cand) <= 1 {
		return
	}
	t := s.p.Temperature
	minT, maxT := max(0, t-delta), t+delta
	maxEntropy := -logf(1 / float32(len(s.cand)))
	s.softmax(true)
	var entropy float32
	for _, x := range s.cand {
		if x.p > 0 {
			entropy -= x.p * logf(x.p)
		}
	}
	dyn := minT + (maxT-minT)*powf(entropy/maxEntropy, s.p.DynatempExponent)
	s.applyTemp(dyn)
	c := s.cand
	maxL := float64(c[0].logit)
	sum := 0.0
	for i := range c {
		p := math.Exp(float64(c[i].logit) - maxL)
		c[i].p = float32(p)
		sum += p
	}
	for i := range c {
		c[i].p = float32(float64(c[i].p) / sum)
	}
}

// applyTopK keeps the k most likely candidates; k <= 0 keeps all.
func (s *sampler) applyTopK(k int) {
	if k <= 0 || k >= len(s.cand) {
		if k > 0 {
			s.sort()
		}
		return
	}
	if !s.sorted && k*8 < len(s.cand) {
		s.selectTop(k)
	}
	s.sort()
	s.cand = s.cand[:k]
}

// minHeap holds the best k candidates seen, the worst at the root.
type minHeap []candidate

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return byLogit(h[i], h[j]) > 0 }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(candidate)) }
func (h *minHeap) Pop() any          { old := *h; x := old[len(old)-1]; *h = old[:len(old)-1]; return x }

// selectTop moves the k best candidates to the front (unsorted) and drops the rest, in
// O(n log k) instead of sorting the whole vocabulary.
func (s *sampler) selectTop(k int) {
	h := make(minHeap, 0, k)
	for _, x := range s.cand {
		if len(h) < k {
			heap.Push(&h, x)
		} else if byLogit(x, h[0]) < 0 {
			h[0] = x
			heap.Fix(&h, 0)
		}
	}
	s.cand = append(s.cand[:0], h...)
	s.sorted, s.idOrder = false, false
}

// applyTopP keeps the smallest prefix, by descending logit, whose probability (the float
// softmax of the candidates it is given) reaches TopP, and at least MinKeep.
func (s *sampler) applyTopP() {
	p := s.p.TopP
	if p >= 1 {
		return
	}
	s.softmax(false)
	s.sort()
	var cum float32
	for i, x := range s.cand {
		cum += x.p
		if cum >= p && i+1 >= s.minKeep() {
			s.cand = s.cand[:i+1]
			return
		}
	}
}

// applyMinP drops candidates whose logit is below the top logit + ln(MinP), i.e. whose
// probability is below MinP times the top one, keeping at least MinKeep. Unsorted
// candidates keep their order when that leaves at least MinKeep; otherwise they are sorted
// and cut, as llama.cpp does.
func (s *sampler) applyMinP() {
	if s.p.MinP <= 0 || len(s.cand) == 0 {
		return
	}
	if !s.sorted {
		minLogit := float32(-math.MaxFloat32)
		for _, x := range s.cand {
			minLogit = max(minLogit, x.logit)
		}
		minLogit += logf(s.p.MinP)
		n := 0
		for _, x := range s.cand {
			if x.logit >= minLogit {
				n++
			}
		}
		if n > 0 && n >= s.minKeep() {
			kept := s.cand[:0]
			for _, x := range s.cand {
				if x.logit >= minLogit {
					kept = append(kept, x)
				}
			}
			s.idOrder = s.idOrder && len(kept) == len(s.cand)
			s.cand = kept
			return
		}
	}
	s.sort()
	minLogit := s.cand[0].logit + logf(s.p.MinP)
	n := 1
	for n < len(s.cand) && (s.cand[n].logit >= minLogit || n < s.minKeep()) {
		n++
	}
	s.cand = s.cand[:n]
}

// applyTypical is locally typical sampling: candidates ordered by how far their surprise
// (-ln p) is from the entropy, keeping the first whose mass exceeds TypicalP; in float, and
// leaving the candidates in that order.
func (s *sampler) applyTypical() {
	p := s.p.TypicalP
	if p >= 1 {
		return
	}
	s.softmax(true)
	var entropy float32
	for _, x := range s.cand {
		entropy += -x.p * logf(x.p)
	}
	shift := func(x candidate) float32 { return float32(math.Abs(float64(-logf(x.p) - entropy))) }
	slices.SortStableFunc(s.cand, func(a, b candidate) int {
		sa, sb := shift(a), shift(b)
		switch {
		case sa < sb:
			return -1
		case sa > sb:
			return 1
		}
		return 0
	})
	s.sorted = false
	var cum float32
	for i, x := range s.cand {
		cum += x.p
		if cum > p && (s.minKeep() == 0 || i >= s.minKeep()-1) {
			s.cand = s.cand[:i+1]
			return
		}
	}
}

// applyTopNSigma keeps candidates whose logit is within TopNSigma standard deviations (of the
// finite logits) of the largest; <= 0 is off. The rest are masked, then dropped, and the
// candidates left sorted, as llama.cpp's softmax leaves them.
func (s *sampler) applyTopNSigma() {
	n := s.p.TopNSigma
	if n <= 0 || len(s.cand) <= 1 {
		return
	}
	inf := float32(math.Inf(-1))
	maxL := s.cand[0].logit
	var sum float32
	valid := 0
	for _, x := range s.cand {
		if x.logit != inf {
			maxL = max(maxL, x.logit)
			sum += x.logit
			valid++
		}
	}
	var mean, std float32
	if valid > 0 {
		mean = sum / float32(valid)
	}
	var acc float32
	for _, x := range s.cand {
		if x.logit != inf {
			d := float64(x.logit - mean)
			acc = float32(float64(acc) + d*d) // pow(float, 2) is a double in C++
		}
	}
	if valid > 0 {
		std = float32(math.Sqrt(float64(acc / float32(valid))))
	}
	limit := maxL - n*std
	for i := range s.cand {
		if s.cand[i].logit < limit {
			s.cand[i].logit = inf
		}
	}
	s.dropBanned()
	s.softmax(true)
}

// xtcOn reports whether XTC can act.
func (s *sampler) xtcOn() bool { return s.p.XTCProbability > 0 && s.p.XTCThreshold <= 0.5 }

// applyXTC ("exclude top choices"): with probability XTCProbability (one
// uniform_real_distribution<float> draw of its own generator), removes every candidate at or
// above XTCThreshold except the least likely of them.
func (s *sampler) applyXTC() {
	if !s.xtcOn() || len(s.cand) < 2 {
		return
	}
	if mt19937.UniformFloat32(s.xtc, 0, 1) > s.p.XTCProbability {
		return
	}
	s.softmax(true)
	last := 0
	for i, x := range s.cand {
		if x.p < s.p.XTCThreshold {
			break
		}
		last = i
	}
	if len(s.cand)-last >= s.minKeep() && last > 0 {
		s.cand = s.cand[last:]
	}
}
