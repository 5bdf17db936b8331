package autoparse

import (
	"strings"
	"unicode/utf8"
)

// This is the small PEG that llama.cpp's analysis builds throw-away parsers with. The input is
// always complete. Tags record the text their parser matched, only inside a successful parse;
// on duplicate names the last one in pre-order wins.

// pnode matches at pos and returns where it ended.
type pnode func(m *matcher, pos int) (int, bool)

type capture struct {
	name       string
	start, end int
}

type matcher struct {
	in   string
	caps []capture
}

// pegResult is a parse's outcome: success and the tagged texts.
type pegResult struct {
	ok   bool
	tags map[string]string
}

// tag returns the text tagged name, or "" when there is none.
func (r pegResult) tag(name string) string { return r.tags[name] }

func run(p pnode, s string, pos int) pegResult {
	m := &matcher{in: s}
	if _, ok := p(m, pos); !ok {
		return pegResult{}
	}
	tags := map[string]string{}
	for _, c := range m.caps {
		tags[c.name] = s[c.start:c.end]
	}
	return pegResult{ok: true, tags: tags}
}

// parseAndExtract parses s from its start; it need not reach the end.
func parseAndExtract(p pnode, s string) pegResult { return run(p, s, 0) }

// parseAnywhere parses from each byte position of s in turn and returns the first success
// (the end position is never tried for a non-empty s).
func parseAnywhere(p pnode, s string) pegResult {
	if s == "" {
		return run(p, s, 0)
	}
	for i := 0; i < len(s); i++ {
		if r := run(p, s, i); r.ok {
			return r
		}
	}
	return pegResult{}
}

func lit(s string) pnode {
	return func(m *matcher, pos int) (int, bool) {
		if strings.HasPrefix(m.in[pos:], s) {
			return pos + len(s), true
		}
		return pos, false
	}
}

func seq(ps ...pnode) pnode {
	return func(m *matcher, pos int) (int, bool) {
		mark := len(m.caps)
		cur := pos
		for _, p := range ps {
			e, ok := p(m, cur)
			if !ok {
				m.caps = m.caps[:mark]
				return pos, false
			}
			cur = e
		}
		return cur, true
	}
}

func choice(ps ...pnode) pnode {
	return func(m *matcher, pos int) (int, bool) {
		for _, p := range ps {
			mark := len(m.caps)
			if e, ok := p(m, pos); ok {
				return e, true
			}
			m.caps = m.caps[:mark]
		}
		return pos, false
	}
}

// space matches spaces, tabs and newlines (not carriage returns).
func space() pnode {
	return func(m *matcher, pos int) (int, bool) {
		for pos < len(m.in) && (m.in[pos] == ' ' || m.in[pos] == '\t' || m.in[pos] == '\n') {
			pos++
		}
		return pos, true
	}
}

// anyChar matches one UTF-8 code point.
func anyChar() pnode {
	return func(m *matcher, pos int) (int, bool) {
		r, n := utf8.DecodeRuneInString(m.in[pos:])
		if n == 0 || r == utf8.RuneError && n == 1 {
			return pos, false
		}
		return pos + n, true
	}
}

func negate(p pnode) pnode {
	return func(m *matcher, pos int) (int, bool) {
		mark := len(m.caps)
		_, ok := p(m, pos)
		m.caps = m.caps[:mark]
		return pos, !ok
	}
}

func optional(p pnode) pnode {
	return func(m *matcher, pos int) (int, bool) {
		mark := len(m.caps)
		if e, ok := p(m, pos); ok {
			return e, true
		}
		m.caps = m.caps[:mark]
		return pos, true
	}
}

func zeroOrMore(p pnode) pnode {
	return func(m *matcher, pos int) (int, bool) {
		for pos < len(m.in) {
			mark := len(m.caps)
			e, ok := p(m, pos)
			if !ok || e == pos {
				m.caps = m.caps[:mark]
				break
			}
			pos = e
		}
		return pos, true
	}
}

// untilOneOf consumes code points up to where a delimiter starts, or where the rest of the
// input is the beginning of a delimiter. With no delimiters it consumes everything.
func untilOneOf(delims ...string) pnode {
	return func(m *matcher, pos int) (int, bool) {
		for pos < len(m.in) {
			rest := m.in[pos:]
			for _, d := range delims {
				if strings.HasPrefix(rest, d) || strings.HasPrefix(d, rest) {
					return pos, true
				}
			}
			r, n := utf8.DecodeRuneInString(rest)
			if r == utf8.RuneError && n == 1 {
				return pos, true
			}
			pos += n
		}
		return pos, true
	}
}

func until(d string) pnode { return untilOneOf(d) }

func rest() pnode { return untilOneOf() }

func end() pnode {
	return func(m *matcher, pos int) (int, bool) { return pos, pos == len(m.in) }
}

// marker matches a <...> or [...] run up to its first closer.
func marker() pnode {
	return choice(
		seq(lit("<"), until(">"), lit(">")),
		seq(lit("["), until("]"), lit("]")),
	)
}

func tag(name string, p pnode) pnode {
	return func(m *matcher, pos int) (int, bool) {
		idx := len(m.caps)
		m.caps = append(m.caps, capture{name: name})
		e, ok := p(m, pos)
		if !ok {
			m.caps = m.caps[:idx]
			return pos, false
		}
		m.caps[idx] = capture{name: name, start: pos, end: e}
		return e, true
	}
}

// lastMarkerTail matches a marker followed only by non-marker text up to the end.
func lastMarkerTail() pnode {
	return seq(marker(), zeroOrMore(seq(negate(marker()), anyChar())), end())
}

// lastMarkerAndTail returns the last marker of s with the text after it, or "" and false when
// s has none.
func lastMarkerAndTail(s string) (string, bool) {
	tail := lastMarkerTail()
	r := parseAndExtract(seq(zeroOrMore(seq(negate(tail), anyChar())), tag("t", tail)), s)
	return r.tag("t"), r.ok
}

// findLastMarker returns the last marker in s, or "".
func findLastMarker(s string) string {
	tail := lastMarkerTail()
	return parseAnywhere(seq(zeroOrMore(seq(negate(tail), anyChar())), tag("m", marker())), s).tag("m")
}

// findFirstMarker returns the first marker in s, or "".
func findFirstMarker(s string) string {
	return parseAnywhere(tag("m", marker()), s).tag("m")
}
