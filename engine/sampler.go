package engine

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/wgpu-llama/wgpu-llama/engine/mt19937"
	"github.com/wgpu-llama/wgpu-llama/model"
)

// sampler picks the next token with llama-server's sampler chain (common_sampler_init): logit
// bias first, then the samplers of Params.Samplers in order, then llama.cpp's dist draw; or,
// with Mirostat, logit bias, temperature and Mirostat. It keeps the token history (prompt and
// accepted tokens) for the penalties and DRY, and Mirostat's mu, across tokens.
//
// Each step does llama.cpp's arithmetic (float where llama.cpp computes in float, double where
// it uses double) on the candidates in llama.cpp's order, and the draws come from std::mt19937
// generators seeded as llama.cpp seeds them, so a seed picks the tokens llama.cpp picks.
type sampler struct {
	p     Params
	chain []samplerKind
	rng   *mt19937.Generator // the dist sampler's generator (Mirostat's, with Mirostat)
	xtc   *mt19937.Generator // XTC's own generator, as llama.cpp seeds each sampler separately
	mu    float32            // Mirostat's current maximum surprise
	// adaptive is the adaptive-p sampler's state where the chain ends in it.
	adaptive *adaptiveState

	hist   []int32 // prompt and accepted tokens
	dry    *dryState
	cand   []candidate       // reused between tokens; after sample, the final candidates
	last   []float32         // logits of the last sample call, for pre-sampling probabilities
	top    *model.Candidates // or the candidates of the last sampleTop call
	picked int32

	sorted  bool // cand is sorted by descending logit (ties by ascending id): llama.cpp's cur_p->sorted
	idOrder bool // cand[i].id == i for every token of the vocabulary
	probsOK bool // cand[].p holds the final distribution
}

// candidate is one token under consideration (llama_token_data), with its probability once
// computed.
type candidate struct {
	id    int32
	logit float32
	p     float32
}

// TokenProb is a token and its probability, for n_probs.
type TokenProb struct {
	ID   int32
	Prob float32
}

// newSampler starts a sampler for one request. prompt seeds the history the penalties and DRY
// look at (llama-server accepts the prompt into the sampler); piece gives a token's text, which
// DRY matches against the sequence breakers (nil disables the breakers).
func newSampler(p Params, prompt []int32, piece func(id int32) string) *sampler {
	s := &sampler{
		p:     p,
		chain: samplerChain(p.Samplers),
		rng:   mt19937.New(rngSeed(p.Seed)),
		xtc:   mt19937.New(rngSeed(p.Seed)),
		mu:    2 * p.MirostatTau,
		hist:  append([]int32(nil), prompt...),
	}
	if s.dryOn() {
		s.dry = newDRYState(p.DRYSequenceBreakers, piece)
	}
	if s.adaptiveOn() {
		s.adaptive = newAdaptiveState(p.AdaptiveTarget, p.AdaptiveDecay)
	}
	return s
}

// rngSeed is llama.cpp's get_rng_seed: the seed itself, or for SeedRandom a fresh random one
// (drawn anew for each generator, as each llama.cpp sampler draws its own).
func rngSeed(seed uint32) uint32 {
	if seed == SeedRandom {
		return rand.Uint32()
	}
	return seed
}

// accept records a sampled token in the history.
func (s *sampler) accept(id int32) {
	s.hist = append(s.hist, id)
	if s.adaptive != nil {
		s.adaptive.accept(id)
	}
}

// minKeep is Params.MinKeep as llama.cpp uses it (at least 1 where it matters).
func (s *sampler) minKeep() int { return max(s.p.MinKeep, 0) }

// argmax returns the first index of the largest logit, as llama.cpp's greedy sampler does.
func argmax(logits []float32) int32 {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return int32(best)
}

// greedy reports whether the chain ends in temperature <= 0 without dynamic temperature, where
// llama.cpp keeps only the top candidate.
func (s *sampler) greedy() bool {
	return s.p.Mirostat == 0 && s.p.Temperature <= 0 && s.p.DynatempRange <= 0 &&
		slices.Contains(s.chain, samplerTemperature)
}

// setMatters reports whether an active sampler of the chain computes from the probabilities
// of the whole candidate set (typical, XTC), so that earlier filters change what it does.
func (s *sampler) setMatters() bool {
	for _, k := range s.chain {
		if (k == samplerTypicalP || k == samplerXTC) && s.acts(k) {
			return true
		}
	}
	return false
}

// fastGreedy reports whether the pick is plainly the argmax of the logits: greedy, and no step
// changes logits or could drop the top token.
func (s *sampler) fastGreedy() bool {
	if !s.greedy() || len(s.p.LogitBias) > 0 || s.p.NProbs > 0 {
		return false
	}
	for _, k := range s.chain {
		switch {
		case k == samplerPenalties && s.penaltiesOn(),
			k == samplerDRY && s.dryOn(),
			k == samplerTypicalP && s.p.TypicalP < 1,
			k == samplerXTC && s.xtcOn():
			return false
		}
	}
	return true
}

// sample runs the chain over logits (one per vocabulary token) and draws a token. logits must
// stay unchanged until probs has been called, if it is.
func (s *sampler) sample(logits []float32) int32 {
	s.last, s.top, s.probsOK = logits, nil, false
	if s.fastGreedy() {
		s.picked = argmax(logits)
		return s.picked
	}
	c := s.cand[:0]
	for i, l := range logits {
		c = append(c, candidate{id: int32(i), logit: l})
	}
	s.cand, s.sorted, s.idOrder = c, false, true
	return s.runChain(len(logits))
}

// runChain runs logit bias and the chain (or Mirostat) over s.cand, drawn from a vocabulary
// of nVocab tokens, and draws a token: with the dist sampler, or adaptive-p where the chain
// names it (wherever it stands, llama.cpp puts it last).
func (s *sampler) runChain(nVocab int) int32 {
	s.applyLogitBias()
	if s.p.Mirostat == 1 || s.p.Mirostat == 2 {
		s.applyTemp(s.p.Temperature)
		if s.p.Mirostat == 1 {
			s.picked = s.mirostatV1(nVocab)
		} else {
			s.picked = s.mirostatV2()
		}
		return s.picked
	}
	// A greedy pick is the top logit left after the chain: filters that keep the top logit
	// can be skipped, unless typical or XTC look at the probabilities of what they leave.
	greedy := s.greedy() && !s.setMatters()
	for _, k := range s.chain {
		switch k {
		case samplerPenalties:
			s.applyPenalties()
		case samplerDRY:
			s.applyDRY()
		case samplerTopNSigma:
			if !greedy { // keeps the top logit: no effect on a greedy pick
				s.applyTopNSigma()
			}
		case samplerTopK:
			if !greedy {
				s.applyTopK(s.p.TopK)
			}
		case samplerTypicalP:
			s.applyTypical()
		case samplerTopP:
			if !greedy {
				s.applyTopP()
			}
		case samplerMinP:
			if !greedy {
				s.applyMinP()
			}
		case samplerXTC:
			s.applyXTC()
		case samplerTemperature:
			s.applyTempExt()
		}
	}
	if s.adaptive != nil {
		s.picked = s.adaptiveDraw()
	} else {
		s.picked = s.draw()
	}
	return s.picked
}

// draw is llama.cpp's dist sampler (llama_sampler_dist_apply): the softmax of the candidates
// in their current order (exponentials in float, their sum in double), one
// uniform_real_distribution<double> draw r, and the first candidate at which the running sum
// reaches r times the total. A single candidate is picked without a draw.
func (s *sampler) draw() int32 {
	s.probsOK = true
	c := s.cand
	if len(c) == 1 {
		c[0].p = 1
		return c[0].id
	}
	maxL := s.maxLogit()
	sum := 0.0
	for i := range c {
		c[i].p = expf(c[i].logit - maxL)
		sum += float64(c[i].p)
	}
	target := sum * mt19937.UniformFloat64(s.rng, 0, 1)
	picked, run := -1, 0.0
	for i := range c {
		if picked < 0 {
			run += float64(c[i].p)
			if run >= target {
				picked = i
			}
		}
		c[i].p = float32(float64(c[i].p) / sum)
	}
	if picked < 0 {
		picked = len(c) - 1
	}
	return c[picked].id
}

// maxLogit is the largest candidate logit: the first when sorted.
func (s *sampler) maxLogit() float32 {
	m := s.cand[0].logit
	if !s.sorted {
		for _, x := range s.cand[1:] {
			m = max(m, x.logit)
		}
	}
	return m
}

// dropBanned removes candidates whose logit is -Inf (banned by a bias, masked by top-n-sigma
// or greedy temperature), keeping at least one; llama.cpp keeps them with probability 0.
func (s *sampler) dropBanned() {
	c := s.cand
	n := 0
	for _, x := range c {
		if !math.IsInf(float64(x.logit), -1) {
			c[n] = x
			n++
		}
	}
	if n == 0 {
		n = 1
	}
	if n < len(c) {
		s.cand, s.idOrder = c[:n], false
	}
}

// byLogit orders candidates by descending logit, ties by ascending id (the first maximum first).
func byLogit(a, b candidate) int {
	if c := cmp.Compare(b.logit, a.logit); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// bestByLogit returns the n best of logits as candidates, in byLogit order, keeping a sorted
// list of the best so far (n is small: the n_probs of a request; more than the row holds
// means all of it).
func bestByLogit(logits []float32, n int) []candidate {
	n = min(max(n, 0), len(logits))
	best := make([]candidate, 0, n+1)
	for i, l := range logits {
		c := candidate{id: int32(i), logit: l}
		if len(best) == n && (n == 0 || byLogit(c, best[n-1]) >= 0) {
			continue
		}
		at, _ := slices.BinarySearchFunc(best, c, byLogit)
		best = slices.Insert(best, at, c)
		if len(best) > n {
			best = best[:n]
		}
	}
	return best
}

// sort sorts the candidates by descending logit unless they already are.
func (s *sampler) sort() {
	if !s.sorted {
		slices.SortFunc(s.cand, byLogit)
		s.sorted, s.idOrder = true, false
	}
}

// softmax is llama_sampler_softmax_impl: with doSort the candidates are sorted first; p is
// set from the logits in float, in the candidates' current order.
func (s *sampler) softmax(doSort bool) {
	if doSort {
		s.sort()
	}
	c := s.cand
	maxL := s.maxLogit()
	var sum float32
	for i := range c {
		c[i].p = expf(c[i].logit - maxL)
		sum += c[i].p
	}
	for i := range c {
		c[i].p /= sum
	}
}

// expf, logf, log2f and powf are C's float functions: computed in double and rounded once.
func expf(x float32) float32    { return float32(math.Exp(float64(x))) }
func logf(x float32) float32    { return float32(math.Log(float64(x))) }
func log2f(x float32) float32   { return float32(math.Log2(float64(x))) }
func powf(x, y float32) float32 { return float32(math.Pow(float64(x), float64(y))) }

// probs returns up to n of the most likely tokens at the last sample call, most likely first,
// and the probability of the token it picked. Pre-sampling (the default) they come from the
// softmax of the model's logits over the whole vocabulary; with PostSamplingProbs, from the
// candidates left after the chain, by descending probability and without those at 0, as
// llama-server lists them (only survivors, so a greedy pick reports one token at 1).
func (s *sampler) probs(n int) (top []TokenProb, picked float32) {
	var c []candidate
	if s.p.PostSamplingProbs {
		if !s.probsOK { // greedy fast path
			s.cand = append(s.cand[:0], candidate{id: s.picked, p: 1})
			s.probsOK = true
		}
		if !s.sorted {
			slices.SortStableFunc(s.cand, func(a, b candidate) int { return cmp.Compare(b.p, a.p) })
		}
		c = s.cand
		for i, x := range c {
			if x.p == 0 {
				c = c[:i]
				break
			}
		}
	} else if s.top != nil {
		c = s.topProbs()
	} else {
		// The model's softmax: only the n best need sorting, not the whole vocabulary.
		maxL := float64(s.last[argmax(s.last)])
		sum := 0.0
		for _, l := range s.last {
			sum += math.Exp(float64(l) - maxL)
		}
		c = bestByLogit(s.last, n)
		for i := range c {
			c[i].p = float32(math.Exp(float64(c[i].logit)-maxL) / sum)
		}
		picked = float32(math.Exp(float64(s.last[s.picked])-maxL) / sum)
	}
	for _, x := range c {
		if x.id == s.picked {
			picked = x.p
		}
	}
	for _, x := range c[:min(n, len(c))] {
		top = append(top, TokenProb{ID: x.id, Prob: x.p})
	}
	return top, picked
}
