package engine

import (
	"container/heap"
	"math"
	"slices"
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
// [Temperature-Range (at least 0), Temperature+Range].
func (s *sampler) applyTempExt() {
	delta := float64(s.p.DynatempRange)
	if delta <= 0 {
		s.applyTemp(s.p.Temperature)
		return
	}
	if len(s.cand) <= 1 {
		return
	}
	t := float64(s.p.Temperature)
	minT, maxT := max(0, t-delta), t+delta
	maxEntropy := math.Log(float64(len(s.cand)))
	s.softmax()
	entropy := 0.0
	for _, x := range s.cand {
		if x.p > 0 {
			entropy -= x.p * math.Log(x.p)
		}
	}
	dyn := minT + (maxT-minT)*math.Pow(entropy/maxEntropy, float64(s.p.DynatempExponent))
	// A temperature of 0 would divide by zero; treat it as greedy, its limit.
	s.applyTemp(float32(dyn))
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

// applyTopP keeps the smallest prefix whose probability reaches TopP (and at least MinKeep).
func (s *sampler) applyTopP() {
	p := float64(s.p.TopP)
	if p >= 1 {
		return
	}
	s.softmax()
	cum := 0.0
	for i, x := range s.cand {
		cum += x.p
		if cum >= p && i+1 >= s.minKeep() {
			s.cand = s.cand[:i+1]
			return
		}
	}
}

// applyMinP drops candidates whose logit is below the top logit + ln(MinP), i.e. whose
// probability is below MinP times the top one, keeping at least MinKeep.
func (s *sampler) applyMinP() {
	if s.p.MinP <= 0 || len(s.cand) == 0 {
		return
	}
	s.sort()
	limit := float64(s.cand[0].logit) + math.Log(float64(s.p.MinP))
	n := 1
	for n < len(s.cand) && (float64(s.cand[n].logit) >= limit || n < s.minKeep()) {
		n++
	}
	s.cand = s.cand[:n]
}

// applyTypical is locally typical sampling: candidates ordered by how far their surprise
// (-ln p) is from the entropy, keeping the first whose mass exceeds TypicalP.
func (s *sampler) applyTypical() {
	p := float64(s.p.TypicalP)
	if p >= 1 {
		return
	}
	s.softmax()
	entropy := 0.0
	for _, x := range s.cand {
		if x.p > 0 {
			entropy -= x.p * math.Log(x.p)
		}
	}
	shift := func(x candidate) float64 { return math.Abs(-math.Log(x.p) - entropy) }
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
	cum := 0.0
	for i, x := range s.cand {
		cum += x.p
		if cum > p && (s.minKeep() == 0 || i >= s.minKeep()-1) {
			s.cand = s.cand[:i+1]
			return
		}
	}
}

// applyTopNSigma keeps candidates whose logit is within TopNSigma standard deviations (of the
// finite logits) of the largest; <= 0 is off.
func (s *sampler) applyTopNSigma() {
	n := float64(s.p.TopNSigma)
	if n <= 0 || len(s.cand) <= 1 {
		return
	}
	maxL, sum, valid := math.Inf(-1), 0.0, 0
	for _, x := range s.cand {
		l := float64(x.logit)
		if !math.IsInf(l, -1) {
			sum += l
			valid++
		}
		maxL = max(maxL, l)
	}
	mean := sum / float64(max(valid, 1))
	acc := 0.0
	for _, x := range s.cand {
		if l := float64(x.logit); !math.IsInf(l, -1) {
			acc += (l - mean) * (l - mean)
		}
	}
	std := math.Sqrt(acc / float64(max(valid, 1)))
	for i := range s.cand {
		if float64(s.cand[i].logit) < maxL-n*std {
			s.cand[i].logit = float32(math.Inf(-1))
		}
	}
	s.dropBanned()
}

// xtcOn reports whether XTC can act.
func (s *sampler) xtcOn() bool { return s.p.XTCProbability > 0 && s.p.XTCThreshold <= 0.5 }

// applyXTC ("exclude top choices"): with probability XTCProbability, removes every candidate
// at or above XTCThreshold except the least likely of them.
func (s *sampler) applyXTC() {
	if !s.xtcOn() || len(s.cand) < 2 {
		return
	}
	if s.xtc.Float32() > s.p.XTCProbability {
		return
	}
	s.softmax()
	last := 0
	for i, x := range s.cand {
		if x.p < float64(s.p.XTCThreshold) {
			break
		}
		last = i
	}
	if len(s.cand)-last >= s.minKeep() && last > 0 {
		s.cand = s.cand[last:]
	}
}

// mirostatV1 is Mirostat 1.0 (m = 100): it estimates the Zipf exponent from the top
// candidates, keeps the top k that target surprise mu, draws, and moves mu by eta times the
// error of the observed surprise against tau.
func (s *sampler) mirostatV1(nVocab int) int32 {
	s.softmax()
	const m = 100
	sumTB, sumTT := 0.0, 0.0
	for i := 0; i < m-1 && i < len(s.cand)-1; i++ {
		t := math.Log(float64(i+2) / float64(i+1))
		b := math.Log(s.cand[i].p / s.cand[i+1].p)
		sumTB += t * b
		sumTT += t * t
	}
	sHat := sumTB / sumTT
	eps := sHat - 1
	k := math.Pow(eps*math.Pow(2, s.mu)/(1-math.Pow(float64(nVocab), -eps)), 1/sHat)
	kk := len(s.cand)
	if k < float64(kk) { // also false for NaN
		kk = max(int(k), 1)
	}
	s.applyTopK(kk)
	return s.mirostatDraw()
}

// mirostatV2 is Mirostat 2.0: it keeps the candidates whose surprise -log2 p is at most mu
// (at least one), draws, and updates mu.
func (s *sampler) mirostatV2() int32 {
	s.softmax()
	n := 0
	for n < len(s.cand) && -math.Log2(s.cand[n].p) <= s.mu {
		n++
	}
	s.cand = s.cand[:max(n, 1)]
	return s.mirostatDraw()
}

// mirostatDraw draws from the candidates and applies Mirostat's mu update.
func (s *sampler) mirostatDraw() int32 {
	id := s.draw()
	for _, x := range s.cand {
		if x.id == id {
			s.mu -= float64(s.p.MirostatEta) * (-math.Log2(x.p) - float64(s.p.MirostatTau))
			break
		}
	}
	return id
}
