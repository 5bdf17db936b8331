package peg

import (
	"strings"
	"unicode/utf8"
)

// status is how a parser ended: it failed, matched, or ran out of input while still matching
// (the output may go on; llama.cpp's NEED_MORE_INPUT).
type status uint8

const (
	fail status = iota
	ok
	more
)

// Node is a tagged span of the input.
type Node struct {
	Tag        string
	Start, End int
	Kids       []*Node
	Partial    bool // the span was cut short by the end of the input
}

type result struct {
	st    status
	end   int
	nodes []*Node
}

// maxSteps bounds the work one parse may do, so a hostile input cannot make a parser with
// nested repetitions run for long.
const maxSteps = 1 << 22

type parser struct {
	in    string
	steps int
}

// Parse runs root over in leniently (the input may continue) and returns the tagged spans and
// whether the parse failed, with where it stopped.
func Parse(root *P, in string) (nodes []*Node, failed bool, end int) {
	ps := &parser{in: in}
	r := ps.run(root, 0)
	return r.nodes, r.st == fail, r.end
}

func (ps *parser) run(p *P, pos int) result {
	ps.steps++
	if ps.steps > maxSteps {
		return result{st: fail, end: pos}
	}
	in := ps.in
	switch p.kind {
	case kEps:
		return result{st: ok, end: pos}
	case kLiteral:
		n := len(p.text)
		if pos+n <= len(in) {
			if in[pos:pos+n] == p.text {
				return result{st: ok, end: pos + n}
			}
			return result{st: fail, end: pos}
		}
		if strings.HasPrefix(p.text, in[pos:]) {
			return result{st: more, end: len(in)}
		}
		return result{st: fail, end: pos}
	case kSeq:
		var nodes []*Node
		for _, k := range p.kids {
			r := ps.run(k, pos)
			switch r.st {
			case fail:
				return result{st: fail, end: r.end}
			case more:
				return result{st: more, end: r.end, nodes: append(nodes, r.nodes...)}
			}
			nodes = append(nodes, r.nodes...)
			pos = r.end
		}
		return result{st: ok, end: pos, nodes: nodes}
	case kChoice:
		last := result{st: fail, end: pos}
		for _, k := range p.kids {
			r := ps.run(k, pos)
			if r.st != fail {
				return r
			}
			last = r
		}
		return result{st: fail, end: last.end}
	case kRepeat:
		var nodes []*Node
		count := 0
		for p.max < 0 || count < p.max {
			if pos >= len(in) {
				break
			}
			r := ps.run(p.kids[0], pos)
			if r.st == fail {
				break
			}
			if r.st == more {
				return result{st: more, end: r.end, nodes: append(nodes, r.nodes...)}
			}
			nodes = append(nodes, r.nodes...)
			count++
			if r.end == pos {
				break
			}
			pos = r.end
		}
		if count < p.min {
			if pos >= len(in) {
				return result{st: more, end: pos, nodes: nodes}
			}
			return result{st: fail, end: pos}
		}
		return result{st: ok, end: pos, nodes: nodes}
	case kUntil:
		return ps.until(p.delims, pos)
	case kSpace:
		for pos < len(in) && isSpace(in[pos]) {
			pos++
		}
		return result{st: ok, end: pos}
	case kEnd:
		if pos == len(in) {
			return result{st: ok, end: pos}
		}
		return result{st: fail, end: pos}
	case kAny:
		if pos >= len(in) {
			return result{st: more, end: pos}
		}
		r, n := utf8.DecodeRuneInString(in[pos:])
		if r == utf8.RuneError && n <= 1 {
			if !utf8.FullRuneInString(in[pos:]) {
				return result{st: more, end: pos}
			}
			return result{st: fail, end: pos}
		}
		return result{st: ok, end: pos + n}
	case kJSON:
		st, end := jsonValue(in, pos)
		return result{st: st, end: end}
	case kStringContent:
		st, end := stringContent(in, pos, p.text[0])
		return result{st: st, end: end}
	case kChars:
		count := 0
		for (p.max < 0 || count < p.max) && pos < len(in) {
			r, n := utf8.DecodeRuneInString(in[pos:])
			if !inClass(p.class, r) {
				break
			}
			pos += n
			count++
		}
		if count < p.min {
			if pos >= len(in) {
				return result{st: more, end: pos}
			}
			return result{st: fail, end: pos}
		}
		return result{st: ok, end: pos}
	case kPeek:
		r := ps.run(p.kids[0], pos)
		return result{st: r.st, end: pos}
	case kNot:
		r := ps.run(p.kids[0], pos)
		switch r.st {
		case ok:
			return result{st: fail, end: pos}
		case more:
			return result{st: more, end: pos}
		}
		return result{st: ok, end: pos}
	case kTag:
		r := ps.run(p.kids[0], pos)
		if r.st == fail {
			return r
		}
		n := &Node{Tag: p.name, Start: pos, End: r.end, Kids: r.nodes, Partial: r.st == more}
		return result{st: r.st, end: r.end, nodes: []*Node{n}}
	case kAtomic:
		r := ps.run(p.kids[0], pos)
		if r.st == more {
			r.nodes = nil
		}
		return r
	case kRule, kSchema:
		return ps.run(p.kids[0], pos)
	}
	return result{st: fail, end: pos}
}

// until scans code points from pos to the first complete delimiter, or a delimiter's prefix
// that runs to the end of the input; at the end of the input it needs more.
func (ps *parser) until(delims []string, pos int) result {
	in := ps.in
	for i := pos; i < len(in); {
		for _, d := range delims {
			if strings.HasPrefix(in[i:], d) || strings.HasPrefix(d, in[i:]) {
				return result{st: ok, end: i}
			}
		}
		r, n := utf8.DecodeRuneInString(in[i:])
		if r == utf8.RuneError && n <= 1 && !utf8.FullRuneInString(in[i:]) {
			return result{st: more, end: i}
		}
		i += n
	}
	return result{st: more, end: len(in)}
}

func inClass(class []runeRange, r rune) bool {
	for _, c := range class {
		if r >= c.lo && r <= c.hi {
			return true
		}
	}
	return false
}

// stringContent scans a JSON string's inside up to the unescaped quote q. Cut off inside an
// escape, it stops before the backslash so a partial string never ends in half an escape.
func stringContent(in string, pos int, q byte) (status, int) {
	i := pos
	for i < len(in) {
		c := in[i]
		switch {
		case c == q:
			return ok, i
		case c == '\\':
			if i+1 >= len(in) {
				return more, i
			}
			switch in[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't', '\'':
				i += 2
			case 'u':
				j := i + 2
				for ; j < len(in) && j < i+6; j++ {
					if !isHex(in[j]) {
						return fail, j
					}
				}
				if j < i+6 {
					return more, i
				}
				i = j
			default:
				return fail, i
			}
		default:
			r, n := utf8.DecodeRuneInString(in[i:])
			if r == utf8.RuneError && n <= 1 && !utf8.FullRuneInString(in[i:]) {
				return more, i
			}
			i += n
		}
	}
	return more, i
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// jsonValue matches one JSON value at pos: more when the input ends inside it.
func jsonValue(in string, pos int) (status, int) {
	pos = skipSpace(in, pos)
	if pos >= len(in) {
		return more, pos
	}
	switch c := in[pos]; {
	case c == '{':
		return jsonContainer(in, pos, '}', true)
	case c == '[':
		return jsonContainer(in, pos, ']', false)
	case c == '"':
		st, end := stringContent(in, pos+1, '"')
		if st != ok {
			return st, end
		}
		return ok, end + 1
	case c == 't':
		return jsonWord(in, pos, "true")
	case c == 'f':
		return jsonWord(in, pos, "false")
	case c == 'n':
		return jsonWord(in, pos, "null")
	case c == '-' || c >= '0' && c <= '9':
		return jsonNumber(in, pos)
	}
	return fail, pos
}

func skipSpace(in string, pos int) int {
	for pos < len(in) && isSpace(in[pos]) {
		pos++
	}
	return pos
}

func jsonWord(in string, pos int, w string) (status, int) {
	if strings.HasPrefix(in[pos:], w) {
		return ok, pos + len(w)
	}
	if strings.HasPrefix(w, in[pos:]) {
		return more, len(in)
	}
	return fail, pos
}

// jsonNumber needs more at the end of the input: the number may go on.
func jsonNumber(in string, pos int) (status, int) {
	i := pos
	for i < len(in) && strings.IndexByte("0123456789+-.eE", in[i]) >= 0 {
		i++
	}
	if i == len(in) {
		return more, i
	}
	if i == pos || in[i-1] == '-' || in[i-1] == '.' || in[i-1] == 'e' || in[i-1] == 'E' || in[i-1] == '+' {
		return fail, i
	}
	return ok, i
}

func jsonContainer(in string, pos int, closer byte, object bool) (status, int) {
	i := skipSpace(in, pos+1)
	if i >= len(in) {
		return more, i
	}
	if in[i] == closer {
		return ok, i + 1
	}
	for {
		if object {
			if i >= len(in) {
				return more, i
			}
			if in[i] != '"' {
				return fail, i
			}
			st, end := stringContent(in, i+1, '"')
			if st != ok {
				return st, end
			}
			i = skipSpace(in, end+1)
			if i >= len(in) {
				return more, i
			}
			if in[i] != ':' {
				return fail, i
			}
			i++
		}
		st, end := jsonValue(in, i)
		if st != ok {
			return st, end
		}
		i = skipSpace(in, end)
		if i >= len(in) {
			return more, i
		}
		switch in[i] {
		case ',':
			i = skipSpace(in, i+1)
		case closer:
			return ok, i + 1
		default:
			return fail, i
		}
	}
}
