package toolcall

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// JSON that a model may still be writing.
//
// llama.cpp parses partial JSON by "healing" it (closing what is open around a marker) and cuts
// the re-serialised arguments at the marker. The same effect comes here from a parser that keeps
// what it read of an unfinished value and a writer that stops where the value stops being
// certain: the text written for a partial value is always a prefix of the text written once it
// is complete, so streamed argument fragments only ever append.

// jkind is a JSON value's type.
type jkind uint8

const (
	jObject jkind = iota
	jArray
	jString
	jNumber
	jLiteral // true, false, null
)

// jvalue is a parsed JSON value; complete is false for the value the input ended in (and every
// container around it).
type jvalue struct {
	kind     jkind
	complete bool
	text     string    // string: decoded text; number, literal: source text
	members  []jmember // object
	elems    []*jvalue // array
	comma    bool      // a ',' was read after the last member or element
}

// jmember is one member of an object: its key (keyDone once the key's closing quote was read),
// whether the ':' was read, and its value once one has started.
type jmember struct {
	key     string
	keyDone bool
	colon   bool
	value   *jvalue
}

// field returns the value of the first member named key whose key is complete, or nil.
func (v *jvalue) field(key string) *jvalue {
	if v == nil || v.kind != jObject {
		return nil
	}
	for i := range v.members {
		if m := &v.members[i]; m.keyDone && m.key == key {
			return m.value
		}
	}
	return nil
}

// has reports whether v is an object with a complete key named key.
func (v *jvalue) has(key string) bool {
	if v == nil || v.kind != jObject {
		return false
	}
	for _, m := range v.members {
		if m.keyDone && m.key == key {
			return true
		}
	}
	return false
}

// completeString returns v's text when v is a complete string.
func (v *jvalue) completeString() (string, bool) {
	if v == nil || v.kind != jString || !v.complete {
		return "", false
	}
	return v.text, true
}

// jsonResult says how a JSON value at some position parsed.
type jsonResult uint8

const (
	jsonInvalid    jsonResult = iota // not JSON here
	jsonIncomplete                   // the input ended inside the value
	jsonComplete
)

// parseJSON reads one JSON value starting at s[i] (after optional whitespace). It returns the
// value, the position after it, and whether it is complete; an incomplete value is one the input
// ended in, and comes back as far as it was read.
func parseJSON(s string, i int) (*jvalue, int, jsonResult) {
	p := jsonParser{s: s}
	v, j, r := p.value(skipSpace(s, i))
	return v, j, r
}

type jsonParser struct{ s string }

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *jsonParser) value(i int) (*jvalue, int, jsonResult) {
	s := p.s
	if i >= len(s) {
		return nil, i, jsonIncomplete
	}
	switch c := s[i]; {
	case c == '{':
		return p.object(i + 1)
	case c == '[':
		return p.array(i + 1)
	case c == '"':
		return p.str(i + 1)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(i)
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			rest := s[i:]
			if strings.HasPrefix(rest, lit) {
				return &jvalue{kind: jLiteral, complete: true, text: lit}, i + len(lit), jsonComplete
			}
			if len(rest) < len(lit) && strings.HasPrefix(lit, rest) {
				return &jvalue{kind: jLiteral, text: rest}, len(s), jsonIncomplete
			}
		}
	}
	return nil, i, jsonInvalid
}

func (p *jsonParser) object(i int) (*jvalue, int, jsonResult) {
	s := p.s
	v := &jvalue{kind: jObject}
	i = skipSpace(s, i)
	if i < len(s) && s[i] == '}' {
		v.complete = true
		return v, i + 1, jsonComplete
	}
	for {
		i = skipSpace(s, i)
		if i >= len(s) {
			return v, i, jsonIncomplete
		}
		if s[i] != '"' {
			return nil, i, jsonInvalid
		}
		key, j, r := p.str(i + 1)
		v.comma = false
		if r != jsonComplete {
			if r == jsonIncomplete {
				v.members = append(v.members, jmember{key: key.text})
			}
			return v, j, r
		}
		m := jmember{key: key.text, keyDone: true}
		i = skipSpace(s, j)
		if i >= len(s) {
			v.members = append(v.members, m)
			return v, i, jsonIncomplete
		}
		if s[i] != ':' {
			return nil, i, jsonInvalid
		}
		m.colon = true
		i = skipSpace(s, i+1)
		val, j, r := p.value(i)
		if r == jsonInvalid {
			return nil, j, r
		}
		m.value = val
		v.members = append(v.members, m)
		if r == jsonIncomplete {
			return v, j, r
		}
		i = skipSpace(s, j)
		if i >= len(s) {
			return v, i, jsonIncomplete
		}
		switch s[i] {
		case ',':
			v.comma = true
			i++
		case '}':
			v.complete = true
			return v, i + 1, jsonComplete
		default:
			return nil, i, jsonInvalid
		}
	}
}

func (p *jsonParser) array(i int) (*jvalue, int, jsonResult) {
	s := p.s
	v := &jvalue{kind: jArray}
	i = skipSpace(s, i)
	if i < len(s) && s[i] == ']' {
		v.complete = true
		return v, i + 1, jsonComplete
	}
	for {
		i = skipSpace(s, i)
		if i >= len(s) {
			return v, i, jsonIncomplete
		}
		v.comma = false
		el, j, r := p.value(i)
		if r == jsonInvalid {
			return nil, j, r
		}
		v.elems = append(v.elems, el)
		if r == jsonIncomplete {
			return v, j, r
		}
		i = skipSpace(s, j)
		if i >= len(s) {
			return v, i, jsonIncomplete
		}
		switch s[i] {
		case ',':
			v.comma = true
			i++
		case ']':
			v.complete = true
			return v, i + 1, jsonComplete
		default:
			return nil, i, jsonInvalid
		}
	}
}

// str reads a string body after its opening quote.
func (p *jsonParser) str(i int) (*jvalue, int, jsonResult) {
	s := p.s
	var b strings.Builder
	v := &jvalue{kind: jString}
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"':
			v.text, v.complete = b.String(), true
			return v, i + 1, jsonComplete
		case c < 0x20:
			return nil, i, jsonInvalid
		case c != '\\':
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			v.text = b.String()
			return v, len(s), jsonIncomplete
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, n, res := hex4pair(s, i)
			if res != jsonComplete {
				if res == jsonIncomplete {
					v.text = b.String()
					return v, len(s), jsonIncomplete
				}
				return nil, i, jsonInvalid
			}
			b.WriteRune(r)
			i += n
			continue
		default:
			return nil, i, jsonInvalid
		}
		i += 2
	}
	v.text = b.String()
	return v, len(s), jsonIncomplete
}

// hex4pair decodes the \uXXXX escape at s[i:] and, for a high surrogate, the low surrogate
// escape after it; n is the source length consumed.
func hex4pair(s string, i int) (r rune, n int, res jsonResult) {
	first, res := hex4(s, i)
	if res != jsonComplete {
		return 0, 0, res
	}
	if !utf16.IsSurrogate(first) {
		return first, 6, jsonComplete
	}
	if first >= 0xDC00 { // a lone low surrogate
		return utf8.RuneError, 6, jsonComplete
	}
	rest := s[i+6:]
	if len(rest) < 2 && strings.HasPrefix(`\u`, rest) {
		return 0, 0, jsonIncomplete
	}
	if !strings.HasPrefix(rest, `\u`) {
		return utf8.RuneError, 6, jsonComplete
	}
	second, res := hex4(s, i+6)
	if res != jsonComplete {
		return 0, 0, res
	}
	if second < 0xDC00 || second > 0xDFFF {
		return utf8.RuneError, 6, jsonComplete
	}
	return utf16.DecodeRune(first, second), 12, jsonComplete
}

// hex4 decodes the four hex digits of the \u escape at s[i:].
func hex4(s string, i int) (rune, jsonResult) {
	digits := s[i+2:]
	if len(digits) > 4 {
		digits = digits[:4]
	}
	for j := 0; j < len(digits); j++ {
		if !isHex(digits[j]) {
			return 0, jsonInvalid
		}
	}
	if len(digits) < 4 {
		return 0, jsonIncomplete
	}
	v, _ := strconv.ParseUint(digits, 16, 32)
	return rune(v), jsonComplete
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number reads a JSON number. One that reaches the end of the input is incomplete: more
// digits may follow.
func (p *jsonParser) number(i int) (*jvalue, int, jsonResult) {
	s := p.s
	start := i
	if s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	incomplete := func() (*jvalue, int, jsonResult) {
		return &jvalue{kind: jNumber, text: s[start:]}, len(s), jsonIncomplete
	}
	if digits() == 0 {
		if i >= len(s) {
			return incomplete()
		}
		return nil, i, jsonInvalid
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			if i >= len(s) {
				return incomplete()
			}
			return nil, i, jsonInvalid
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			if i >= len(s) {
				return incomplete()
			}
			return nil, i, jsonInvalid
		}
	}
	if i >= len(s) {
		return incomplete()
	}
	return &jvalue{kind: jNumber, complete: true, text: s[start:i]}, i, jsonComplete
}
