// Package grammar implements llama.cpp's GBNF grammars: a parser for the
// grammar text, an incremental matcher that constrains sampling to the
// strings the grammar accepts, and a converter from JSON Schema to GBNF.
//
// The grammar language is the one llama.cpp accepts: rules of the form
// `name ::= alternates`, string literals, character classes (with ranges and
// negation), `.` for any character, grouping, the repetition operators
// `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`, and `#` comments. Repetitions are
// expanded into generated rules, as llama.cpp does.
package grammar

import (
	"fmt"
	"sort"
	"strings"
)

// elemType is the kind of one grammar element, mirroring llama.cpp's
// llama_gretype encoding.
type elemType uint8

const (
	elemEnd     elemType = iota // end of a rule definition
	elemAlt                     // start of an alternate
	elemRuleRef                 // reference to a rule; val is the rule id
	elemChar                    // start of a character class; val is a code point
	elemCharNot                 // start of a negated character class
	elemCharRng                 // upper bound of a range; the previous element is the lower bound
	elemCharAlt                 // another code point in the current class
	elemCharAny                 // any character
)

// element is one symbol of a rule body.
type element struct {
	typ elemType
	val rune
}

// Grammar is a parsed GBNF grammar. It is immutable and safe for concurrent use.
type Grammar struct {
	rules [][]element // each rule: alternates separated by elemAlt, ended by elemEnd
	names []string    // rule id -> name
	ids   map[string]int
	src   string
}

// Source is the GBNF text the grammar was parsed from (reported back to clients).
func (g *Grammar) Source() string { return g.src }

// Rules returns the names of the rules written in the source (generated
// helper rules excluded), sorted.
func (g *Grammar) Rules() []string {
	var out []string
	for name := range g.ids {
		if !strings.Contains(name, "__") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Error is a grammar parse error at a 1-based line and column.
type Error struct {
	Line, Col int
	Msg       string
}

// Error formats the error as grammar: LINE:COL: message.
func (e *Error) Error() string {
	return fmt.Sprintf("grammar: %d:%d: %s", e.Line, e.Col, e.Msg)
}

// checkLeftRecursion reports a rule that can derive itself as its first
// symbol; the matcher could never finish expanding such a rule.
func (g *Grammar) checkLeftRecursion() error {
	n := len(g.rules)
	nullable := make([]bool, n)
	for changed := true; changed; {
		changed = false
		for id, rule := range g.rules {
			if nullable[id] {
				continue
			}
			ok := true // current alternate nullable so far
			for _, e := range rule {
				switch e.typ {
				case elemAlt, elemEnd:
					if ok {
						nullable[id], changed = true, true
					}
					ok = true
				case elemRuleRef:
					ok = ok && nullable[e.val]
				case elemChar, elemCharNot, elemCharAny:
					ok = false
				}
				if nullable[id] {
					break
				}
			}
		}
	}
	// left[id] lists rules that may appear first in a derivation of id.
	left := make([][]int, n)
	for id, rule := range g.rules {
		open := true
		for _, e := range rule {
			switch e.typ {
			case elemAlt, elemEnd:
				open = true
			case elemRuleRef:
				if open {
					left[id] = append(left[id], int(e.val))
				}
				open = open && nullable[e.val]
			case elemChar, elemCharNot, elemCharAny:
				open = false
			}
		}
	}
	state := make([]uint8, n) // 0 unvisited, 1 on path, 2 done
	var visit func(int) int
	visit = func(id int) int {
		state[id] = 1
		for _, next := range left[id] {
			if state[next] == 1 {
				return next
			}
			if state[next] == 0 {
				if r := visit(next); r >= 0 {
					return r
				}
			}
		}
		state[id] = 2
		return -1
	}
	for id := range g.rules {
		if state[id] == 0 {
			if r := visit(id); r >= 0 {
				return fmt.Errorf("grammar: left recursion in rule %q", g.names[r])
			}
		}
	}
	return nil
}

// matchChar reports whether code point c matches the character class that
// starts at rule[pos], and returns the position just past the class.
func matchChar(rule []element, pos int, c rune) (bool, int) {
	if rule[pos].typ == elemCharAny {
		return true, pos + 1
	}
	positive := rule[pos].typ == elemChar
	found := false
	for {
		e := rule[pos]
		if pos+1 < len(rule) && rule[pos+1].typ == elemCharRng {
			if e.val <= c && c <= rule[pos+1].val {
				found = true
			}
			pos += 2
		} else {
			if e.val == c {
				found = true
			}
			pos++
		}
		if rule[pos].typ != elemCharAlt {
			break
		}
	}
	return found == positive, pos
}

// matchRange reports whether some code point in [lo, hi] matches the
// character class that starts at rule[pos].
func matchRange(rule []element, pos int, lo, hi rune) bool {
	if rule[pos].typ == elemCharAny {
		return true
	}
	positive := rule[pos].typ == elemChar
	for {
		e := rule[pos]
		a, b := e.val, e.val
		if pos+1 < len(rule) && rule[pos+1].typ == elemCharRng {
			b = rule[pos+1].val
			pos += 2
		} else {
			pos++
		}
		if positive && a <= hi && lo <= b {
			return true
		}
		if !positive && a <= lo && hi <= b {
			return false // the whole range is excluded
		}
		if rule[pos].typ != elemCharAlt {
			break
		}
	}
	return !positive
}
