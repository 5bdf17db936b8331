package engine

import "math/rand/v2"

// draftProposal is a drafted token offered to the sampler's final draw, with the draft's
// distribution: the probabilities it gave to the tokens it could have proposed.
type draftProposal struct {
	id    int32
	draft []TokenProb
}

// greedyProposal is how this engine's drafts are made: greedily (the draft model's argmax on
// the GPU, or an n-gram lookup), so the proposal distribution is one-hot on the proposed
// token. The draft model's own softmax probability of that token is read back too, but only
// for --draft-p-min: the token was not drawn from that distribution, and using it here would
// bias the output away from the target's distribution.
func greedyProposal(id int32) *draftProposal {
	return &draftProposal{id: id, draft: []TokenProb{{ID: id, Prob: 1}}}
}

// speculativeDraw is the speculative sampling rule (Leviathan et al., Chen et al., 2023):
// with target probabilities p (the candidates after the sampler chain, p set) and a token d
// proposed from the draft distribution q, accept d with probability min(1, p(d)/q(d));
// otherwise draw from the residual max(0, p - q), normalized. Whatever q is, the token it
// returns is distributed exactly as p. With a one-hot q it accepts d with probability p(d)
// and otherwise draws from p without d.
func speculativeDraw(cand []candidate, prop *draftProposal, rng *rand.Rand) int32 {
	q := func(id int32) float64 {
		for _, t := range prop.draft {
			if t.ID == id {
				return float64(t.Prob)
			}
		}
		return 0
	}
	pd := 0.0
	for _, c := range cand {
		if c.id == prop.id {
			pd = c.p
		}
	}
	if qd := q(prop.id); qd > 0 && rng.Float64() < min(1, pd/qd) {
		return prop.id
	}
	sum := 0.0
	for _, c := range cand {
		sum += max(0, c.p-q(c.id))
	}
	if sum <= 0 { // p is q (rounding aside): nothing to correct, draw from p
		return drawFrom(cand, rng, func(c candidate) float64 { return c.p }, 1)
	}
	return drawFrom(cand, rng, func(c candidate) float64 { return max(0, c.p-q(c.id)) }, sum)
}

// drawFrom draws a candidate with probability weight(c)/total.
func drawFrom(cand []candidate, rng *rand.Rand, weight func(candidate) float64, total float64) int32 {
	r := rng.Float64() * total
	cum := 0.0
	last := cand[len(cand)-1].id
	for _, c := range cand {
		w := weight(c)
		if w <= 0 {
			continue
		}
		cum += w
		last = c.id
		if r < cum {
			return c.id
		}
	}
	return last
}
