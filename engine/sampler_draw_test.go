package engine

import (
	"math"
	"slices"
	"testing"
)

// The draws of std::mt19937 seeded with 5489 (see engine/mt19937): as
// uniform_real_distribution<double>, .1355, .8350, .9689, .2210; as
// uniform_real_distribution<float>, .8147, .1355, .9058, .8350.

// l253 are logits whose softmax is .2, .5, .3, in id order.
var l253 = []float32{float32(math.Log(.2)), float32(math.Log(.5)), float32(math.Log(.3))}

// TestDistDrawByHand: llama.cpp's dist sampler draws over the candidates in their current
// order (here the vocabulary's: temperature does not sort), cumulative .2, .7, 1: the draws
// .1355, .8350, .9689, .2210 pick ids 0, 2, 2, 1. Sorted (.5, .3, .2) they would pick 1, 0, 0, 1.
func TestDistDrawByHand(t *testing.T) {
	s := newSampler(testParams(func(p *Params) { p.Samplers, p.Temperature, p.Seed = []string{"temperature"}, 1, 5489 }), nil, nil)
	var got []int32
	for range 4 {
		got = append(got, s.sample(l253))
	}
	if want := []int32{0, 2, 2, 1}; !slices.Equal(got, want) {
		t.Errorf("picked %v, want %v", got, want)
	}
	// The final probabilities are the softmax, in the same order.
	for i, want := range []float32{.2, .5, .3} {
		if c := s.cand[i]; c.id != int32(i) || math.Abs(float64(c.p-want)) > 1e-6 {
			t.Errorf("candidate %d = %+v, want id %d p %v", i, c, i, want)
		}
	}
}

// TestSingleCandidateDoesNotDraw: one candidate left (top_k 1) is picked without a draw, so
// the generator's next draw is still its first.
func TestSingleCandidateDoesNotDraw(t *testing.T) {
	s := newSampler(testParams(func(p *Params) {
		p.Samplers, p.TopK, p.Temperature, p.Seed = []string{"top_k", "temperature"}, 1, 1, 5489
	}), nil, nil)
	if got := s.sample(l253); got != 1 {
		t.Fatalf("top_k 1 picked %d, want 1", got)
	}
	s.p.TopK = 3
	if got := s.sample(l253); got != 1 { // sorted by top_k: .5, .3, .2; .1355 picks the first
		t.Errorf("then picked %d, want 1 (the first draw, .1355)", got)
	}
}

// TestMinPKeepsOrder: min_p on unsorted candidates filters them in place, as llama.cpp does,
// so the draw still runs in id order: with min_p .5 (keeping p >= .25: ids 1 and 2), the
// cumulative sums are .625, 1, and .1355, .8350 pick ids 1, 2.
func TestMinPKeepsOrder(t *testing.T) {
	s := newSampler(testParams(func(p *Params) {
		p.Samplers, p.MinP, p.Temperature, p.Seed = []string{"min_p", "temperature"}, .5, 1, 5489
	}), nil, nil)
	if a, b := s.sample(l253), s.sample(l253); a != 1 || b != 2 {
		t.Errorf("picked %d, %d; want 1, 2", a, b)
	}
	if s.sorted || s.cand[0].id != 1 || s.cand[1].id != 2 {
		t.Errorf("candidates %+v (sorted %v), want ids 1, 2 unsorted", s.cand, s.sorted)
	}
	// MinKeep 3 cannot be met by filtering: llama.cpp sorts and keeps 3 (.5, .3, .2), and
	// the third draw, .9689, picks the last of them.
	s.p.MinKeep = 3
	if got := s.sample(l253); got != 0 || !s.sorted {
		t.Errorf("min_keep 3 picked %d (sorted %v), want 0 from sorted candidates", got, s.sorted)
	}
}

// TestXTCDrawsFloat: XTC draws a uniform_real_distribution<float> from its own generator, one
// 32-bit output per draw: .8147 > .5 leaves the candidates alone, .1355 removes .5 (keeping
// .3, the least likely at or above .25). The dist draw has its own generator: .1355 picks
// id 0 (cumulative .2, .7, 1 in id order), then .8350 picks id 0 again (.3, .2 sorted by XTC:
// cumulative .6, 1).
func TestXTCDrawsFloat(t *testing.T) {
	s := newSampler(testParams(func(p *Params) {
		p.Samplers, p.XTCProbability, p.XTCThreshold, p.Temperature, p.Seed = []string{"xtc", "temperature"}, .5, .25, 1, 5489
	}), nil, nil)
	if got := s.sample(l253); got != 0 || len(s.cand) != 3 {
		t.Errorf("first: picked %d from %d candidates, want 0 from all 3 (XTC skipped, id order)", got, len(s.cand))
	}
	if got := s.sample(l253); got != 0 || len(s.cand) != 2 || s.cand[0].id != 2 {
		t.Errorf("second: picked %d from %+v, want 0 from ids 2, 0", got, s.cand)
	}
}

// TestGreedyXTCAfterTopK: a greedy chain still runs top_k before XTC, whose threshold is
// measured on what top_k leaves: over logits 3, 2.9 and eighteen 0s, top_k 2 gives .525, .475,
// both at least .4, so XTC removes the first and temperature 0 picks id 1. Over the whole
// vocabulary the top token would have only .357 and be kept.
func TestGreedyXTCAfterTopK(t *testing.T) {
	logits := make([]float32, 20)
	logits[0], logits[1] = 3, 2.9
	s := newSampler(testParams(func(p *Params) {
		p.Samplers, p.TopK, p.XTCProbability, p.XTCThreshold, p.Temperature = []string{"top_k", "xtc", "temperature"}, 2, 1, .4, 0
	}), nil, nil)
	if got := s.sample(logits); got != 1 {
		t.Errorf("picked %d, want 1", got)
	}
}

// TestAdaptiveP: adaptive-p, named anywhere in the chain, replaces the dist draw. With target
// .3 (decay .9: average 3/10, adapted target 2*.3 - .3 = .3) the probabilities .2, .5, .3 are
// reshaped: |p-.3|/.3 = 1/3, 2/3, 0 give logits 5 - 10d²/(1+d) = 4.1667, 2.3333, 5, whose
// softmax is .2889, .0462, .6649; the discrete draw .1355 picks id 0. Accepting it moves the
// average to (.2 + .9*3)/(1 + .9*10) = 2.9/10: target .31 reshapes to .2581, .0592, .6827, and
// .8350 picks id 2.
func TestAdaptiveP(t *testing.T) {
	s := newSampler(testParams(func(p *Params) {
		p.Samplers, p.Temperature, p.Seed = []string{"adaptive_p", "temperature"}, 1, 5489
		p.AdaptiveTarget, p.AdaptiveDecay = .3, .9
	}), nil, nil)
	check := func(step int, wantID int32, want []float32) {
		t.Helper()
		got := s.sample(l253)
		if got != wantID {
			t.Errorf("step %d: picked %d, want %d", step, got, wantID)
		}
		for i, w := range want {
			if c := s.cand[i]; c.id != int32(i) || math.Abs(float64(c.p-w)) > 1e-4 {
				t.Errorf("step %d: candidate %d = %+v, want p %v", step, i, c, w)
			}
		}
		s.accept(got)
	}
	check(1, 0, []float32{.2889, .0462, .6649})
	check(2, 2, []float32{.2581, .0592, .6827})
	if a := s.adaptive; math.Abs(float64(a.weightedSum)-2.91) > 1e-5 || math.Abs(float64(a.totalWeight)-10) > 1e-5 {
		t.Errorf("average %v / %v, want 2.91 / 10", a.weightedSum, a.totalWeight)
	}

	// A negative target draws from the softmax unchanged, in the candidates' order (cumulative
	// .2, .7, 1): .1355, .8350 pick ids 0, 2.
	s = newSampler(testParams(func(p *Params) { p.Samplers, p.Temperature, p.Seed = []string{"temperature", "adaptive-p"}, 1, 5489 }), nil, nil)
	if a, b := s.sample(l253), s.sample(l253); a != 0 || b != 2 {
		t.Errorf("target -1 picked %d, %d; want 0, 2", a, b)
	}
}
