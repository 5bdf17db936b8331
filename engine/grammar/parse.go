package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxRepeat bounds the counts of {m,n} so a typo cannot expand a grammar
// into millions of rules.
const maxRepeat = 10000

// parser holds the state of one Parse call.
type parser struct {
	src      string
	pos      int
	g        *Grammar
	defined  []bool
	firstRef []int // rule id -> offset of its first reference, -1 if none
	size     int   // elements made so far, repetitions expanded, and their generated rules: see expand
}

// bail aborts parsing; Parse recovers it and returns the error.
type bail struct{ err *Error }

// Parse parses GBNF grammar text. Errors are *Error values naming the line
// and column of the problem.
func Parse(src string) (g *Grammar, err error) {
	p := &parser{src: src, g: &Grammar{ids: map[string]int{}, src: src}}
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(bail)
			if !ok {
				panic(r)
			}
			g, err = nil, b.err
		}
	}()
	p.space(true)
	for p.pos < len(p.src) {
		p.parseRule()
		p.space(true)
	}
	if len(p.g.rules) == 0 {
		p.fail(p.pos, "grammar has no rules")
	}
	for id := range p.g.rules {
		if !p.defined[id] {
			p.fail(p.firstRef[id], fmt.Sprintf("undefined rule %q", p.g.names[id]))
		}
	}
	if err := p.g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	return p.g, nil
}

func (p *parser) fail(off int, msg string) {
	if off > len(p.src) {
		off = len(p.src)
	}
	line := 1 + strings.Count(p.src[:off], "\n")
	col := 1 + utf8.RuneCountInString(p.src[strings.LastIndexByte(p.src[:off], '\n')+1:off])
	panic(bail{&Error{Line: line, Col: col, Msg: msg}})
}

// symbol returns the id of the named rule, creating an undefined one.
func (p *parser) symbol(name string, refAt int) int {
	id, ok := p.g.ids[name]
	if !ok {
		id = p.newRule(name)
	}
	if refAt >= 0 && p.firstRef[id] < 0 {
		p.firstRef[id] = refAt
	}
	return id
}

func (p *parser) newRule(name string) int {
	id := len(p.g.rules)
	p.g.ids[name] = id
	p.g.names = append(p.g.names, name)
	p.g.rules = append(p.g.rules, nil)
	p.defined = append(p.defined, false)
	p.firstRef = append(p.firstRef, -1)
	return id
}

// generated creates a helper rule named after base, with the given body.
func (p *parser) generated(base string, body []element) int {
	id := p.newRule(fmt.Sprintf("%s__%d", base, len(p.g.rules)))
	p.g.rules[id] = body
	p.defined[id] = true
	return id
}

func (p *parser) peek() byte {
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

// space skips blanks and comments, and newlines when newlineOK.
func (p *parser) space(newlineOK bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
				p.pos++
			}
		case newlineOK && (c == '\n' || c == '\r'):
			p.pos++
		default:
			return
		}
	}
}

func isWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

func (p *parser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isWordChar(p.src[p.pos]) {
		p.pos++
	}
	if p.pos == start {
		p.fail(start, "expecting a rule name")
	}
	return p.src[start:p.pos]
}

func (p *parser) parseRule() {
	start := p.pos
	name := p.name()
	p.space(false)
	if !strings.HasPrefix(p.src[p.pos:], "::=") {
		p.fail(p.pos, "expecting ::=")
	}
	p.pos += 3
	p.space(true)
	id := p.symbol(name, -1)
	if p.defined[id] {
		p.fail(start, fmt.Sprintf("rule %q defined twice", name))
	}
	p.defined[id] = true
	p.g.rules[id] = p.alternates(name, false)
	if c := p.peek(); c != 0 && c != '\n' && c != '\r' {
		p.fail(p.pos, fmt.Sprintf("unexpected %q, expecting newline or end of input", c))
	}
}

// alternates parses `seq | seq | ...` and returns the rule body.
func (p *parser) alternates(name string, nested bool) []element {
	var out []element
	out = p.sequence(name, out, nested)
	for p.peek() == '|' {
		p.pos++
		p.space(true)
		p.expand(p.pos, 1)
		out = append(out, element{typ: elemAlt})
		out = p.sequence(name, out, nested)
	}
	return append(out, element{typ: elemEnd})
}

func (p *parser) sequence(name string, out []element, nested bool) []element {
	last := -1 // start of the last symbol, for repetition operators
	for p.pos < len(p.src) {
		start := p.pos
		switch c := p.src[p.pos]; {
		case c == '"':
			p.pos++
			last = len(out)
			for p.peek() != '"' {
				if p.pos >= len(p.src) {
					p.fail(start, "unterminated string literal")
				}
				p.expand(start, 1)
				out = append(out, element{elemChar, p.char()})
			}
			p.pos++
		case c == '[':
			p.pos++
			last = len(out)
			typ := elemChar
			if p.peek() == '^' {
				p.pos++
				typ = elemCharNot
			}
			if p.peek() == ']' {
				p.fail(start, "empty character class")
			}
			for p.peek() != ']' {
				if p.pos >= len(p.src) {
					p.fail(start, "unterminated character class")
				}
				p.expand(start, 1)
				out = append(out, element{typ, p.char()})
				typ = elemCharAlt
				if p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
					p.pos++
					lo := out[len(out)-1].val
					hi := p.char()
					if hi < lo {
						p.fail(start, "character range out of order")
					}
					p.expand(start, 1)
					out = append(out, element{elemCharRng, hi})
				}
			}
			p.pos++
		case isWordChar(c):
			last = len(out)
			id := p.symbol(p.name(), start)
			p.expand(start, 1)
			out = append(out, element{elemRuleRef, rune(id)})
		case c == '(':
			p.pos++
			p.space(true)
			last = len(out)
			body := p.alternates(name, true)
			if p.peek() != ')' {
				p.fail(start, "unbalanced parenthesis: expecting )")
			}
			p.pos++
			p.expand(start, 1)
			out = append(out, element{elemRuleRef, rune(p.generated(name, body))})
		case c == '.':
			p.pos++
			last = len(out)
			p.expand(start, 1)
			out = append(out, element{typ: elemCharAny})
		case c == '*' || c == '+' || c == '?' || c == '{':
			if last < 0 {
				p.fail(start, fmt.Sprintf("expecting an item before %q", c))
			}
			lo, hi := p.repetition()
			out = p.repeat(name, out, last, lo, hi, start)
			last = -1
		default:
			return out
		}
		p.space(nested)
	}
	return out
}

// repetition parses a repetition operator; hi < 0 means unbounded.
func (p *parser) repetition() (lo, hi int) {
	c := p.src[p.pos]
	p.pos++
	switch c {
	case '*':
		return 0, -1
	case '+':
		return 1, -1
	case '?':
		return 0, 1
	}
	start := p.pos - 1
	p.space(false)
	lo = p.integer(start)
	hi = lo
	p.space(false)
	if p.peek() == ',' {
		p.pos++
		p.space(false)
		hi = -1
		if p.peek() >= '0' && p.peek() <= '9' {
			hi = p.integer(start)
		}
		p.space(false)
	}
	if p.peek() != '}' {
		p.fail(start, "expecting } to close the repetition")
	}
	p.pos++
	if hi >= 0 && hi < lo {
		p.fail(start, "repetition maximum is less than its minimum")
	}
	return lo, hi
}

func (p *parser) integer(start int) int {
	begin := p.pos
	for p.peek() >= '0' && p.peek() <= '9' {
		p.pos++
	}
	n, err := strconv.Atoi(p.src[begin:p.pos])
	if err != nil || n > maxRepeat {
		p.fail(start, "expecting a repetition count up to "+strconv.Itoa(maxRepeat))
	}
	return n
}

// repeat replaces the symbol at out[last:] with lo..hi copies of it.
func (p *parser) repeat(name string, out []element, last, lo, hi, off int) []element {
	sym := append([]element(nil), out[last:]...)
	// Each copy costs its elements; each optional one a generated rule too, named after name.
	perRule := len(name)/8 + 8
	p.expand(off, lo*len(sym))
	if hi > lo {
		p.expand(off, (hi-lo)*(len(sym)+perRule))
	}
	out = out[:last]
	for range lo {
		out = append(out, sym...)
	}
	alt := element{typ: elemAlt}
	end := element{typ: elemEnd}
	if hi < 0 {
		// rec ::= sym rec |
		id := p.generated(name, nil)
		body := append(append([]element(nil), sym...), element{elemRuleRef, rune(id)}, alt, end)
		p.g.rules[id] = body
		return append(out, element{elemRuleRef, rune(id)})
	}
	prev := -1
	for range hi - lo {
		// opt ::= sym opt' |
		body := append([]element(nil), sym...)
		if prev >= 0 {
			body = append(body, element{elemRuleRef, rune(prev)})
		}
		prev = p.generated(name, append(body, alt, end))
	}
	if prev >= 0 {
		out = append(out, element{elemRuleRef, rune(prev)})
	}
	return out
}

// char parses one character of a literal or class, handling escapes.
func (p *parser) char() rune {
	start := p.pos
	if p.pos >= len(p.src) {
		p.fail(start, "unexpected end of input")
	}
	if p.src[p.pos] != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		if r == utf8.RuneError && n <= 1 {
			p.fail(start, "invalid UTF-8")
		}
		p.pos += n
		return r
	}
	p.pos++
	if p.pos >= len(p.src) {
		p.fail(start, "unexpected end of input in escape")
	}
	c := p.src[p.pos]
	p.pos++
	digits := 0
	switch c {
	case 'x':
		digits = 2
	case 'u':
		digits = 4
	case 'U':
		digits = 8
	case 't':
		return '\t'
	case 'r':
		return '\r'
	case 'n':
		return '\n'
	case '\\', '"', '[', ']', '-', '^':
		return rune(c)
	default:
		p.fail(start, fmt.Sprintf("unknown escape \\%c", c))
	}
	if p.pos+digits > len(p.src) {
		p.fail(start, "truncated escape")
	}
	v, err := strconv.ParseUint(p.src[p.pos:p.pos+digits], 16, 32)
	if err != nil || v > utf8.MaxRune {
		p.fail(start, fmt.Sprintf("bad escape %s", p.src[start:p.pos+digits]))
	}
	p.pos += digits
	return rune(v)
}
