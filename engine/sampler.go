package engine

import (
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// sampler picks the next token with llama-server's chain for the samplers that exist so far:
// top_k, top_p, min_p, then temperature and a seeded draw; temperature <= 0 is greedy.
type sampler struct {
	p    Params
	rng  *rand.Rand
	cand []candidate // reused between tokens
}

type candidate struct {
	id    int32
	logit float32
	p     float64
}

func newSampler(p Params) *sampler {
	seed := uint64(p.Seed)
	if p.Seed == SeedRandom {
		seed = uint64(time.Now().UnixNano())
	}
	return &sampler{p: p, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
}

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

func (s *sampler) sample(logits []float32) int32 {
	if s.p.Temperature <= 0 {
		return argmax(logits)
	}
	c := s.cand[:0]
	for i, l := range logits {
		c = append(c, candidate{id: int32(i), logit: l})
	}
	sort.SliceStable(c, func(i, j int) bool { return c[i].logit > c[j].logit })
	if k := s.p.TopK; k > 0 && k < len(c) {
		c = c[:k]
	}
	softmax(c, 1)
	if tp := float64(s.p.TopP); tp < 1 {
		cum := 0.0
		for i := range c {
			cum += c[i].p
			if cum >= tp {
				c = c[:i+1]
				break
			}
		}
	}
	if mp := float64(s.p.MinP); mp > 0 {
		limit := c[0].p * mp
		n := 1
		for n < len(c) && c[n].p >= limit {
			n++
		}
		c = c[:n]
	}
	softmax(c, s.p.Temperature)
	s.cand = c
	r := s.rng.Float64()
	cum := 0.0
	for _, x := range c {
		cum += x.p
		if r < cum {
			return x.id
		}
	}
	return c[len(c)-1].id
}

// softmax sets p over candidates sorted by descending logit, at the given temperature.
func softmax(c []candidate, temp float32) {
	maxL := float64(c[0].logit) / float64(temp)
	sum := 0.0
	for i := range c {
		c[i].p = math.Exp(float64(c[i].logit)/float64(temp) - maxL)
		sum += c[i].p
	}
	for i := range c {
		c[i].p /= sum
	}
}
