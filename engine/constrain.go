package engine

import (
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
)

// constraint keeps generation inside a grammar, as llama.cpp's grammar sampler does: the
// sampled token is checked first (the fast path: most tokens a model picks are allowed), and
// only when it is rejected is every token's text tested and the draw repeated without the
// rejected ones. End-of-generation tokens are allowed only where the grammar may end.
type constraint struct {
	m      *grammar.Matcher
	pieces func(id int32) string
	isEOG  func(id int32) bool
}

func newConstraint(g *grammar.Grammar, pieces func(id int32) string, isEOG func(id int32) bool) (*constraint, error) {
	m, err := g.NewMatcher("root")
	if err != nil {
		return nil, fmt.Errorf("engine: grammar: %w", err)
	}
	return &constraint{m: m, pieces: pieces, isEOG: isEOG}, nil
}

// allows says whether token id may come next. Empty pieces (control tokens) are never
// allowed unless they end generation, as in llama.cpp.
func (c *constraint) allows(id int32) bool {
	if c.isEOG(id) {
		return c.m.Done()
	}
	piece := c.pieces(id)
	return piece != "" && c.m.Allows(piece)
}

// sample draws a token the grammar allows: first as usual, then, if that token is rejected,
// again from logits with every rejected token masked out.
func (c *constraint) sample(s *sampler, logits []float32) (int32, error) {
	id := s.sample(logits)
	if c.allows(id) {
		return id, nil
	}
	masked := make([]float32, len(logits))
	allowed := false
	for i, l := range logits {
		masked[i] = float32(math.Inf(-1))
		if c.allows(int32(i)) {
			masked[i], allowed = l, true
		}
	}
	if !allowed {
		return 0, fmt.Errorf("engine: grammar: no token can continue the output")
	}
	return s.sample(masked), nil
}

// accept advances the grammar over token id's text.
func (c *constraint) accept(id int32) error {
	if c.isEOG(id) {
		return nil
	}
	if err := c.m.Accept(c.pieces(id)); err != nil {
		return fmt.Errorf("engine: grammar: %w", err)
	}
	return nil
}
