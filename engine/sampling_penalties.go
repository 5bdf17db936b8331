package engine

import (
	"math"
	"strings"
)

// window returns the last n tokens of the history; n < 0 means all of it (llama-server's -1,
// the context size, which the history never exceeds).
func (s *sampler) window(n int) []int32 {
	if n < 0 || n > len(s.hist) {
		return s.hist
	}
	return s.hist[len(s.hist)-n:]
}

// penaltiesOn reports whether the repetition, frequency or presence penalty can act.
func (s *sampler) penaltiesOn() bool {
	return s.p.RepeatLastN != 0 &&
		(s.p.RepeatPenalty != 1 || s.p.FrequencyPenalty != 0 || s.p.PresencePenalty != 0)
}

// adjust applies f to the logit of every candidate whose id is in ids.
func (s *sampler) adjust(ids map[int32]int, f func(c *candidate, v int)) {
	if s.idOrder {
		for id, v := range ids {
			if id >= 0 && int(id) < len(s.cand) {
				f(&s.cand[id], v)
			}
		}
		return
	}
	for i := range s.cand {
		if v, ok := ids[s.cand[i].id]; ok {
			f(&s.cand[i], v)
		}
	}
}

// applyPenalties is llama.cpp's penalties sampler over the last RepeatLastN tokens: a token
// seen count times has its logit divided by RepeatPenalty when positive (multiplied when not),
// then count*FrequencyPenalty + PresencePenalty subtracted.
func (s *sampler) applyPenalties() {
	if !s.penaltiesOn() {
		return
	}
	counts := map[int32]int{}
	for _, id := range s.window(s.p.RepeatLastN) {
		counts[id]++
	}
	s.adjust(counts, func(c *candidate, n int) {
		if c.logit <= 0 {
			c.logit *= s.p.RepeatPenalty
		} else {
			c.logit /= s.p.RepeatPenalty
		}
		c.logit -= float32(n)*s.p.FrequencyPenalty + s.p.PresencePenalty
	})
	s.sorted = false
}

// dryOn reports whether DRY can act.
func (s *sampler) dryOn() bool {
	return s.p.DRYMultiplier != 0 && s.p.DRYBase >= 1 && s.p.DRYPenaltyLastN != 0
}

// DRY's limits on sequence breakers, as llama.cpp's: breakers are cut to 40 bytes and a
// breaker spread over tokens may continue over at most 20 more tokens.
const (
	dryMaxBreakerLen = 40
	dryMaxTail       = 20
)

// dryState holds the sequence breakers and, per token, how its text relates to them.
type dryState struct {
	breakers []string
	piece    func(id int32) string
	info     map[int32]dryToken // computed on first use
}

// dryToken says whether a token contains a breaker (a single-token breaker) and which
// remainders (tails) would complete a breaker that the token's text ends part-way into.
type dryToken struct {
	single bool
	tails  []string
}

func newDRYState(breakers []string, piece func(id int32) string) *dryState {
	d := &dryState{piece: piece, info: map[int32]dryToken{}}
	for _, b := range breakers {
		if len(b) > dryMaxBreakerLen {
			b = b[:dryMaxBreakerLen]
		}
		if b != "" {
			d.breakers = append(d.breakers, b)
		}
	}
	return d
}

// token returns id's relation to the breakers (get_overlapping_token_sequences for one token).
func (d *dryState) token(id int32) dryToken {
	if t, ok := d.info[id]; ok {
		return t
	}
	var t dryToken
	if d.piece != nil {
		word := d.piece(id)
		for _, b := range d.breakers {
			if strings.Contains(word, b) {
				t.single = true
				continue
			}
			// Positions where the word ends with a proper prefix of b.
			for pos := 0; pos < len(word); pos++ {
				if rest := word[pos:]; strings.HasPrefix(b, rest) {
					t.tails = append(t.tails, b[len(rest):])
				}
			}
		}
	}
	d.info[id] = t
	return t
}

// restartLen is how many tokens after w[head] (more recent ones) complete a breaker begun at
// w[head]: 0 for a single-token breaker, -1 for none.
func (d *dryState) restartLen(w []int32, head int) int {
	t := d.token(w[head])
	if t.single {
		return 0
	}
	best := -1
	for _, tail := range t.tails {
		text := ""
		for j := 1; j <= dryMaxTail && head+j < len(w); j++ {
			text += d.piece(w[head+j])
			if text == tail {
				best = max(best, j)
				break
			}
			if !strings.HasPrefix(tail, text) {
				break
			}
		}
	}
	return best
}

// applyDRY is llama.cpp's DRY sampler. Over the last DRYPenaltyLastN tokens it finds, for each
// earlier position, how long a suffix of the history ends there too (capped at the tokens
// since the last sequence breaker); the token that followed such a repeat of length L >=
// DRYAllowedLength would extend it, so its logit loses DRYMultiplier * DRYBase^(L -
// DRYAllowedLength) (the largest L per token). Tokens that are themselves breakers are spared.
//
// Multi-token breakers are matched on text (a token ending part-way into a breaker, followed by
// tokens spelling exactly the rest) where llama.cpp matches the tokenizer's own tokenization of
// the rest.
func (s *sampler) applyDRY() {
	if !s.dryOn() || s.dry == nil {
		return
	}
	w := s.window(s.p.DRYPenaltyLastN)
	n, allowed := len(w), s.p.DRYAllowedLength
	if n <= allowed {
		return
	}
	// Step 1: the most recent breaker bounds the repeat length.
	repLimit := n
	for i := 0; i < n; i++ {
		head := n - 1 - i
		if l := s.dry.restartLen(w, head); l >= 0 && l <= i {
			repLimit = i - l
			break
		}
	}
	if repLimit < allowed {
		return
	}
	// Step 2: z-function of the reversed window: z[i] is how far w ending at n-1-i matches the
	// end of w.
	z := make([]int, n)
	at := func(i int) int32 { return w[n-1-i] }
	for i, l, r := 1, 0, 0; i < n; i++ {
		if i < r {
			z[i] = min(r-i, z[i-l])
		}
		for i+z[i] < n && at(z[i]) == at(i+z[i]) {
			z[i]++
		}
		if i+z[i] > r {
			l, r = i, i+z[i]
		}
	}
	// Step 3: the token after each repeat would extend it.
	maxRepeat := map[int32]int{}
	for j := 0; j < n-1; j++ {
		rep := min(z[n-1-j], repLimit)
		if rep >= allowed {
			if tok := w[j+1]; rep > maxRepeat[tok] {
				maxRepeat[tok] = rep
			}
		}
	}
	// Step 4: penalise, with the exponent clamped so the power stays a finite float32.
	maxExp := 0
	if s.p.DRYBase > 1.000001 {
		maxExp = int(float32(88.7228391) / float32(math.Log(float64(s.p.DRYBase))))
	}
	s.adjust(maxRepeat, func(c *candidate, rep int) {
		if s.dry.token(c.id).single {
			return
		}
		e := rep - allowed
		if maxExp > 0 && e > maxExp {
			e = maxExp
		}
		// std::pow(float, int) is a double: the product is rounded to float once.
		c.logit -= float32(float64(s.p.DRYMultiplier) * math.Pow(float64(s.p.DRYBase), float64(e)))
	})
	s.sorted = false
}
