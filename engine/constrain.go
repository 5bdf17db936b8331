package engine

import (
	"fmt"
	"math"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/engine/grammar"
)

// constraint keeps generation inside a grammar, as llama.cpp's grammar sampler does: the
// sampled token is checked first (the fast path: most tokens a model picks are allowed), and
// only when it is rejected is every token's text tested and the draw repeated without the
// rejected ones. End-of-generation tokens are allowed only where the grammar may end. Tokens
// count as their text with special tokens rendered, as llama.cpp's grammar sees them.
//
// A lazy constraint (triggers set) lets the output run free until a trigger appears in it;
// the grammar then takes the output from the trigger on.
type constraint struct {
	m      *grammar.Matcher
	pieces func(id int32) string
	isEOG  func(id int32) bool

	triggers []GrammarTrigger
	active   bool
	free     strings.Builder // the output while the constraint is not active yet
}

func newConstraint(g *grammar.Grammar, triggers []GrammarTrigger, pieces func(id int32) string, isEOG func(id int32) bool) (*constraint, error) {
	m, err := g.NewMatcher("root")
	if err != nil {
		return nil, fmt.Errorf("engine: grammar: %w", err)
	}
	return &constraint{m: m, pieces: pieces, isEOG: isEOG, triggers: triggers, active: len(triggers) == 0}, nil
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
	if !c.active || c.allows(id) {
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

// accept advances the grammar over token id's text; a lazy constraint first looks for a
// trigger in the output and, at the first, hands the grammar the output from it on.
func (c *constraint) accept(id int32) error {
	if c.isEOG(id) {
		return nil
	}
	text := c.pieces(id)
	if !c.active {
		c.free.WriteString(text)
		at := c.triggered(c.free.String())
		if at < 0 {
			return nil
		}
		c.active, text = true, c.free.String()[at:]
	}
	if err := c.m.Accept(text); err != nil {
		return fmt.Errorf("engine: grammar: %w", err)
	}
	return nil
}

// triggered is where the earliest trigger starts in out, or -1.
func (c *constraint) triggered(out string) int {
	first := -1
	for _, t := range c.triggers {
		at := -1
		if t.AtStart {
			if rest := strings.TrimLeft(out, " \t\r\n"); strings.HasPrefix(rest, t.Word) {
				at = len(out) - len(rest)
			}
		} else {
			at = strings.Index(out, t.Word)
		}
		if at >= 0 && (first < 0 || at < first) {
			first = at
		}
	}
	return first
}
