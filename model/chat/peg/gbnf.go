package peg

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// SchemaRules converts a JSON schema into GBNF whose entry rule is "root" (other rules may
// include "space"); the grammar writer renames its rules under the schema's name.
type SchemaRules func(schema json.RawMessage) (string, error)

// spaceRule is llama.cpp's json-schema-to-grammar "space" rule, which Space() becomes.
const spaceRule = `| " " | "\n"{1,2} [ \t]{0,20}`

// Grammar writes the GBNF that constrains output to what root parses. A lazy grammar starts at
// the trigger rules (root ::= their names, sorted), the part of the output after a trigger
// word; otherwise it covers the whole output.
func Grammar(root *P, lazy bool, schemaRules SchemaRules) (string, error) {
	w := &gbnfWriter{rules: map[string]string{}, byNode: map[*P]string{}, schemas: map[string]string{}, schemaRules: schemaRules}
	var top string
	if lazy {
		var names []string
		for _, r := range triggerRules(root) {
			names = append(names, w.rule(r))
		}
		if len(names) == 0 {
			return "", fmt.Errorf("peg: a lazy grammar needs a trigger rule")
		}
		top = strings.Join(names, " | ")
	} else {
		top = w.expr(root)
	}
	if w.err != nil {
		return "", w.err
	}
	w.rules["root"] = top
	names := make([]string, 0, len(w.rules))
	for n := range w.rules {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s ::= %s\n", n, w.rules[n])
	}
	return b.String(), nil
}

type gbnfWriter struct {
	rules       map[string]string
	byNode      map[*P]string
	schemas     map[string]string // schema name → its rule
	schemaRules SchemaRules
	untils      int
	err         error
}

// ruleName makes name a GBNF identifier not yet taken.
func (w *gbnfWriter) ruleName(name string) string {
	var b strings.Builder
	for _, c := range name {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	base := b.String()
	if base == "" || base == "root" || base == "space" {
		base = "r-" + base
	}
	n := base
	for i := 2; ; i++ {
		if _, taken := w.rules[n]; !taken {
			return n
		}
		n = base + "-" + strconv.Itoa(i)
	}
}

// rule writes p (a Rule) once and returns its name.
func (w *gbnfWriter) rule(p *P) string {
	if n, ok := w.byNode[p]; ok {
		return n
	}
	n := w.ruleName(p.name)
	w.byNode[p] = n
	w.rules[n] = "" // reserve the name while the body is written (rules may recurse)
	w.rules[n] = w.expr(p.kids[0])
	return n
}

// group writes p as an item that can be followed by a quantifier or sit in a sequence.
func (w *gbnfWriter) group(p *P) string {
	for p.kind == kTag || p.kind == kAtomic {
		p = p.kids[0]
	}
	s := w.expr(p)
	if p.kind == kSeq || p.kind == kChoice || p.kind == kRepeat && s != "" {
		return "( " + s + " )"
	}
	if s == "" {
		return `""`
	}
	return s
}

func (w *gbnfWriter) expr(p *P) string {
	switch p.kind {
	case kEps, kEnd, kPeek, kNot:
		return ""
	case kLiteral:
		if p.text == "" {
			return ""
		}
		return quote(p.text)
	case kSeq:
		var parts []string
		for _, k := range p.kids {
			if s := w.expr(k); s != "" {
				if inner := unwrap(k); inner.kind == kChoice || inner.kind == kSeq {
					s = "( " + s + " )"
				}
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, " ")
	case kChoice:
		var parts []string
		for _, k := range p.kids {
			s := w.expr(k)
			if s == "" {
				s = `""`
			} else if unwrap(k).kind == kChoice {
				s = "( " + s + " )"
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, " | ")
	case kRepeat:
		g := w.group(p.kids[0])
		switch {
		case p.min == 0 && p.max == 1:
			return g + "?"
		case p.min == 0 && p.max < 0:
			return g + "*"
		case p.min == 1 && p.max < 0:
			return g + "+"
		case p.max < 0:
			return fmt.Sprintf("%s{%d,}", g, p.min)
		case p.min == p.max:
			return fmt.Sprintf("%s{%d}", g, p.min)
		}
		return fmt.Sprintf("%s{%d,%d}", g, p.min, p.max)
	case kUntil:
		if len(p.delims) == 0 {
			return "[^\\x00]*"
		}
		return w.excluding(p.delims)
	case kSpace:
		w.rules["space"] = spaceRule
		return "space"
	case kAny:
		return "."
	case kJSON:
		return w.schema("json-value", json.RawMessage(`{}`))
	case kStringContent:
		q := p.text
		if q == `"` {
			q = `\"`
		}
		return fmt.Sprintf(`( [^%s\\] | "\\" ( [%s\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )*`, q, q)
	case kChars:
		var b strings.Builder
		b.WriteByte('[')
		for _, r := range p.class {
			b.WriteString(classChar(r.lo))
			if r.hi != r.lo {
				b.WriteByte('-')
				b.WriteString(classChar(r.hi))
			}
		}
		b.WriteByte(']')
		switch {
		case p.min == 1 && p.max < 0:
			b.WriteByte('+')
		case p.min == 0 && p.max < 0:
			b.WriteByte('*')
		case p.max < 0:
			fmt.Fprintf(&b, "{%d,}", p.min)
		default:
			fmt.Fprintf(&b, "{%d,%d}", p.min, p.max)
		}
		return b.String()
	case kTag, kAtomic:
		return w.expr(p.kids[0])
	case kRule:
		return w.rule(p)
	case kSchema:
		return w.schema(p.name, p.schema)
	}
	return ""
}

func unwrap(p *P) *P {
	for p.kind == kTag || p.kind == kAtomic {
		p = p.kids[0]
	}
	return p
}

// schema writes the rules of a JSON schema under name, once per name.
func (w *gbnfWriter) schema(name string, s json.RawMessage) string {
	if n, done := w.schemas[name]; done {
		return n
	}
	n := w.ruleName(name)
	w.schemas[name] = n
	if w.schemaRules == nil {
		w.err = fmt.Errorf("peg: no JSON schema converter for %s", name)
		return ""
	}
	src, err := w.schemaRules(s)
	if err != nil {
		w.err = err
		return ""
	}
	local := map[string]bool{}
	for _, line := range strings.Split(src, "\n") {
		if i := strings.Index(line, " ::= "); i > 0 {
			local[strings.TrimSpace(line[:i])] = true
		}
	}
	rename := func(id string) string {
		switch {
		case id == "space" || !local[id]:
			return id
		case id == "root":
			return n
		}
		return n + "-" + id
	}
	for _, line := range strings.Split(src, "\n") {
		i := strings.Index(line, " ::= ")
		if i <= 0 {
			continue
		}
		id := strings.TrimSpace(line[:i])
		w.rules[rename(id)] = renameRefs(line[i+5:], rename)
	}
	return n
}

// renameRefs renames the rule references of a GBNF rule body, leaving literals and classes.
func renameRefs(body string, rename func(string) string) string {
	var b strings.Builder
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '"' || c == '[':
			end := byte('"')
			if c == '[' {
				end = ']'
			}
			j := i + 1
			for j < len(body) && body[j] != end {
				if body[j] == '\\' {
					j++
				}
				j++
			}
			if j < len(body) {
				j++
			}
			b.WriteString(body[i:j])
			i = j
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= '0' && c <= '9' && i > 0 && isIdent(body[i-1]):
			j := i
			for j < len(body) && isIdent(body[j]) {
				j++
			}
			b.WriteString(rename(body[i:j]))
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func isIdent(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// quote writes s as a GBNF string literal.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&b, `\x%02X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

func classChar(r rune) string {
	switch r {
	case ']', '[', '\\', '-', '^':
		return `\` + string(r)
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	return string(r)
}

// excluding writes rules for the strings that contain none of delims: an Aho-Corasick
// automaton over the delimiters' characters, one rule per state that has not completed a
// delimiter, each able to stop or read a character that does not complete one.
func (w *gbnfWriter) excluding(delims []string) string {
	type state struct {
		next map[rune]int
		fail int
		done bool
	}
	states := []state{{next: map[rune]int{}}}
	alphabet := map[rune]bool{}
	for _, d := range delims {
		s := 0
		for _, r := range d {
			alphabet[r] = true
			n, ok := states[s].next[r]
			if !ok {
				states = append(states, state{next: map[rune]int{}})
				n = len(states) - 1
				states[s].next[r] = n
			}
			s = n
		}
		states[s].done = true
	}
	letters := make([]rune, 0, len(alphabet))
	for r := range alphabet {
		letters = append(letters, r)
	}
	sort.Slice(letters, func(i, j int) bool { return letters[i] < letters[j] })
	// Breadth-first failure links; a state whose failure is done is done too.
	queue := []int{}
	for _, r := range letters {
		if n, ok := states[0].next[r]; ok {
			queue = append(queue, n)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, r := range letters {
			n, ok := states[s].next[r]
			if !ok {
				continue
			}
			f := states[s].fail
			for {
				if m, ok := states[f].next[r]; ok && m != n {
					states[n].fail = m
					break
				}
				if f == 0 {
					break
				}
				f = states[f].fail
			}
			if states[states[n].fail].done {
				states[n].done = true
			}
			queue = append(queue, n)
		}
	}
	step := func(s int, r rune) int {
		for {
			if n, ok := states[s].next[r]; ok {
				return n
			}
			if s == 0 {
				return 0
			}
			s = states[s].fail
		}
	}
	w.untils++
	base := w.ruleName(fmt.Sprintf("until-%d", w.untils))
	name := func(s int) string {
		if s == 0 {
			return base
		}
		return fmt.Sprintf("%s-s%d", base, s)
	}
	var other strings.Builder
	other.WriteString("[^")
	for _, r := range letters {
		other.WriteString(classChar(r))
	}
	other.WriteString("]")
	for s := range states {
		if states[s].done {
			continue
		}
		alts := []string{other.String() + " " + base}
		for _, r := range letters {
			n := step(s, r)
			if states[n].done {
				continue
			}
			alts = append(alts, quote(string(r))+" "+name(n))
		}
		w.rules[name(s)] = "( " + strings.Join(alts, " | ") + " )?"
	}
	return base
}
