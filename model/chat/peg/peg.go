// Package peg is the parsing-expression-grammar engine llama.cpp's chat parsers are built from
// (common/peg-parser.cpp and common/chat-peg-parser.cpp): combinators that read a model's output
// into tagged spans (reasoning, content, tool calls and their parts), leniently, so that output
// still being generated parses as far as it goes; a mapper that turns the spans into a message;
// and a GBNF writer that turns the same parser into the grammar that constrains sampling.
package peg

import (
	"encoding/json"
	"sort"
)

// kind is what a parser node does.
type kind uint8

const (
	kEps kind = iota
	kLiteral
	kSeq
	kChoice
	kRepeat
	kUntil
	kSpace
	kEnd
	kAny
	kJSON
	kStringContent
	kChars
	kPeek
	kNot
	kTag
	kAtomic
	kRule
	kSchema
)

// P is a parser: a node of the expression tree. Build them with the functions of this package;
// a P is immutable once built and may be shared by several parents.
type P struct {
	kind     kind
	text     string // literal text; string_content's quote
	kids     []*P
	min, max int      // repetition bounds; max < 0 is unbounded
	delims   []string // until's delimiters
	name     string   // tag, rule or schema name
	trigger  bool     // a rule a lazy grammar starts from
	schema   json.RawMessage
	class    []runeRange // chars
}

type runeRange struct{ lo, hi rune }

// Eps matches the empty string.
func Eps() *P { return &P{kind: kEps} }

// Lit matches s exactly.
func Lit(s string) *P { return &P{kind: kLiteral, text: s} }

// Seq matches its parts one after the other. Nested sequences are flattened.
func Seq(parts ...*P) *P {
	var kids []*P
	for _, p := range parts {
		switch {
		case p == nil:
		case p.kind == kSeq:
			kids = append(kids, p.kids...)
		case p.kind == kEps:
		default:
			kids = append(kids, p)
		}
	}
	if len(kids) == 0 {
		return Eps()
	}
	if len(kids) == 1 {
		return kids[0]
	}
	return &P{kind: kSeq, kids: kids}
}

// Choice matches the first alternative that does not fail (ordered choice). Nested choices are
// flattened; an empty choice always fails.
func Choice(alts ...*P) *P {
	var kids []*P
	for _, p := range alts {
		if p == nil {
			continue
		}
		if p.kind == kChoice {
			kids = append(kids, p.kids...)
			continue
		}
		kids = append(kids, p)
	}
	if len(kids) == 1 {
		return kids[0]
	}
	return &P{kind: kChoice, kids: kids}
}

// Repeat matches p between min and max times (max < 0: no limit), greedily.
func Repeat(p *P, min, max int) *P { return &P{kind: kRepeat, kids: []*P{p}, min: min, max: max} }

// Opt matches p or nothing.
func Opt(p *P) *P { return Repeat(p, 0, 1) }

// Star matches p any number of times.
func Star(p *P) *P { return Repeat(p, 0, -1) }

// Plus matches p once or more.
func Plus(p *P) *P { return Repeat(p, 1, -1) }

// Until matches text up to (not including) the first of delims, or up to a prefix of one that
// runs to the end of the input; with no delimiters, all the rest.
func Until(delims ...string) *P {
	var ds []string
	for _, d := range delims {
		if d != "" {
			ds = append(ds, d)
		}
	}
	return &P{kind: kUntil, delims: ds}
}

// Rest matches everything left.
func Rest() *P { return &P{kind: kUntil} }

// Space matches any run of whitespace.
func Space() *P { return &P{kind: kSpace} }

// End matches only at the end of the input.
func End() *P { return &P{kind: kEnd} }

// Any matches one character (a UTF-8 code point).
func Any() *P { return &P{kind: kAny} }

// JSON matches one JSON value.
func JSON() *P { return &P{kind: kJSON} }

// StringContent matches the inside of a JSON string quoted by quote, up to the closing quote.
func StringContent(quote byte) *P { return &P{kind: kStringContent, text: string(quote)} }

// Chars matches between min and max (max < 0: no limit) characters of a class written as in
// a regular expression's brackets, e.g. "0-9" or "a-zA-Z_".
func Chars(class string, min, max int) *P {
	var rs []runeRange
	r := []rune(class)
	for i := 0; i < len(r); i++ {
		if i+2 < len(r) && r[i+1] == '-' {
			rs = append(rs, runeRange{r[i], r[i+2]})
			i += 2
			continue
		}
		rs = append(rs, runeRange{r[i], r[i]})
	}
	return &P{kind: kChars, class: rs, min: min, max: max}
}

// Peek matches what p matches without consuming it.
func Peek(p *P) *P { return &P{kind: kPeek, kids: []*P{p}} }

// Not succeeds, consuming nothing, where p fails.
func Not(p *P) *P { return &P{kind: kNot, kids: []*P{p}} }

// Tag marks what p matches with name, for the mapper.
func Tag(name string, p *P) *P { return &P{kind: kTag, name: name, kids: []*P{p}} }

// Atomic makes p all or nothing: while p is still incomplete it yields no tags.
func Atomic(p *P) *P { return &P{kind: kAtomic, kids: []*P{p}} }

// Rule names p, which becomes a rule of the grammar.
func Rule(name string, p *P) *P { return &P{kind: kRule, name: name, kids: []*P{p}} }

// TriggerRule is a Rule that a lazy grammar starts from once its trigger is seen.
func TriggerRule(name string, p *P) *P {
	return &P{kind: kRule, name: name, kids: []*P{p}, trigger: true}
}

// Schema parses as p, and constrains the grammar by the JSON schema s (rules named name).
func Schema(p *P, name string, s json.RawMessage) *P {
	return &P{kind: kSchema, name: name, kids: []*P{p}, schema: s}
}

// Tags the chat mapper reads.
const (
	TagReasoning   = "reasoning"
	TagContent     = "content"
	TagTool        = "tool"
	TagToolOpen    = "tool-open"
	TagToolClose   = "tool-close"
	TagToolID      = "tool-id"
	TagToolName    = "tool-name"
	TagToolArgs    = "tool-args"
	TagToolArg     = "tool-arg"
	TagArgOpen     = "tool-arg-open"
	TagArgClose    = "tool-arg-close"
	TagArgName     = "tool-arg-name"
	TagArgString   = "tool-arg-string-value"
	TagArgJSON     = "tool-arg-value"
	TagArgRequired = "tool-required-arg:"
	// Tags that write JSON punctuation the output does not hold, for formats that write
	// nested values as nested elements (MiniMax-M3).
	TagEmit     = "tool-arg-emit:" // + the text to write
	TagEmitKey  = "tool-arg-key:"  // + a key to write, after a comma when one is due
	TagEmitItem = "tool-arg-item"  // an array item starts: a comma when one is due
)

// Emit writes text into the arguments where it matches (the empty string).
func Emit(text string) *P { return Tag(TagEmit+text, Eps()) }

// EmitKey writes an object key (and the comma before it, unless it is the first).
func EmitKey(name string) *P { return Tag(TagEmitKey+name, Eps()) }

// EmitItem starts an array item (writing the comma before it, unless it is the first).
func EmitItem() *P { return Tag(TagEmitItem, Eps()) }

// Reasoning tags p as reasoning text.
func Reasoning(p *P) *P { return Tag(TagReasoning, p) }

// Content tags p as content text.
func Content(p *P) *P { return Tag(TagContent, p) }

// Tool tags a whole tool call.
func Tool(p *P) *P { return Tag(TagTool, p) }

// ToolOpen tags a call's opening, which starts a new call once complete.
func ToolOpen(p *P) *P { return Atomic(Tag(TagToolOpen, p)) }

// ToolClose tags a call's closing.
func ToolClose(p *P) *P { return Atomic(Tag(TagToolClose, p)) }

// ToolID tags a call id.
func ToolID(p *P) *P { return Atomic(Tag(TagToolID, p)) }

// ToolName tags a function name.
func ToolName(p *P) *P { return Atomic(Tag(TagToolName, p)) }

// ToolArgs tags the JSON text of a call's arguments.
func ToolArgs(p *P) *P { return Tag(TagToolArgs, p) }

// ToolArg tags one argument written as tags.
func ToolArg(p *P) *P { return Tag(TagToolArg, p) }

// ToolArgOpen tags an argument's opening.
func ToolArgOpen(p *P) *P { return Atomic(Tag(TagArgOpen, p)) }

// ToolArgClose tags an argument's closing.
func ToolArgClose(p *P) *P { return Atomic(Tag(TagArgClose, p)) }

// ToolArgName tags an argument's name.
func ToolArgName(p *P) *P { return Atomic(Tag(TagArgName, p)) }

// ToolArgString tags an argument value that is raw string text.
func ToolArgString(p *P) *P { return Tag(TagArgString, p) }

// ToolArgJSON tags an argument value written as JSON (or a Python literal).
func ToolArgJSON(p *P) *P { return Tag(TagArgJSON, p) }

// OptSpace matches tag with each of its leading and trailing whitespace characters optional
// (llama.cpp's optspace), e.g. "<think>\n" as "<think>" "\n"?.
func OptSpace(tag string) *P {
	i, j := 0, len(tag)
	for i < j && isSpace(tag[i]) {
		i++
	}
	for j > i && isSpace(tag[j-1]) {
		j--
	}
	var parts []*P
	for k := 0; k < i; k++ {
		parts = append(parts, Opt(Lit(tag[k:k+1])))
	}
	parts = append(parts, Lit(tag[i:j]))
	for k := j; k < len(tag); k++ {
		parts = append(parts, Opt(Lit(tag[k:k+1])))
	}
	return Seq(parts...)
}

// Prefix matches the part of s before delim (all of s when delim is "" or absent): the
// generation prompt's text before the reasoning opener, which the reasoning parser reads.
func Prefix(s, delim string) *P {
	if s == "" {
		return Eps()
	}
	if delim != "" {
		if i := indexOf(s, delim); i >= 0 {
			return Lit(s[:i])
		}
	}
	return Lit(s)
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// triggerRules lists the trigger rules reachable from root, sorted by name.
func triggerRules(root *P) []*P {
	seen := map[*P]bool{}
	byName := map[string]*P{}
	var walk func(p *P)
	walk = func(p *P) {
		if seen[p] {
			return
		}
		seen[p] = true
		if p.kind == kRule && p.trigger {
			if _, ok := byName[p.name]; !ok {
				byName[p.name] = p
			}
		}
		for _, k := range p.kids {
			walk(k)
		}
	}
	walk(root)
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*P, len(names))
	for i, n := range names {
		out[i] = byName[n]
	}
	return out
}
