package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// target is the test's target distribution (after the sampler chain), most likely first.
var target = []candidate{{id: 7, p: 0.5}, {id: 2, p: 0.25}, {id: 9, p: 0.15}, {id: 4, p: 0.1}}

// trials runs n seeded rounds of: draw a proposal from q, apply speculativeDraw; it returns the
// frequency of each output token and the fraction of rounds that kept the proposal.
func trials(t *testing.T, q []TokenProb, n int) (freq map[int32]float64, accepted float64) {
	t.Helper()
	propose := rand.New(rand.NewPCG(1, 2))
	rng := rand.New(rand.NewPCG(3, 4))
	freq = map[int32]float64{}
	kept := 0
	for range n {
		r, cum := propose.Float64(), 0.0
		d := q[len(q)-1].ID
		for _, x := range q {
			cum += float64(x.Prob)
			if r < cum {
				d = x.ID
				break
			}
		}
		got := speculativeDraw(target, &draftProposal{id: d, draft: q}, rng)
		freq[got] += 1 / float64(n)
		if got == d {
			kept++
		}
	}
	return freq, float64(kept) / float64(n)
}

// TestSpeculativeDrawKeepsTargetDistribution checks, over 400000 seeded rounds, that the
// tokens the rule returns are distributed as the target, for a draft distribution that
// differs from it (and misses one of its tokens) and for a one-hot (greedy) draft; and that
// the acceptance rate is the hand-computed sum over tokens of min(p, q).
func TestSpeculativeDrawKeepsTargetDistribution(t *testing.T) {
	const n = 400000
	// 4 standard deviations of a frequency estimate at p = 0.5.
	tol := 4 * math.Sqrt(0.25/n)
	for _, tc := range []struct {
		name       string
		q          []TokenProb
		acceptRate float64
	}{
		// min(p,q): token 7 0.1, token 2 0.25, token 9 0.15, token 4 (q = 0) 0.
		{"mixed draft", []TokenProb{{ID: 7, Prob: 0.1}, {ID: 2, Prob: 0.6}, {ID: 9, Prob: 0.3}}, 0.5},
		// One-hot on token 2: kept with probability p(2) = 0.25.
		{"greedy draft", []TokenProb{{ID: 2, Prob: 1}}, 0.25},
		// The draft proposes a token the target gave no probability: always replaced.
		{"impossible token", []TokenProb{{ID: 5, Prob: 1}}, 0},
	} {
		freq, acc := trials(t, tc.q, n)
		for _, c := range target {
			if d := math.Abs(freq[c.id] - c.p); d > tol {
				t.Errorf("%s: token %d returned with frequency %.4f, target %.4f", tc.name, c.id, freq[c.id], c.p)
			}
		}
		if freq[5] != 0 {
			t.Errorf("%s: returned token 5, which the target excludes", tc.name)
		}
		if d := math.Abs(acc - tc.acceptRate); d > tol {
			t.Errorf("%s: acceptance rate %.4f, hand-computed %.4f", tc.name, acc, tc.acceptRate)
		}
	}
}

// TestSpeculativeDrawGreedyTarget checks the greedy limit: with a one-candidate target the
// draft is kept exactly when it is that candidate.
func TestSpeculativeDrawGreedyTarget(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	one := []candidate{{id: 3, p: 1}}
	for range 100 {
		if got := speculativeDraw(one, greedyProposal(3), rng); got != 3 {
			t.Fatalf("proposal 3 = the only candidate: got %d", got)
		}
		if got := speculativeDraw(one, greedyProposal(8), rng); got != 3 {
			t.Fatalf("proposal 8, only candidate 3: got %d", got)
		}
	}
}
