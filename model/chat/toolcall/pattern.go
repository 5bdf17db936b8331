package toolcall

import "strings"

// Patterns for the openers of tool calls.
//
// llama.cpp finds tool-call openers with regular expressions that can also report a match cut
// short by the end of the text (common_regex's partial matches), so that while streaming, text
// that may be the start of a tool call is held back instead of being sent as content. Go's regexp
// cannot say that, so the few patterns needed are written with the combinators below, matched by
// backtracking, with three outcomes: no match, a full match, or a match that ran out of input.

// outcome is how a pattern matched at one position.
type outcome uint8

const (
	noMatch      outcome = iota
	partialMatch         // the input ended inside a possible match
	fullMatch
)

// span is a captured range of the input; start -1 when the group did not take part.
type span struct{ start, end int }

func (s span) set() bool { return s.start >= 0 }

const maxGroups = 6

// matcher is one matching attempt over s, with its capture groups.
type matcher struct {
	s    string
	caps [maxGroups]span
}

// pat is a pattern node; match calls k with the position after it for each way it matches, and
// returns the best outcome among them.
type pat interface {
	match(m *matcher, i int, k func(int) outcome) outcome
}

// lit matches one of the given literal strings.
type lit []string

func (l lit) match(m *matcher, i int, k func(int) outcome) outcome {
	rest := m.s[i:]
	best := noMatch
	for _, s := range l {
		switch {
		case strings.HasPrefix(rest, s):
			if o := k(i + len(s)); o == fullMatch {
				return o
			} else if o == partialMatch {
				best = partialMatch
			}
		case len(rest) < len(s) && strings.HasPrefix(s, rest):
			best = partialMatch
		}
	}
	return best
}

// seq matches its parts one after the other.
type seq []pat

func (q seq) match(m *matcher, i int, k func(int) outcome) outcome {
	if len(q) == 0 {
		return k(i)
	}
	return q[0].match(m, i, func(j int) outcome { return q[1:].match(m, j, k) })
}

// alt matches any one of its alternatives, preferring the first full match.
type alt []pat

func (a alt) match(m *matcher, i int, k func(int) outcome) outcome {
	best := noMatch
	for _, p := range a {
		switch p.match(m, i, k) {
		case fullMatch:
			return fullMatch
		case partialMatch:
			best = partialMatch
		}
	}
	return best
}

// opt matches p or nothing.
func opt(p pat) pat { return alt{p, seq{}} }

// spaces matches \s*, greedily (no pattern here needs it to give characters back).
type spaces struct{}

func (spaces) match(m *matcher, i int, k func(int) outcome) outcome {
	for i < len(m.s) && isRegexSpace(m.s[i]) {
		i++
	}
	return k(i)
}

func isRegexSpace(c byte) bool { return isSpace(c) || c == '\v' || c == '\f' }

// runOf matches one or more bytes for which ok holds ([^>]+, \w+); the input running out before
// the run is known to end is a partial match.
type runOf func(c byte) bool

func (r runOf) match(m *matcher, i int, k func(int) outcome) outcome {
	j := i
	for j < len(m.s) && r(m.s[j]) {
		j++
	}
	if j == len(m.s) {
		return partialMatch
	}
	if j == i {
		return noMatch
	}
	return k(j)
}

// notIn is [^chars]+.
func notIn(chars string) pat {
	return runOf(func(c byte) bool { return strings.IndexByte(chars, c) < 0 })
}

// word is \w+.
var word = runOf(func(c byte) bool {
	return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
})

// group captures what p matches as group n.
type group struct {
	n int
	p pat
}

func (g group) match(m *matcher, i int, k func(int) outcome) outcome {
	return g.p.match(m, i, func(j int) outcome {
		saved := m.caps[g.n]
		m.caps[g.n] = span{i, j}
		o := k(j)
		if o != fullMatch {
			m.caps[g.n] = saved
		}
		return o
	})
}

// pattern is a searchable pattern; first reports the bytes a match can begin with (a cheap
// filter on candidate positions).
type pattern struct {
	p     pat
	first func(c byte) bool
}

// found is the result of a search.
type found struct {
	outcome    outcome
	start, end int // end is len(input) for a partial match
	caps       [maxGroups]span
}

// group returns capture n.
func (f found) group(n int) span { return f.caps[n] }

// search finds the leftmost full match in s at or after from; failing that, the leftmost
// position from which the rest of s could still become a match (a partial match).
func (pt pattern) search(s string, from int) found {
	partialAt := -1
	for i := from; i < len(s); i++ {
		c := s[i]
		if !pt.first(c) {
			continue
		}
		// A match starting inside a run of spaces also starts at the run's first space.
		if isRegexSpace(c) && i > from && isRegexSpace(s[i-1]) {
			continue
		}
		m := &matcher{s: s}
		for g := range m.caps {
			m.caps[g] = span{-1, -1}
		}
		end := -1
		o := pt.p.match(m, i, func(j int) outcome { end = j; return fullMatch })
		switch {
		case o == fullMatch:
			return found{outcome: fullMatch, start: i, end: end, caps: m.caps}
		case o == partialMatch && partialAt < 0:
			partialAt = i
		}
	}
	if partialAt >= 0 {
		return found{outcome: partialMatch, start: partialAt, end: len(s)}
	}
	return found{outcome: noMatch}
}

// matchAt matches pt at exactly position i.
func (pt pattern) matchAt(s string, i int) found {
	m := &matcher{s: s}
	for g := range m.caps {
		m.caps[g] = span{-1, -1}
	}
	end := -1
	switch pt.p.match(m, i, func(j int) outcome { end = j; return fullMatch }) {
	case fullMatch:
		return found{outcome: fullMatch, start: i, end: end, caps: m.caps}
	case partialMatch:
		return found{outcome: partialMatch, start: i, end: len(s)}
	}
	return found{outcome: noMatch}
}

// anyOf builds a first-byte filter from the bytes listed and, with spaceToo, whitespace.
func anyOf(bytes string, spaceToo bool) func(c byte) bool {
	return func(c byte) bool {
		return strings.IndexByte(bytes, c) >= 0 || (spaceToo && isRegexSpace(c))
	}
}

// The openers, as llama.cpp's parsers (common/chat-parser.cpp) write them.
var (
	// hermesOpen: an optional ``` block start (group 1), an optional wrapping tag (group 2) and a
	// JSON object starting with "name" (group 3); or <function=NAME> (group 4) or
	// <function name="NAME"> (group 5).
	hermesOpen = pattern{
		p: alt{
			seq{
				opt(group{1, seq{lit{"```"}, opt(lit{"xml", "json"}), lit{"\n"}, spaces{}}}),
				opt(group{2, lit{"<tool_call>", "<function_call>", "<tool>", "<tools>", "<response>", "<json>", "<xml>", "<JSON>"}}),
				group{3, seq{spaces{}, lit{"{"}, spaces{}, lit{`"name"`}}},
			},
			seq{lit{"<function="}, group{4, notIn(">")}, lit{">"}},
			seq{lit{`<function name="`}, group{5, notIn(`"`)}, lit{`">`}},
		},
		first: anyOf("`<{", true),
	}

	// llama3Call: {"name": "NAME", "parameters": (optionally "type": "function" first). llama.cpp
	// wants exactly one space after the last colon; any whitespace is accepted here, since a
	// grammar-constrained model may write none.
	llama3Call = pattern{
		p: seq{
			spaces{}, lit{"{"}, spaces{},
			opt(seq{lit{`"type"`}, spaces{}, lit{":"}, spaces{}, lit{`"function"`}, spaces{}, lit{","}, spaces{}}),
			lit{`"name"`}, spaces{}, lit{":"}, spaces{}, lit{`"`}, group{1, notIn(`"`)}, lit{`"`},
			spaces{}, lit{","}, spaces{}, lit{`"parameters"`}, spaces{}, lit{":"}, spaces{},
		},
		first: anyOf("{", true),
	}

	pythonTag = pattern{p: lit{"<|python_tag|>"}, first: anyOf("<", false)}

	// builtinCall: NAME.call( after the python tag; builtinArg: NAME= before each argument.
	builtinCall = pattern{p: seq{spaces{}, group{1, word}, spaces{}, lit{"."}, spaces{}, lit{"call("}}, first: func(byte) bool { return true }}
	builtinArg  = pattern{p: seq{spaces{}, group{1, word}, spaces{}, lit{"="}, spaces{}}, first: func(byte) bool { return true }}

	mistralPrefix = pattern{p: lit{"[TOOL_CALLS]"}, first: anyOf("[", false)}
)
