package engine

import (
	"math"
	"testing"
)

func TestGreedy(t *testing.T) {
	s := newSampler(Params{Temperature: 0})
	if got := s.sample([]float32{1, 5, 5, -2}); got != 1 {
		t.Errorf("greedy picked %d, want the first maximum 1", got)
	}
}

// TestSamplerDistribution draws many samples and compares the frequencies with the
// distribution computed by hand for top_k=3, top_p=0.9, min_p=0.05, temperature 0.5.
func TestSamplerDistribution(t *testing.T) {
	logits := []float32{2, 1, 0, 3, -1}
	// top_k 3 keeps ids 3 (3), 0 (2), 1 (1). softmax(3,2,1) = .665, .245, .090: top_p 0.9
	// keeps 3 and 0 (cum .910 >= .9), min_p keeps both. Temperature 0.5: softmax(6, 4) =
	// 1/(1+e^-2) = .8808, .1192.
	want := map[int32]float64{3: 1 / (1 + math.Exp(-2)), 0: 1 - 1/(1+math.Exp(-2))}
	s := newSampler(Params{Temperature: 0.5, TopK: 3, TopP: 0.9, MinP: 0.05, Seed: 7})
	const n = 40000
	counts := map[int32]int{}
	for i := 0; i < n; i++ {
		counts[s.sample(logits)]++
	}
	for id, c := range counts {
		p, ok := want[id]
		if !ok {
			t.Fatalf("sampled token %d, which the chain excludes", id)
		}
		if got := float64(c) / n; math.Abs(got-p) > 0.01 {
			t.Errorf("token %d: frequency %.4f, want %.4f", id, got, p)
		}
	}
}

func TestMinP(t *testing.T) {
	// p = softmax(0, -1, -5) = .7275, .2676, .0049; min_p 0.1 drops id 2 (.0049 < .07275).
	s := newSampler(Params{Temperature: 1, TopP: 1, MinP: 0.1, Seed: 1})
	for i := 0; i < 2000; i++ {
		if s.sample([]float32{0, -1, -5}) == 2 {
			t.Fatal("min_p kept a token below the threshold")
		}
	}
}

func TestSeedReproducible(t *testing.T) {
	logits := []float32{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}
	a := newSampler(Params{Temperature: 1, TopP: 1, Seed: 42})
	b := newSampler(Params{Temperature: 1, TopP: 1, Seed: 42})
	for i := 0; i < 100; i++ {
		if a.sample(logits) != b.sample(logits) {
			t.Fatal("same seed gave different samples")
		}
	}
}
