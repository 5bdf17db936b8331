package engine

import "math"

// mirostatV1 is Mirostat 1.0 (m = 100), in float as llama.cpp computes it: it estimates the
// Zipf exponent from the top candidates, keeps the top k that target surprise mu, draws, and
// moves mu by eta times the error of the observed surprise against tau.
func (s *sampler) mirostatV1(nVocab int) int32 {
	s.softmax(true)
	const m = 100
	var sumTB, sumTT float32
	for i := 0; i < m-1 && i < len(s.cand)-1; i++ {
		t := logf(float32(i+2) / float32(i+1))
		b := logf(s.cand[i].p / s.cand[i+1].p)
		sumTB += t * b
		sumTT += t * t
	}
	sHat := sumTB / sumTT
	eps := sHat - 1
	k := powf(eps*powf(2, s.mu)/(1-powf(float32(nVocab), -eps)), 1/sHat)
	s.applyTopK(max(cInt(k), 1))
	s.softmax(true)
	return s.mirostatDraw()
}

// cInt is C's float-to-int conversion as x86 does it: truncation, and INT_MIN for NaN or a
// value out of range (which llama.cpp's max(int(k), 1) then turns into 1).
func cInt(x float32) int {
	if x != x || x >= math.MaxInt32+1 || x < math.MinInt32 {
		return math.MinInt32
	}
	return int(x)
}

// mirostatV2 is Mirostat 2.0: it keeps the candidates whose surprise -log2 p is at most mu
// (at least one), renormalizes, draws, and updates mu.
func (s *sampler) mirostatV2() int32 {
	s.softmax(true)
	n := 0
	for n < len(s.cand) && -log2f(s.cand[n].p) <= s.mu {
		n++
	}
	s.cand = s.cand[:max(n, 1)]
	s.softmax(true)
	return s.mirostatDraw()
}

// mirostatDraw draws from the candidates' probabilities with std::discrete_distribution, as
// llama.cpp's Mirostat samplers do, and applies Mirostat's mu update.
func (s *sampler) mirostatDraw() int32 {
	i := s.discreteDraw()
	s.probsOK = true
	surprise := -log2f(s.cand[i].p)
	s.mu -= s.p.MirostatEta * (surprise - s.p.MirostatTau)
	return s.cand[i].id
}
