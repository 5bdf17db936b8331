package engine

import (
	"math"
	"testing"
)

// testParams is DefaultParams with a fixed seed, changed by f.
func testParams(f func(p *Params)) Params {
	p := DefaultParams()
	p.Seed = 1
	if f != nil {
		f(&p)
	}
	return p
}

// chainDist runs the chain once and returns the final distribution over the survivors.
func chainDist(p Params, hist []int32, piece func(int32) string, logits []float32) map[int32]float64 {
	s := newSampler(p, hist, piece)
	s.sample(logits)
	out := map[int32]float64{}
	for _, c := range s.cand {
		out[c.id] = float64(c.p)
	}
	return out
}

func checkDist(t *testing.T, got, want map[int32]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("survivors %v, want %v", got, want)
	}
	for id, p := range want {
		if g, ok := got[id]; !ok || math.Abs(g-p) > 1e-3 {
			t.Errorf("token %d: p %.4f (present %v), want %.4f", id, g, ok, p)
		}
	}
}

// l532 are logits whose softmax is exactly .5, .3, .2.
var l532 = []float32{float32(math.Log(.5)), float32(math.Log(.3)), float32(math.Log(.2))}

func TestSamplersByHand(t *testing.T) {
	inf := float32(math.Inf(1))
	tests := []struct {
		name   string
		set    func(p *Params)
		hist   []int32
		logits []float32
		want   map[int32]float64
	}{
		// Keeps logits 3 and 2: 1/(1+e^-1) = .7311, .2689.
		{"top_k", func(p *Params) { p.Samplers = []string{"top_k"}; p.TopK = 2 },
			nil, []float32{1, 3, 2, 0}, map[int32]float64{1: .7311, 2: .2689}},
		// cum .5 < .7, .8 >= .7: keeps .5, .3 -> .625, .375.
		{"top_p", func(p *Params) { p.Samplers = []string{"nucleus"}; p.TopP = 0.7 },
			nil, l532, map[int32]float64{0: .625, 1: .375}},
		// MinKeep 3 overrides top_p's cut.
		{"top_p min_keep", func(p *Params) { p.Samplers = []string{"top_p"}; p.TopP = 0.7; p.MinKeep = 3 },
			nil, l532, map[int32]float64{0: .5, 1: .3, 2: .2}},
		// Threshold .5*.5 = .25 keeps .5 and .3.
		{"min_p", func(p *Params) { p.Samplers = []string{"min-p"}; p.MinP = 0.5 },
			nil, l532, map[int32]float64{0: .625, 1: .375}},
		// H = 1.0297; |surprise-H|: .3366 (.5), .1743 (.3), .5797 (.2). Order .3, .5: cum .3
		// is not > .5, .8 is: keeps .3 and .5 -> .375, .625.
		{"typical", func(p *Params) { p.Samplers = []string{"typical"}; p.TypicalP = 0.5 },
			nil, l532, map[int32]float64{0: .625, 1: .375}},
		// mean 1.5, std sqrt(1.25) = 1.118: keeps logits >= 3-1.118 = 1.882, i.e. 3 and 2.
		{"top_n_sigma", func(p *Params) { p.Samplers = []string{"top-n-sigma"}; p.TopNSigma = 1 },
			nil, []float32{0, 1, 2, 3}, map[int32]float64{3: .7311, 2: .2689}},
		// .5 and .3 reach .25: all but the last of them (.3) go -> .3, .2 -> .6, .4.
		{"xtc", func(p *Params) { p.Samplers = []string{"xtc"}; p.XTCProbability = 1; p.XTCThreshold = 0.25 },
			nil, l532, map[int32]float64{1: .6, 2: .4}},
		// p^2 normalised: .25, .09, .04 / .38 = .6579, .2368, .1053.
		{"temperature", func(p *Params) { p.Samplers = []string{"temp"}; p.Temperature = 0.5 },
			nil, l532, map[int32]float64{0: .6579, 1: .2368, 2: .1053}},
		// H/ln3 = 1.0297/1.0986 = .9373; T = .5 + 1*.9373 = 1.4373; p^(1/T) = .6174, .4327,
		// .3264 / 1.3765 = .4485, .3143, .2371.
		{"dynatemp", func(p *Params) {
			p.Samplers = []string{"temperature"}
			p.Temperature, p.DynatempRange, p.DynatempExponent = 1, 0.5, 1
		}, nil, l532, map[int32]float64{0: .4485, 1: .3143, 2: .2371}},
		// Token 0 seen twice: 2/2 - (2*.5+.25) = -.25; token 1 once: -1*2 - .75 = -2.75; token 2
		// unseen: 1. softmax(-.25, -2.75, 1) = .2187, .0179, .7634.
		{"penalties", func(p *Params) {
			p.Samplers = []string{"penalties"}
			p.RepeatPenalty, p.FrequencyPenalty, p.PresencePenalty = 2, .5, .25
		}, []int32{0, 0, 1}, []float32{2, -1, 1}, map[int32]float64{0: .2187, 1: .0179, 2: .7634}},
		// RepeatLastN 1 sees only the last token (0): 2/2 = 1 vs 1, 1.
		{"penalties last_n", func(p *Params) {
			p.Samplers = []string{"penalties"}
			p.RepeatPenalty, p.RepeatLastN = 2, 1
		}, []int32{1, 1, 0}, []float32{2, 1, 1}, map[int32]float64{0: 1. / 3, 1: 1. / 3, 2: 1. / 3}},
		// Bias bans 0 and lifts 2 by 1: softmax(0, 1) = .2689, .7311.
		{"logit_bias", func(p *Params) {
			p.Samplers = []string{}
			p.LogitBias = []LogitBias{{0, -inf}, {2, 1}}
		}, nil, []float32{5, 0, 0}, map[int32]float64{1: .2689, 2: .7311}},
		// Order matters: top_p .6 then temperature .5 keeps .5, .3 then squares them: .25, .09
		// -> .7353, .2647 ...
		{"order top_p,temp", func(p *Params) {
			p.Samplers = []string{"top_p", "temperature"}
			p.TopP, p.Temperature = .6, .5
		}, nil, l532, map[int32]float64{0: .7353, 1: .2647}},
		// ... while temperature first gives .6579 >= .6 at once: only token 0.
		{"order temp,top_p", func(p *Params) {
			p.Samplers = []string{"temperature", "top_p"}
			p.TopP, p.Temperature = .6, .5
		}, nil, l532, map[int32]float64{0: 1}},
		// Unknown names are skipped.
		{"unknown name", func(p *Params) { p.Samplers = []string{"bogus", "top_k"}; p.TopK = 1 },
			nil, l532, map[int32]float64{0: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkDist(t, chainDist(testParams(tc.set), tc.hist, nil, tc.logits), tc.want)
		})
	}
}

func TestDRY(t *testing.T) {
	text := []string{"a", "b", "c", "\n", "d", "qa"}
	piece := func(id int32) string { return text[id] }
	const a, b, c, nl, d, qa = 0, 1, 2, 3, 4, 5
	flat := make([]float32, len(text))
	tests := []struct {
		name     string
		breakers []string
		hist     []int32
		want     map[int32]float64 // logit penalties by token
	}{
		// "a b" repeats: c, which followed it, would extend a repeat of 2: 1*2^(2-2) = 1.
		{"repeat", []string{"\n"}, []int32{a, b, c, d, a, b}, map[int32]float64{c: 1}},
		// "\n a b" repeats (3, penalty 2^1 = 2), but the newline caps it at the 2 tokens since.
		{"breaker caps", []string{"\n"}, []int32{nl, a, b, c, nl, a, b}, map[int32]float64{c: 1}},
		{"no breaker", []string{"x"}, []int32{nl, a, b, c, nl, a, b}, map[int32]float64{c: 2}},
		// The newline would extend "a b" but is itself a breaker: spared.
		{"breaker spared", []string{"\n"}, []int32{a, b, nl, a, b}, map[int32]float64{}},
		// Too short a repeat since the breaker: nothing.
		{"allowed length", []string{"\n"}, []int32{a, b, c, a, nl, b}, map[int32]float64{}},
		// "qa"+"b" spells the breaker "ab" over two tokens: "qa b d a" would repeat 4 (2^2) but
		// is capped at the 2 tokens after the breaker.
		{"multi-token breaker", []string{"ab"}, []int32{qa, b, d, a, c, qa, b, d, a}, map[int32]float64{c: 1}},
		{"multi-token no breaker", []string{"\n"}, []int32{qa, b, d, a, c, qa, b, d, a}, map[int32]float64{c: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := testParams(func(p *Params) {
				p.Samplers = []string{"dry"}
				p.DRYMultiplier, p.DRYBase, p.DRYAllowedLength = 1, 2, 2
				p.DRYSequenceBreakers = tc.breakers
			})
			got := chainDist(p, tc.hist, piece, flat)
			// Expected: p_i ∝ exp(-penalty_i).
			sum, want := 0.0, map[int32]float64{}
			for id := range text {
				want[int32(id)] = math.Exp(-tc.want[int32(id)])
				sum += want[int32(id)]
			}
			for id := range want {
				want[id] /= sum
			}
			checkDist(t, got, want)
		})
	}
}

func TestGreedy(t *testing.T) {
	inf := float32(math.Inf(1))
	tests := []struct {
		name   string
		set    func(p *Params)
		hist   []int32
		logits []float32
		want   int32
	}{
		{"first maximum", nil, nil, []float32{1, 5, 5, -2}, 1},
		// Token 1 was seen: 1.5/2 = .75 < 1, so token 0 wins.
		{"penalised", func(p *Params) { p.RepeatPenalty = 2 }, []int32{1}, []float32{1, 1.5, 0}, 0},
		{"banned", func(p *Params) { p.LogitBias = []LogitBias{{1, -inf}} }, nil, []float32{1, 5, 5, -2}, 2},
		{"n_probs path", func(p *Params) { p.NProbs = 2 }, nil, []float32{1, 5, 5, -2}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSampler(testParams(func(p *Params) {
				p.Temperature = 0
				if tc.set != nil {
					tc.set(p)
				}
			}), tc.hist, nil)
			if got := s.sample(tc.logits); got != tc.want {
				t.Errorf("greedy picked %d, want %d", got, tc.want)
			}
		})
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
	s := newSampler(testParams(func(p *Params) { p.Temperature, p.TopK, p.TopP, p.MinP, p.Seed = 0.5, 3, 0.9, 0.05, 7 }), nil, nil)
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
	s := newSampler(testParams(func(p *Params) { p.Temperature, p.TopP, p.MinP = 1, 1, 0.1 }), nil, nil)
	for i := 0; i < 2000; i++ {
		if s.sample([]float32{0, -1, -5}) == 2 {
			t.Fatal("min_p kept a token below the threshold")
		}
	}
}

func TestSeedReproducible(t *testing.T) {
	logits := []float32{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}
	p := testParams(func(p *Params) { p.Temperature, p.TopP, p.Seed, p.XTCProbability, p.XTCThreshold = 1, 1, 42, 0.5, 0.1 })
	a, b := newSampler(p, nil, nil), newSampler(p, nil, nil)
	var seqA []int32
	for i := 0; i < 100; i++ {
		x, y := a.sample(logits), b.sample(logits)
		if x != y {
			t.Fatal("same seed gave different samples")
		}
		seqA = append(seqA, x)
	}
	p.Seed = 43
	c, same := newSampler(p, nil, nil), true
	for i := 0; i < 100; i++ {
		same = same && c.sample(logits) == seqA[i]
	}
	if same {
		t.Error("a different seed gave the same 100 samples")
	}
}

func TestMirostat(t *testing.T) {
	tests := []struct {
		name    string
		version int
		want    map[int32]float64 // survivors before the draw
	}{
		// mu = 2*tau = 1.5; surprises -log2 p = 1, 1.74, 2.32: only token 0 stays.
		{"v2", 2, map[int32]float64{0: 1}},
		// s_hat = (ln2*ln(5/3) + ln1.5*ln1.5)/(ln2^2 + ln1.5^2) = .5185/.6449 = .8040, eps =
		// -.1960, k = (eps*2^1.5/(1-3^-eps))^(1/s_hat) = 2.307^1.2438 = 2.83: top 2 -> .625, .375.
		{"v1", 1, map[int32]float64{0: .625, 1: .375}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSampler(testParams(func(p *Params) {
				p.Mirostat, p.MirostatTau, p.MirostatEta, p.Temperature = tc.version, 0.75, 0.1, 1
			}), nil, nil)
			id := s.sample(l532)
			got := map[int32]float64{}
			for _, c := range s.cand {
				got[c.id] = float64(c.p)
			}
			checkDist(t, got, tc.want)
			// mu -= eta * (surprise of the pick - tau), from 1.5.
			wantMu := 1.5 - 0.1*(-math.Log2(tc.want[id])-0.75)
			if math.Abs(float64(s.mu)-wantMu) > 1e-6 {
				t.Errorf("mu = %v after picking %d, want %v", s.mu, id, wantMu)
			}
		})
	}
}

func TestProbs(t *testing.T) {
	for _, post := range []bool{false, true} {
		s := newSampler(testParams(func(p *Params) {
			p.Samplers, p.TopK, p.Temperature, p.NProbs, p.PostSamplingProbs = []string{"top_k", "temperature"}, 2, 0.5, 2, post
		}), nil, nil)
		id := s.sample(l532)
		top, picked := s.probs(2)
		// Pre: the model's .5, .3; post: top 2 at T .5: .25, .09 / .34 = .7353, .2647.
		want := []float64{.5, .3}
		if post {
			want = []float64{.7353, .2647}
		}
		if len(top) != 2 || top[0].ID != 0 || top[1].ID != 1 ||
			math.Abs(float64(top[0].Prob)-want[0]) > 1e-3 || math.Abs(float64(top[1].Prob)-want[1]) > 1e-3 {
			t.Errorf("post %v: probs %v, want ids 0, 1 with %v", post, top, want)
		}
		if math.Abs(float64(picked)-want[id]) > 1e-3 {
			t.Errorf("post %v: picked %d with %v, want %v", post, id, picked, want[id])
		}
	}
}

func TestSamplerNames(t *testing.T) {
	if got := SamplersFromChars("edskypmxt"); len(got) != 9 || got[0] != "penalties" || got[8] != "temperature" {
		t.Errorf("SamplersFromChars = %v", got)
	}
	for _, tc := range []struct {
		in, want string
		alt, ok  bool
	}{{"top_k", "top_k", false, true}, {"top-k", "", false, false}, {"nucleus", "top_p", true, true}, {"typ", "typ_p", true, true}, {"x", "", true, false}} {
		if got, ok := CanonicalSamplerName(tc.in, tc.alt); got != tc.want || ok != tc.ok {
			t.Errorf("CanonicalSamplerName(%q, %v) = %q, %v", tc.in, tc.alt, got, ok)
		}
	}
}

// TestTopKLargeVocab checks the heap selection used for a large vocabulary against sorting.
func TestTopKLargeVocab(t *testing.T) {
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32((i * 7919) % 1000) // a permutation of 0..999
	}
	logits[10] = 999 // a tie with the token whose value is 999: the lower id comes first
	got := chainDist(testParams(func(p *Params) { p.Samplers, p.TopK = []string{"top_k"}, 3 }), nil, nil, logits)
	e1, e2 := 1.0, math.Exp(-1)
	// 999 twice (ids 10 and the other), 998 once: e^0, e^0, e^-1.
	other := int32(-1)
	for i, l := range logits {
		if l == 999 && i != 10 {
			other = int32(i)
		}
	}
	var id998 int32
	for i, l := range logits {
		if l == 998 {
			id998 = int32(i)
		}
	}
	sum := 2*e1 + e2
	checkDist(t, got, map[int32]float64{10: e1 / sum, other: e1 / sum, id998: e2 / sum})
}
