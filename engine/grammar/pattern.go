package grammar

import (
	"fmt"
	"strings"
)

// dotClass is what `.` matches inside a JSON string: one unescaped character.
const dotClass = `[^"\\\x7F\x00-\x1F]`

// pattern converts an anchored regular expression (JSON Schema "pattern")
// to a rule body for a JSON string whose contents match it. Supported:
// literals, escapes, `.`, classes, \d \w \s (and negations), groups
// (including (?:...)), alternation and the quantifiers * + ? {m} {m,} {m,n}.
func (c *converter) pattern(re string) (string, error) {
	if !strings.HasPrefix(re, "^") || !strings.HasSuffix(re, "$") {
		return "", fmt.Errorf("grammar: pattern %q must start with ^ and end with $", re)
	}
	p := &reParser{src: []rune(re[1 : len(re)-1])}
	body, err := p.alternation()
	if err == nil && p.pos < len(p.src) {
		err = fmt.Errorf("unbalanced )")
	}
	if err != nil {
		return "", fmt.Errorf("grammar: pattern %q: %w", re, err)
	}
	return `"\"" (` + body + `) "\"" space`, nil
}

type reParser struct {
	src []rune
	pos int
}

func (p *reParser) alternation() (string, error) {
	var alts []string
	for {
		seq, err := p.sequence()
		if err != nil {
			return "", err
		}
		alts = append(alts, seq)
		if p.pos >= len(p.src) || p.src[p.pos] != '|' {
			return strings.Join(alts, " | "), nil
		}
		p.pos++
	}
}

func (p *reParser) sequence() (string, error) {
	var items []string
	for p.pos < len(p.src) && p.src[p.pos] != '|' && p.src[p.pos] != ')' {
		item, err := p.atom()
		if err != nil {
			return "", err
		}
		item += p.quantifier()
		items = append(items, item)
	}
	if len(items) == 0 {
		return `""`, nil
	}
	return strings.Join(items, " "), nil
}

// quantifier copies a quantifier (dropping a lazy/possessive suffix).
func (p *reParser) quantifier() string {
	if p.pos >= len(p.src) {
		return ""
	}
	var q string
	switch c := p.src[p.pos]; c {
	case '*', '+', '?':
		q = string(c)
		p.pos++
	case '{':
		end := p.pos
		for end < len(p.src) && p.src[end] != '}' {
			end++
		}
		if end == len(p.src) {
			return ""
		}
		q = string(p.src[p.pos : end+1])
		p.pos = end + 1
	default:
		return ""
	}
	if p.pos < len(p.src) && (p.src[p.pos] == '?' || p.src[p.pos] == '+') {
		p.pos++
	}
	return q
}

func (p *reParser) atom() (string, error) {
	c := p.src[p.pos]
	p.pos++
	switch c {
	case '(':
		if p.pos+1 < len(p.src) && p.src[p.pos] == '?' && p.src[p.pos+1] == ':' {
			p.pos += 2
		}
		inner, err := p.alternation()
		if err != nil {
			return "", err
		}
		if p.pos >= len(p.src) || p.src[p.pos] != ')' {
			return "", fmt.Errorf("unbalanced (")
		}
		p.pos++
		return "(" + inner + ")", nil
	case '[':
		return p.class()
	case '.':
		return dotClass, nil
	case '\\':
		if p.pos >= len(p.src) {
			return "", fmt.Errorf("trailing backslash")
		}
		e := p.src[p.pos]
		p.pos++
		switch e {
		case 'd', 'w', 's':
			return "[" + classEscape(e) + "]", nil
		case 'D', 'W', 'S':
			return "[^" + classEscape(e+'a'-'A') + "]", nil
		}
		return charLiteral(escapeRune(e)), nil
	case '*', '+', '?', '{':
		return "", fmt.Errorf("quantifier %q without an item", c)
	}
	return charLiteral(c), nil
}

// class translates a bracket expression; the opening [ is consumed.
func (p *reParser) class() (string, error) {
	var b strings.Builder
	b.WriteByte('[')
	if p.pos < len(p.src) && p.src[p.pos] == '^' {
		b.WriteByte('^')
		p.pos++
	}
	first := true
	for {
		if p.pos >= len(p.src) {
			return "", fmt.Errorf("unterminated [")
		}
		c := p.src[p.pos]
		p.pos++
		switch {
		case c == ']' && !first:
			b.WriteByte(']')
			return b.String(), nil
		case c == '\\' && p.pos < len(p.src):
			e := p.src[p.pos]
			p.pos++
			if e == 'd' || e == 'w' || e == 's' {
				b.WriteString(classEscape(e))
			} else {
				b.WriteString(classChar(escapeRune(e)))
			}
		case c == '-' && !first && p.pos < len(p.src) && p.src[p.pos] != ']':
			b.WriteByte('-')
		default:
			b.WriteString(classChar(c))
		}
		first = false
	}
}

func classEscape(e rune) string {
	switch e {
	case 'd':
		return "0-9"
	case 'w':
		return "a-zA-Z0-9_"
	}
	return ` \t\n\r\f\v`
}

func escapeRune(e rune) rune {
	switch e {
	case 'n':
		return '\n'
	case 't':
		return '\t'
	case 'r':
		return '\r'
	case 'f':
		return '\f'
	case 'v':
		return '\v'
	}
	return e
}

// classChar writes a code point for a GBNF character class.
func classChar(r rune) string {
	switch {
	case r == ']' || r == '[' || r == '\\' || r == '-' || r == '^' || r == '"':
		return `\` + string(r)
	case r < 0x20 || r == 0x7F:
		return fmt.Sprintf(`\x%02X`, r)
	}
	return string(r)
}

// charLiteral returns a GBNF literal for a character as it appears inside a
// JSON string (quotes, backslashes and control characters escaped).
func charLiteral(r rune) string {
	enc := jsonString(string(r))
	return literal(enc[1 : len(enc)-1])
}
