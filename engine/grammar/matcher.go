package grammar

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ErrRejected is returned (wrapped) by Accept when the text cannot continue
// any string of the grammar.
var ErrRejected = errors.New("grammar: text rejected")

// node is one frame of a parse stack: a position (rule, index of an element
// that is a character class) and the frames below it. Stacks are immutable
// and share their tails, so cloning a matcher is cheap.
type node struct {
	rule, pos int32
	next      *node
}

// Matcher is the incremental state of a grammar match: the set of parse
// stacks that are consistent with the text accepted so far, plus any
// incomplete UTF-8 sequence at its end. A nil stack in the set means the root
// rule is complete. A Matcher is not safe for concurrent use; Clone it.
type Matcher struct {
	g      *Grammar
	stacks []*node
	// partial UTF-8 sequence: the code point bits seen so far and how many
	// continuation bytes are still missing (0 when none is pending).
	partial       rune
	partialRemain int
	partialMin    rune // smallest code point the sequence's length may encode
	first         *[256]bool
}

// NewMatcher starts a match of the named rule from the beginning.
func (g *Grammar) NewMatcher(root string) (*Matcher, error) {
	id, ok := g.ids[root]
	if !ok {
		return nil, fmt.Errorf("grammar: no rule %q", root)
	}
	m := &Matcher{g: g}
	seen := map[string]bool{}
	rule := g.rules[id]
	for pos := 0; ; {
		// one stack per alternate of the root rule
		var s *node
		if rule[pos].typ != elemEnd && rule[pos].typ != elemAlt {
			s = &node{rule: int32(id), pos: int32(pos)}
		}
		m.stacks = g.advance(s, m.stacks, seen)
		for rule[pos].typ != elemEnd && rule[pos].typ != elemAlt {
			pos++
		}
		if rule[pos].typ == elemEnd {
			break
		}
		pos++
	}
	return m, nil
}

// stackKey identifies a stack's contents, for deduplication.
func stackKey(s *node) string {
	var b []byte
	for ; s != nil; s = s.next {
		b = strconv.AppendInt(b, int64(s.rule), 36)
		b = append(b, '.')
		b = strconv.AppendInt(b, int64(s.pos), 36)
		b = append(b, '/')
	}
	return string(b)
}

// advance expands rule references at the top of s until every resulting
// stack has a character class on top (or is empty), appending the results
// not yet in seen to out.
func (g *Grammar) advance(s *node, out []*node, seen map[string]bool) []*node {
	todo := []*node{s}
	for len(todo) > 0 {
		s := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		key := stackKey(s)
		if seen[key] {
			continue
		}
		seen[key] = true
		if s == nil || g.rules[s.rule][s.pos].typ != elemRuleRef {
			out = append(out, s)
			continue
		}
		// Replace the reference by each alternate of the referenced rule.
		rest := s.next
		if t := g.rules[s.rule][s.pos+1].typ; t != elemEnd && t != elemAlt {
			rest = &node{rule: s.rule, pos: s.pos + 1, next: s.next}
		}
		ref := int32(g.rules[s.rule][s.pos].val)
		body := g.rules[ref]
		for pos := 0; ; {
			if t := body[pos].typ; t == elemEnd || t == elemAlt {
				todo = append(todo, rest) // empty alternate
			} else {
				todo = append(todo, &node{rule: ref, pos: int32(pos), next: rest})
			}
			for body[pos].typ != elemEnd && body[pos].typ != elemAlt {
				pos++
			}
			if body[pos].typ == elemEnd {
				break
			}
			pos++
		}
	}
	return out
}

// step advances every stack over code point c.
func (g *Grammar) step(stacks []*node, c rune) []*node {
	var out []*node
	seen := map[string]bool{}
	for _, s := range stacks {
		if s == nil {
			continue
		}
		rule := g.rules[s.rule]
		ok, next := matchChar(rule, int(s.pos), c)
		if !ok {
			continue
		}
		var ns *node
		if t := rule[next].typ; t == elemEnd || t == elemAlt {
			ns = s.next
		} else {
			ns = &node{rule: s.rule, pos: int32(next), next: s.next}
		}
		out = g.advance(ns, out, seen)
	}
	return out
}

// Clone returns an independent copy of the matcher.
func (m *Matcher) Clone() *Matcher {
	c := *m
	c.stacks = append([]*node(nil), m.stacks...)
	return &c
}

// Done reports whether the text accepted so far is a complete string of the
// root rule (the input may end here).
func (m *Matcher) Done() bool {
	if m.partialRemain > 0 {
		return false
	}
	for _, s := range m.stacks {
		if s == nil {
			return true
		}
	}
	return false
}

// Dead reports whether no continuation can be accepted any more.
func (m *Matcher) Dead() bool { return len(m.stacks) == 0 }

// Accept advances the matcher over a token's text. The text may end or
// start in the middle of a UTF-8 sequence. On error the matcher is left
// unchanged.
func (m *Matcher) Accept(piece string) error {
	n, err := m.feed(piece)
	if err != nil {
		return err
	}
	*m = *n
	return nil
}

// Allows reports whether accepting piece would keep the match alive. The
// empty piece is allowed while the match is alive.
func (m *Matcher) Allows(piece string) bool {
	if len(m.stacks) == 0 {
		return false
	}
	if piece == "" {
		return true
	}
	if m.partialRemain == 0 && !m.firstBytes()[piece[0]] {
		return false
	}
	_, err := m.feed(piece)
	return err == nil
}

// firstBytes returns, cached per state, a superset of the bytes that may
// begin the next accepted text.
func (m *Matcher) firstBytes() *[256]bool {
	if m.first != nil {
		return m.first
	}
	var set [256]bool
	for _, s := range m.stacks {
		if s == nil {
			continue
		}
		rule := m.g.rules[s.rule]
		pos := int(s.pos)
		if rule[pos].typ != elemChar {
			for i := range set {
				set[i] = true
			}
			break
		}
		for {
			lo, hi := rule[pos].val, rule[pos].val
			if rule[pos+1].typ == elemCharRng {
				hi = rule[pos+1].val
				pos++
			}
			pos++
			for b := firstByte(lo); b <= firstByte(hi); b++ {
				set[b] = true
			}
			if rule[pos].typ != elemCharAlt {
				break
			}
		}
	}
	m.first = &set
	return m.first
}

// firstByte returns the first byte of the UTF-8 encoding of r; it is
// monotonic in r, so a range of code points maps to a range of bytes.
func firstByte(r rune) int {
	if r < 0 || r > utf8.MaxRune {
		r = utf8.MaxRune
	}
	var buf [4]byte
	utf8.EncodeRune(buf[:], r)
	if r >= 0xD800 && r <= 0xDFFF { // surrogates encode as U+FFFD
		return 0xED
	}
	return int(buf[0])
}

// feed computes the state after piece without modifying m.
func (m *Matcher) feed(piece string) (*Matcher, error) {
	n := &Matcher{g: m.g, stacks: m.stacks, partial: m.partial, partialRemain: m.partialRemain, partialMin: m.partialMin}
	for i := 0; i < len(piece); i++ {
		b := piece[i]
		var c rune
		if n.partialRemain > 0 {
			if b&0xC0 != 0x80 {
				return nil, fmt.Errorf("%w: invalid UTF-8 at byte %d", ErrRejected, i)
			}
			n.partial = n.partial<<6 | rune(b&0x3F)
			n.partialRemain--
			if n.partialRemain > 0 {
				continue
			}
			c = n.partial
			if c < n.partialMin || c > utf8.MaxRune || (c >= 0xD800 && c <= 0xDFFF) {
				return nil, fmt.Errorf("%w: invalid UTF-8 at byte %d", ErrRejected, i)
			}
		} else {
			switch {
			case b < 0x80:
				c = rune(b)
			case b&0xE0 == 0xC0:
				n.partial, n.partialRemain, n.partialMin = rune(b&0x1F), 1, 0x80
			case b&0xF0 == 0xE0:
				n.partial, n.partialRemain, n.partialMin = rune(b&0x0F), 2, 0x800
			case b&0xF8 == 0xF0:
				n.partial, n.partialRemain, n.partialMin = rune(b&0x07), 3, 0x10000
			default:
				return nil, fmt.Errorf("%w: invalid UTF-8 at byte %d", ErrRejected, i)
			}
			if n.partialRemain > 0 {
				continue
			}
		}
		n.stacks = n.g.step(n.stacks, c)
		if len(n.stacks) == 0 {
			return nil, fmt.Errorf("%w at byte %d of %q", ErrRejected, i, piece)
		}
	}
	if n.partialRemain > 0 && !n.partialPossible() {
		return nil, fmt.Errorf("%w: no rule accepts the UTF-8 prefix in %q", ErrRejected, piece)
	}
	return n, nil
}

// partialPossible reports whether some stack accepts a code point that
// completes the pending UTF-8 sequence.
func (m *Matcher) partialPossible() bool {
	shift := 6 * m.partialRemain
	lo := m.partial << shift
	hi := lo | (1<<shift - 1)
	lo = max(lo, m.partialMin)
	hi = min(hi, utf8.MaxRune)
	if lo > hi {
		return false
	}
	for _, s := range m.stacks {
		if s != nil && matchRange(m.g.rules[s.rule], int(s.pos), lo, hi) {
			return true
		}
	}
	return false
}
